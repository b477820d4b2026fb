#include "providerspanel.h"

#include "keyedtableview.h"
#include "limitsmodel.h"
#include "providersmodel.h"
#include "usagebardelegate.h"

#include <QHeaderView>
#include <QLabel>
#include <QTabWidget>
#include <QVBoxLayout>

namespace tollgate::ui {

ProvidersPanel::ProvidersPanel(ProvidersModel* providers, LimitsModel* limits, QWidget* parent)
    : QWidget(parent)
{
    setObjectName(QStringLiteral("providersPanel"));
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 2, 4, 2);
    m_tabs = new QTabWidget(this);
    m_tabs->setObjectName(QStringLiteral("providersTabs"));
    m_tabs->setDocumentMode(true);
    auto* editHint = new QLabel(tr("double-click a limit or press F2 to edit it"), m_tabs);
    editHint->setEnabled(false); // a hint, in the palette's quieter colour
    m_tabs->setCornerWidget(editHint, Qt::TopRightCorner);

    m_providersView = KeyedTableView::create(m_tabs, QStringLiteral("providersView"));
    m_providersView->setModel(providers);
    m_providersView->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
    auto* bars = new UsageBarDelegate(m_providersView);
    m_providersView->setItemDelegateForColumn(ProvidersModel::RequestsUsed, bars);
    m_providersView->setItemDelegateForColumn(ProvidersModel::TokensUsed, bars);
    m_providersView->setItemDelegateForColumn(ProvidersModel::Slots, bars);
    m_providersView->horizontalHeader()->setStretchLastSection(true);
    m_providersView->setContextMenuPolicy(Qt::CustomContextMenu);
    m_tabs->addTab(m_providersView, tr("P&roviders"));

    m_limitsView = KeyedTableView::create(m_tabs, QStringLiteral("limitsView"));
    m_limitsView->setModel(limits);
    m_limitsView->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
    m_limitsView->horizontalHeader()->setStretchLastSection(true);
    m_limitsView->setContextMenuPolicy(Qt::CustomContextMenu);
    m_limitsView->setToolTip(tr("Every limit of each provider and model class. Double-click or F2 edits a "
                                "cell (empty: no limit); right-click adds or removes a class."));
    m_tabs->addTab(m_limitsView, tr("&Limits and classes"));
    layout->addWidget(m_tabs);
}

} // namespace tollgate::ui
