#pragma once

// EventsFilterModel: narrows the event log to one event type, one provider and/or one caller
// (exact matches, from "Show events of…" anywhere a provider or caller is shown) and a
// free-text match on any column (provider, caller, pid, details...).

#include <QSortFilterProxyModel>

namespace tollgate::ui {

class EventsFilterModel final : public QSortFilterProxyModel
{
    Q_OBJECT
public:
    explicit EventsFilterModel(QObject* parent = nullptr);

    void setTypeFilter(const QString& type); // empty: every type
    void setTextFilter(const QString& text);
    void setProviderFilter(const QString& provider); // empty: every provider
    void setCallerFilter(const QString& caller); // empty: every caller
    [[nodiscard]] QString providerFilter() const { return m_provider; }
    [[nodiscard]] QString callerFilter() const { return m_caller; }

Q_SIGNALS:
    void scopeChanged(); // the provider or caller filter changed

protected:
    [[nodiscard]] bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

private:
    QString m_type;
    QString m_text;
    QString m_provider;
    QString m_caller;
};

} // namespace tollgate::ui
