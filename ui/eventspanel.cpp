#include "eventspanel.h"

#include "eventsfiltermodel.h"
#include "eventsmodel.h"
#include "history/historyevent.h"
#include "keyedtableview.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace tollgate::ui {

EventsPanel::EventsPanel(
    EventsFilterModel* events, const QKeySequence& findKey, const QString& clearScopeTip, QWidget* parent)
    : QGroupBox(tr("Events"), parent)
{
    setObjectName(QStringLiteral("eventsPanel"));
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    auto* filters = new QHBoxLayout();
    m_type = new QComboBox(this);
    m_type->setObjectName(QStringLiteral("eventType"));
    m_type->addItem(tr("All events"), QString());
    for (const EventType type : allEventTypes()) {
        const auto name = eventTypeName(type);
        const QString text = QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
        m_type->addItem(text, text);
    }
    m_text = new QLineEdit(this);
    m_text->setObjectName(QStringLiteral("eventText"));
    m_text->setPlaceholderText(
        tr("Filter: provider, caller, pid, reason… (%1)").arg(findKey.toString(QKeySequence::NativeText)));
    m_text->setClearButtonEnabled(true);
    m_scopeChip = new QPushButton(this);
    m_scopeChip->setObjectName(QStringLiteral("eventScopeChip"));
    m_scopeChip->setToolTip(clearScopeTip);
    m_scopeChip->hide();
    connect(m_scopeChip, &QPushButton::clicked, this, &EventsPanel::clearScopeRequested);
    m_newEventsChip = new QPushButton(this);
    m_newEventsChip->setObjectName(QStringLiteral("newEventsChip"));
    m_newEventsChip->setToolTip(tr("Jump to the newest event and follow the log again (End)"));
    m_newEventsChip->setStyleSheet(QStringLiteral(
        "QPushButton#newEventsChip { background: palette(highlight); color: palette(highlighted-text); "
        "border-radius: 9px; padding: 2px 10px; font-weight: bold; }"));
    m_newEventsChip->hide();
    connect(m_newEventsChip, &QPushButton::clicked, this, &EventsPanel::followRequested);
    filters->addWidget(m_type);
    filters->addWidget(m_text, 1);
    filters->addWidget(m_scopeChip);
    filters->addWidget(m_newEventsChip);

    m_view = KeyedTableView::create(this, QStringLiteral("eventsView"));
    m_view->setModel(events);
    m_view->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    m_view->horizontalHeader()->setStretchLastSection(true);
    m_view->setColumnWidth(EventsModel::Time, 170);
    m_view->setColumnWidth(EventsModel::Type, 90);
    m_view->setColumnWidth(EventsModel::Provider, 90);
    m_view->setColumnWidth(EventsModel::Caller, 120);
    m_view->setColumnWidth(EventsModel::Pid, 70);
    m_view->setContextMenuPolicy(Qt::CustomContextMenu);
    // Follow the log while the user is at its end (also across resizes); the window counts
    // what arrives while they read older lines.
    m_view->setFollowsEnd(true);
    layout->addLayout(filters);
    layout->addWidget(m_view, 1);
    connect(m_type, &QComboBox::currentIndexChanged, events,
        [this, events] { events->setTypeFilter(m_type->currentData().toString()); });
    connect(m_text, &QLineEdit::textChanged, events, &EventsFilterModel::setTextFilter);
    setTabOrder(m_type, m_text);
    setTabOrder(m_text, m_view);
}

} // namespace tollgate::ui
