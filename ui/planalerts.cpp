#include "planalerts.h"

#include <algorithm>

namespace tollgate::ui {

qint64 PlanAlerts::windowResetOf(const PlanUsage& plan)
{
    const bool five = plan.fiveHourResetMs > 0;
    const bool seven = plan.sevenDayResetMs > 0;
    if (five && seven) {
        if (plan.fiveHourPermille != plan.sevenDayPermille && plan.fiveHourPermille >= 0
            && plan.sevenDayPermille >= 0)
            return plan.fiveHourPermille > plan.sevenDayPermille ? plan.fiveHourResetMs : plan.sevenDayResetMs;
        // Unknown or equal shares: the later reset is the one that must pass for sure.
        return std::max(plan.fiveHourResetMs, plan.sevenDayResetMs);
    }
    return five ? plan.fiveHourResetMs : (seven ? plan.sevenDayResetMs : 0);
}

QVector<PlanAlerts::Alert> PlanAlerts::update(const QuotaState& state, qint64 nowMs)
{
    QVector<Alert> out;
    for (const ProviderState& p : state.providers) {
        const PlanUsage& plan = p.plan;
        const QString provider = QString::fromStdString(p.name);
        if (plan.status == PlanUsage::Status::Allowed) {
            // Back to allowed: a plan that names no reset may alert again next time.
            if (auto it = m_seen.find(provider); it != m_seen.end()) {
                if (it->warningReset == 0)
                    it->warningReset = -1;
                if (it->rejectedReset == 0)
                    it->rejectedReset = -1;
            }
            continue;
        }
        if (plan.status != PlanUsage::Status::Warning && plan.status != PlanUsage::Status::Rejected)
            continue;
        if (!plan.current(nowMs))
            continue; // figures of a window that has reset since: nothing to warn about now
        const qint64 reset = windowResetOf(plan);
        Seen& seen = m_seen[provider];
        if (plan.status == PlanUsage::Status::Rejected) {
            if (seen.rejectedReset == reset)
                continue;
            seen.rejectedReset = reset;
            // Rejected says more than Warning: no Warning of the same window after it.
            seen.warningReset = reset;
        } else {
            if (seen.warningReset == reset)
                continue;
            seen.warningReset = reset;
        }
        out.append(Alert { provider, plan, reset });
    }
    return out;
}

} // namespace tollgate::ui
