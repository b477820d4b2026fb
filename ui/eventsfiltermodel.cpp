#include "eventsfiltermodel.h"

#include "eventsmodel.h"

namespace tollgate::ui {

EventsFilterModel::EventsFilterModel(QObject* parent)
    : QSortFilterProxyModel(parent)
{
}

void EventsFilterModel::setTypeFilter(const QString& type)
{
    if (type == m_type)
        return;
    m_type = type;
    invalidateFilter();
}

void EventsFilterModel::setTextFilter(const QString& text)
{
    if (text == m_text)
        return;
    m_text = text;
    invalidateFilter();
}

void EventsFilterModel::setProviderFilter(const QString& provider)
{
    if (provider == m_provider)
        return;
    m_provider = provider;
    invalidateFilter();
    Q_EMIT scopeChanged();
}

void EventsFilterModel::setCallerFilter(const QString& caller)
{
    if (caller == m_caller)
        return;
    m_caller = caller;
    invalidateFilter();
    Q_EMIT scopeChanged();
}

bool EventsFilterModel::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const
{
    const QAbstractItemModel* src = sourceModel();
    if (!src)
        return false;
    if (!m_type.isEmpty()
        && src->index(sourceRow, 0, sourceParent).data(EventsModel::TypeRole).toString() != m_type)
        return false;
    if (!m_provider.isEmpty()
        && src->index(sourceRow, EventsModel::Provider, sourceParent).data().toString() != m_provider)
        return false;
    if (!m_caller.isEmpty()
        && src->index(sourceRow, EventsModel::Caller, sourceParent).data().toString() != m_caller)
        return false;
    if (m_text.isEmpty())
        return true;
    // Not the time: "429" typed to find rate limits matched every event at .429 s or 04-29.
    for (int c = 0; c < src->columnCount(sourceParent); ++c) {
        if (c == EventsModel::Time)
            continue;
        if (src->index(sourceRow, c, sourceParent).data().toString().contains(m_text, Qt::CaseInsensitive))
            return true;
    }
    return false;
}

} // namespace tollgate::ui
