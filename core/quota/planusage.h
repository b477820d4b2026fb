#pragma once

// PlanUsage: a subscription plan's windows (Anthropic's Pro/Max "unified" limits: 5 hours and
// 7 days) as the last answer through the proxy stated them, kept in the provider's state for
// `status` and the dashboard. Utilisation in per mille of the window (0 .. MAX_PERMILLE: a
// plan overrun shows above 1000), resets in unix ms; -1 / 0: not stated.

#include <cstdint>

namespace tollgate {

struct PlanUsage
{
    enum class Status : std::uint8_t { Unknown = 0, Allowed = 1, Warning = 2, Rejected = 3 };
    static constexpr std::int64_t MAX_PERMILLE = 10000; // SubscriptionReport::MAX_UTILIZATION

    std::int64_t atMs = 0; // when it was stated; 0: never
    Status status = Status::Unknown;
    std::int64_t fiveHourPermille = -1;
    std::int64_t fiveHourResetMs = 0;
    std::int64_t sevenDayPermille = -1;
    std::int64_t sevenDayResetMs = 0;

    [[nodiscard]] bool known() const
    {
        return status != Status::Unknown || fiveHourPermille >= 0 || sevenDayPermille >= 0;
    }
    // Stated, and no window it named has reset since (a reset not given cannot say): the
    // figures are of the windows now running.
    [[nodiscard]] bool current(std::int64_t nowMs) const
    {
        return atMs != 0 && (fiveHourResetMs == 0 || fiveHourResetMs > nowMs)
            && (sevenDayResetMs == 0 || sevenDayResetMs > nowMs);
    }
    // The same figures, whenever stated.
    [[nodiscard]] bool sameAs(const PlanUsage& o) const
    {
        return status == o.status && fiveHourPermille == o.fiveHourPermille && fiveHourResetMs == o.fiveHourResetMs
            && sevenDayPermille == o.sevenDayPermille && sevenDayResetMs == o.sevenDayResetMs;
    }
    bool operator==(const PlanUsage&) const = default;
};

} // namespace tollgate
