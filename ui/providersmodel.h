#pragma once

// ProvidersModel: one row per provider — its limits (editable in place), what the current
// window holds as a share of the limit, parallel slots in use, the backoff counting down,
// consecutive 429s, the queue and pauses. Fed from snapshots; tick() re-derives the
// time-dependent cells (window decay, backoff countdown) from the last snapshot without I/O.
// An edit is validated here with the core's own rules and, when valid, handed on as a
// request (limitsEditRequested); the model changes only when the next snapshot shows it.

#include "dashboardsnapshot.h"
#include "keyedtablemodel.h"

namespace tollgate::ui {

class ProvidersModel final : public KeyedTableModel
{
    Q_OBJECT
public:
    enum Column {
        Provider,
        RequestLimit,
        TokenLimit,
        Window,
        Parallel,
        RequestsUsed,
        TokensUsed,
        Slots,
        Backoff,
        Consecutive429,
        Waiting,
        Paused,
        ProviderReports, // the provider's own per-minute limits, as its headers said (proxy)
        ColumnCount
    };

    explicit ProvidersModel(QObject* parent = nullptr);

    void setSnapshot(const DashboardSnapshot& snapshot);
    void tick(qint64 nowMs);

    [[nodiscard]] Qt::ItemFlags flags(const QModelIndex& index) const override;
    bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;

    [[nodiscard]] QStringList providerNames() const;
    [[nodiscard]] std::optional<ProviderLimits> limitsOf(const QString& provider) const;
    [[nodiscard]] bool isPaused(const QString& provider) const;
    [[nodiscard]] bool inBackoff(const QString& provider) const;

Q_SIGNALS:
    void limitsEditRequested(const QString& provider, const tollgate::ProviderLimits& limits);
    void editRefused(const QString& provider, const QString& reason);

private:
    void rebuild();

    QuotaLimits m_limits;
    QuotaState m_state;
    QuotaState m_liveState; // the snapshot's liveState: capacity, as status computes it
    qint64 m_nowMs = 0;
};

} // namespace tollgate::ui
