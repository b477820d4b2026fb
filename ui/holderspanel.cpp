#include "holderspanel.h"

#include "holdersmodel.h"
#include "keyedtablemodel.h"
#include "keyedtableview.h"

#include <QAction>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QVBoxLayout>

namespace tollgate::ui {

namespace {

QString tipWithShortcut(const QString& tip, const QKeySequence& key)
{
    return key.isEmpty() ? tip : QStringLiteral("%1 (%2)").arg(tip, key.toString(QKeySequence::NativeText));
}

} // namespace

HoldersPanel::HoldersPanel(
    QAbstractItemModel* holders, const QAction* release, const QAction* cleanStale, QWidget* parent)
    : QGroupBox(tr("Holders — slots and lock files"), parent)
{
    setObjectName(QStringLiteral("holdersPanel"));
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    m_view = KeyedTableView::create(this, QStringLiteral("holdersView"));
    auto* sorted = new QSortFilterProxyModel(this);
    sorted->setSourceModel(holders);
    sorted->setSortRole(KeyedTableModel::SortRole);
    m_view->setModel(sorted);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(HoldersModel::Age, Qt::DescendingOrder);
    m_view->horizontalHeader()->setStretchLastSection(true);
    m_view->setContextMenuPolicy(Qt::CustomContextMenu);

    auto* buttons = new QHBoxLayout();
    m_release = new QPushButton(tr("Force release…"), this);
    m_release->setObjectName(QStringLiteral("releaseButton"));
    m_release->setToolTip(release->toolTip());
    m_clean = new QPushButton(tr("Clean stale"), this);
    m_clean->setObjectName(QStringLiteral("cleanButton"));
    m_clean->setToolTip(
        tipWithShortcut(tr("Release every slot and lock file whose holder is dead"), cleanStale->shortcut()));
    connect(m_release, &QPushButton::clicked, this, &HoldersPanel::releaseRequested);
    connect(m_clean, &QPushButton::clicked, this, &HoldersPanel::cleanRequested);
    buttons->addWidget(m_release);
    buttons->addWidget(m_clean);
    buttons->addStretch(1);
    layout->addWidget(m_view, 1);
    layout->addLayout(buttons);
    setTabOrder(m_view, m_release);
    setTabOrder(m_release, m_clean);
}

} // namespace tollgate::ui
