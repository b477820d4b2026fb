#pragma once

// EventsFilterModel: narrows the event log to one event type and/or a free-text match on
// any column (provider, caller, pid, details...).

#include <QSortFilterProxyModel>

namespace tollgate::ui {

class EventsFilterModel final : public QSortFilterProxyModel
{
    Q_OBJECT
public:
    explicit EventsFilterModel(QObject* parent = nullptr);

    void setTypeFilter(const QString& type); // empty: every type
    void setTextFilter(const QString& text);

protected:
    [[nodiscard]] bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

private:
    QString m_type;
    QString m_text;
};

} // namespace tollgate::ui
