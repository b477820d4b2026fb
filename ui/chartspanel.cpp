#include "chartspanel.h"

#include "callerusagemodel.h"
#include "chartspan.h"
#include "keyedtablemodel.h"
#include "keyedtableview.h"
#include "ratelimitcallersmodel.h"
#include "ratelimitchart.h"
#include "usagebardelegate.h"
#include "usagechart.h"

#include <QComboBox>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QVBoxLayout>

namespace tollgate::ui {

ChartsPanel::ChartsPanel(QAbstractItemModel* callerUsage, QAbstractItemModel* rateLimitCallers,
    qint64 usageSpanMs, qint64 rateLimitSpanMs, QWidget* parent)
    : QSplitter(Qt::Horizontal, parent)
{
    setObjectName(QStringLiteral("chartsSplitter"));

    auto* usageBox = new QGroupBox(tr("Per-caller usage"), this);
    auto* usageLayout = new QVBoxLayout(usageBox);
    usageLayout->setContentsMargins(4, 4, 4, 4);
    auto* usageTop = new QHBoxLayout();
    m_usageKind = new QComboBox(usageBox);
    m_usageKind->setObjectName(QStringLiteral("usageKind"));
    m_usageKind->addItem(tr("Requests"));
    m_usageKind->addItem(tr("Tokens"));
    auto* showLabel = new QLabel(tr("S&how:"), usageBox);
    showLabel->setBuddy(m_usageKind);
    m_usageSpan = makeSpanBox(usageBox, QStringLiteral("usageSpan"), usageSpanMs);
    auto* usageSpanLabel = new QLabel(tr("&Span:"), usageBox);
    usageSpanLabel->setBuddy(m_usageSpan);
    m_usageZoomReset = new QPushButton(tr("Reset zoom"), usageBox);
    m_usageZoomReset->setObjectName(QStringLiteral("usageZoomReset"));
    m_usageZoomReset->setEnabled(false);
    usageTop->addWidget(showLabel);
    usageTop->addWidget(m_usageKind);
    usageTop->addWidget(usageSpanLabel);
    usageTop->addWidget(m_usageSpan);
    usageTop->addWidget(m_usageZoomReset);
    usageTop->addStretch(1);
    m_usageChart = new UsageChart(usageBox);
    m_usageChart->setObjectName(QStringLiteral("usageChart"));
    m_usageChart->setSpan(usageSpanMs);
    m_callersView = KeyedTableView::create(usageBox, QStringLiteral("callersView"));
    auto* callersSorted = new QSortFilterProxyModel(this);
    callersSorted->setSourceModel(callerUsage);
    callersSorted->setSortRole(KeyedTableModel::SortRole);
    callersSorted->sort(CallerUsageModel::LastHour, Qt::DescendingOrder);
    m_callersView->setModel(callersSorted);
    m_callersView->setMinimumHeight(1); // folds away under the chart on a short screen
    m_callersView->setItemDelegateForColumn(CallerUsageModel::Share, new UsageBarDelegate(m_callersView));
    m_callersView->horizontalHeader()->setStretchLastSection(true);
    auto* usageSplit = new QSplitter(Qt::Vertical, usageBox);
    usageSplit->setObjectName(QStringLiteral("usageSplitter"));
    usageSplit->addWidget(m_usageChart);
    usageSplit->addWidget(m_callersView);
    usageSplit->setStretchFactor(0, 3);
    usageSplit->setStretchFactor(1, 1);
    usageLayout->addLayout(usageTop);
    usageLayout->addWidget(usageSplit, 1);
    connect(m_usageKind, &QComboBox::currentIndexChanged, this, [this](int i) {
        m_usageChart->setShowTokens(i == 1);
        Q_EMIT chartsChanged();
    });
    connect(m_usageSpan, &QComboBox::currentIndexChanged, this, [this] {
        const qint64 span = m_usageSpan->currentData().toLongLong();
        m_usageChart->setSpan(span);
        Q_EMIT usageSpanChanged(span);
        Q_EMIT chartsChanged();
    });
    connect(m_usageZoomReset, &QPushButton::clicked, m_usageChart, &TimeChartView::resetZoom);
    connect(m_usageChart, &TimeChartView::zoomChanged, m_usageZoomReset, &QWidget::setEnabled);

    auto* rateBox = new QGroupBox(tr("429 history"), this);
    auto* rateLayout = new QVBoxLayout(rateBox);
    rateLayout->setContentsMargins(4, 4, 4, 4);
    auto* rateTop = new QHBoxLayout();
    m_rateLimitSpan = makeSpanBox(rateBox, QStringLiteral("rateLimitSpan"), rateLimitSpanMs);
    auto* rateSpanLabel = new QLabel(tr("S&pan:"), rateBox);
    rateSpanLabel->setBuddy(m_rateLimitSpan);
    m_rateZoomReset = new QPushButton(tr("Reset zoom"), rateBox);
    m_rateZoomReset->setObjectName(QStringLiteral("rateZoomReset"));
    m_rateZoomReset->setEnabled(false);
    rateTop->addWidget(rateSpanLabel);
    rateTop->addWidget(m_rateLimitSpan);
    rateTop->addWidget(m_rateZoomReset);
    rateTop->addStretch(1);
    rateLayout->addLayout(rateTop);
    m_rateLimitChart = new RateLimitChart(rateBox);
    m_rateLimitChart->setObjectName(QStringLiteral("rateLimitChart"));
    m_rateLimitChart->setSpan(rateLimitSpanMs);
    m_rateLimitChart->alignWith(m_usageChart); // their time axes line up
    m_rateLimitView = KeyedTableView::create(rateBox, QStringLiteral("rateLimitView"));
    auto* rateSorted = new QSortFilterProxyModel(this);
    rateSorted->setSourceModel(rateLimitCallers);
    rateSorted->setSortRole(KeyedTableModel::SortRole);
    rateSorted->sort(RateLimitCallersModel::Count, Qt::DescendingOrder);
    m_rateLimitView->setModel(rateSorted);
    m_rateLimitView->setMinimumHeight(1);
    m_rateLimitView->horizontalHeader()->setStretchLastSection(true);
    connect(m_rateLimitSpan, &QComboBox::currentIndexChanged, this, [this] {
        const qint64 span = m_rateLimitSpan->currentData().toLongLong();
        m_rateLimitChart->setSpan(span);
        Q_EMIT rateLimitSpanChanged(span);
        Q_EMIT chartsChanged();
    });
    connect(m_rateZoomReset, &QPushButton::clicked, m_rateLimitChart, &TimeChartView::resetZoom);
    connect(m_rateLimitChart, &TimeChartView::zoomChanged, m_rateZoomReset, &QWidget::setEnabled);
    auto* rateSplit = new QSplitter(Qt::Vertical, rateBox);
    rateSplit->setObjectName(QStringLiteral("rateSplitter"));
    rateSplit->addWidget(m_rateLimitChart);
    rateSplit->addWidget(m_rateLimitView);
    rateSplit->setStretchFactor(0, 3);
    rateSplit->setStretchFactor(1, 1);
    rateLayout->addWidget(rateSplit, 1);

    // Keyboard order inside: each chart's choices, the chart, its table.
    setTabOrder(m_usageKind, m_usageSpan);
    setTabOrder(m_usageSpan, m_usageChart);
    setTabOrder(m_usageChart, m_callersView);
    setTabOrder(m_callersView, m_rateLimitSpan);
    setTabOrder(m_rateLimitSpan, m_rateLimitChart);
    setTabOrder(m_rateLimitChart, m_rateLimitView);
}

QComboBox* ChartsPanel::makeSpanBox(QWidget* parent, const QString& name, qint64 current)
{
    auto* box = new QComboBox(parent);
    box->setObjectName(name);
    box->addItem(tr("Auto"), ChartSpan::AUTO);
    for (qint64 span : ChartSpan::spans())
        box->addItem(ChartSpan::spanLabel(span), span);
    box->setToolTip(tr("How far back the chart reaches; Auto shows the data there is"));
    box->setCurrentIndex(std::max(0, box->findData(ChartSpan::sanitize(current))));
    return box;
}

} // namespace tollgate::ui
