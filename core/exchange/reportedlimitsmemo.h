#pragma once

// ReportedLimitsMemo: what the provider's answers said of its own limits (ReportedLimits) and of
// a subscription plan's usage (PlanUsage), as this process last passed it to the store, per
// model (the limits an answer states are those of its model's class, so answers for two models
// say two things). Every answer repeats them, and a store operation per answer would cost a
// locked transaction each; the store is told only when they change — a utilisation by at least
// PLAN_STEP_PERMILLE, a status or a reset at all — or LimitMismatch::REFRESH_MS has passed (the
// store's own rule again, QuotaBackend::noteReportedLimits).
//
// Invariants: thread-safe. The figures are under m_mutex, never held across a store
// operation, so due() never waits for one; note() holds m_telling across its store operation,
// so two answers with other figures reach the store in the order the memo records them (a
// call is rare: a change, or once a minute per model). What the store did not take is tried
// again with the next answer. A figure of -1 stands for "not in this answer": what is kept
// stays. At most MAX_MODELS models are remembered; the one told longest ago is forgotten first
// (it is told again at its next answer: one store operation).

#include "quota/planusage.h"
#include "quota/reportedlimits.h"

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace tollgate {

class ReportedLimitsMemo
{
public:
    static constexpr std::size_t MAX_MODELS = 64;
    static constexpr std::int64_t PLAN_STEP_PERMILLE = 10; // one percentage point

    // What an answer for `model` said (plan.atMs 0: nothing of a plan).
    struct Report
    {
        ReportedLimits limits; // scope unused here: the store decides it from the model
        PlanUsage plan;
    };

    // Tells the store (`tell`: true when it took them) of `report`, with what is kept filled
    // in for what it did not say, when worth it.
    void note(const std::string& model, const Report& report, std::int64_t nowMs,
        const std::function<bool(const Report& merged)>& tell);
    // Whether note() would tell the store now: asked before the figures are handed to a store
    // thread (most answers repeat what the store has).
    [[nodiscard]] bool due(const std::string& model, const Report& report, std::int64_t nowMs);

private:
    struct Told
    {
        Report report;
        std::int64_t atMs = 0; // 0: never told
    };

    [[nodiscard]] Report mergedLocked(const std::string& model, const Report& report) const;
    [[nodiscard]] bool dueLocked(const std::string& model, const Report& merged, std::int64_t nowMs) const;

    std::mutex m_telling; // held across tell(): the store gets the figures in the memo's order
    std::mutex m_mutex; // m_told
    std::map<std::string, Told> m_told;
};

} // namespace tollgate
