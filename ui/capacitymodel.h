#pragma once

// CapacityModel: per provider, what the next call would meet now — the core's Capacity
// figures (core/quota/capacity.h) for the last snapshot at the time given to tick(), turned into
// the texts and the ok / near / blocked level the capacity tiles show. It does no capacity
// arithmetic of its own and no I/O; the clock is whatever the caller passes (tests use a
// fixed one), so the same snapshot and time always give the same rows.

#include "dashboardsnapshot.h"

#include <QObject>
#include <QStringList>
#include <QVector>

namespace tollgate::ui {

class CapacityModel final : public QObject
{
    Q_OBJECT
public:
    enum class Level { Ok, Near, Blocked, Unstyled };
    // How the plan line is coloured: as stated (Allowed, Warning, Rejected) or old (a window
    // it names has reset since: the figures are of an earlier window).
    enum class PlanLevel { None, Allowed, Warning, Rejected, Old };
    struct Row
    {
        QString provider;
        Level level = Level::Ok;
        QString headline; // "12 left", "BLOCKED", "PAUSED", "BACKING OFF", "unlimited"
        QString next; // "next free in 8 s"; empty when a request can go now
        QStringList details; // requests, tokens, slots, backoff / pause reason
        QString tooltip;
        // A subscription plan's windows, like `tollgate status`'s PLAN line: "plan: 5 h 42%
        // (resets in 1 h 10 min), 7 d 63% (resets in 3 d 4 h)"; empty: no plan stated.
        QString plan;
        PlanLevel planLevel = PlanLevel::None;
        bool operator==(const Row&) const = default;
    };

    explicit CapacityModel(QObject* parent = nullptr);

    void setSnapshot(const DashboardSnapshot& snapshot, qint64 nowMs);
    void tick(qint64 nowMs);

    [[nodiscard]] const QVector<Row>& rows() const { return m_rows; }
    [[nodiscard]] const Row* row(const QString& provider) const;
    [[nodiscard]] qint64 nowMs() const { return m_nowMs; } // of the rows

Q_SIGNALS:
    void changed(); // rows() differ from before

private:
    void rebuild();

    QuotaLimits m_limits;
    QuotaState m_state;
    bool m_hasState = false;
    // Whose limits do not parse: every command refuses (exit 3) until they are fixed, so no
    // provider can take a call, whatever its state says.
    bool m_limitsCorrupt = false;
    QString m_corruptFile; // the limits file, or a Redis home's limits key
    QString m_corruptReason;
    qint64 m_nowMs = 0;
    QVector<Row> m_rows;
};

} // namespace tollgate::ui
