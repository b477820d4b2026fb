#pragma once

// PlanAlerts: when a provider's subscription plan (PlanUsage: the 5-hour and 7-day windows the
// proxy reads from the answers) turns Warning or Rejected, one alert — once per window, not
// once per snapshot. Rejected matters most: the proxy then holds every caller until the reset.
//
// A window is named by its reset time: the window that decides the status is the one used the
// most (the higher per mille; a tie or an unknown share: the later reset). An alert is raised
// when (provider, status, that reset) was not alerted before, and only while the figures are
// current (stated, and no reset they name has passed: Capacity's planCurrent), so a Rejected of
// last night's window, still in the state, says nothing. A plan without any reset time cannot
// name its window: it is alerted again only after the status went back (Allowed) in between.
// Pure: the caller passes the state and the time; no I/O, no clock of its own.

#include "quota/planusage.h"
#include "quota/quotastate.h"

#include <QHash>
#include <QString>
#include <QVector>

namespace tollgate::ui {

class PlanAlerts
{
public:
    struct Alert
    {
        QString provider;
        PlanUsage plan; // as stated
        qint64 windowResetMs = 0; // the window alerted about (0: not stated)
    };

    // The alerts this state raises now (each at most once per window).
    QVector<Alert> update(const QuotaState& state, qint64 nowMs);

    // The reset time of the window that decides the status (see above); 0: none stated.
    [[nodiscard]] static qint64 windowResetOf(const PlanUsage& plan);

private:
    struct Seen
    {
        qint64 warningReset = -1; // -1: none alerted
        qint64 rejectedReset = -1;
    };
    QHash<QString, Seen> m_seen;
};

} // namespace tollgate::ui
