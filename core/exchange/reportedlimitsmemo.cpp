#include "exchange/reportedlimitsmemo.h"

#include "quota/limitmismatch.h"

#include <algorithm>
#include <cstdlib>

namespace tollgate {

namespace {

std::int64_t keep(std::int64_t said, std::int64_t kept)
{
    return said < 0 ? kept : said;
}

bool planMoved(const PlanUsage& now, const PlanUsage& told)
{
    if (now.atMs == 0)
        return false;
    if (told.atMs == 0)
        return true;
    auto step = [](std::int64_t a, std::int64_t b) {
        return (a < 0) != (b < 0) || std::llabs(a - b) >= ReportedLimitsMemo::PLAN_STEP_PERMILLE;
    };
    return now.status != told.status || now.fiveHourResetMs != told.fiveHourResetMs
        || now.sevenDayResetMs != told.sevenDayResetMs || step(now.fiveHourPermille, told.fiveHourPermille)
        || step(now.sevenDayPermille, told.sevenDayPermille);
}

} // namespace

ReportedLimitsMemo::Report ReportedLimitsMemo::mergedLocked(const std::string& model, const Report& report) const
{
    auto it = m_told.find(model);
    if (it == m_told.end())
        return report;
    const ReportedLimits& kept = it->second.report.limits;
    Report out = report;
    out.limits.requests = keep(report.limits.requests, kept.requests);
    out.limits.tokens = keep(report.limits.tokens, kept.tokens);
    out.limits.inputTokens = keep(report.limits.inputTokens, kept.inputTokens);
    out.limits.outputTokens = keep(report.limits.outputTokens, kept.outputTokens);
    return out;
}

bool ReportedLimitsMemo::dueLocked(const std::string& model, const Report& merged, std::int64_t nowMs) const
{
    if (!merged.limits.any() && merged.plan.atMs == 0)
        return false;
    auto it = m_told.find(model);
    if (it == m_told.end())
        return true;
    const Told& t = it->second;
    // A clock that went back (nowMs < atMs) tells again: the kept time would say "still
    // reported" for longer than it was.
    return merged.limits != t.report.limits || planMoved(merged.plan, t.report.plan) || nowMs < t.atMs
        || nowMs - t.atMs >= LimitMismatch::REFRESH_MS;
}

void ReportedLimitsMemo::note(const std::string& model, const Report& report, std::int64_t nowMs,
    const std::function<bool(const Report& merged)>& tell)
{
    std::lock_guard order(m_telling);
    Report merged;
    {
        std::lock_guard lock(m_mutex);
        merged = mergedLocked(model, report);
        if (!dueLocked(model, merged, nowMs))
            return;
    }
    if (!tell(merged))
        return;
    std::lock_guard lock(m_mutex);
    if (!m_told.count(model) && m_told.size() >= MAX_MODELS) {
        auto oldest = std::min_element(m_told.begin(), m_told.end(),
            [](const auto& a, const auto& b) { return a.second.atMs < b.second.atMs; });
        m_told.erase(oldest);
    }
    Told& t = m_told[model];
    const PlanUsage keptPlan = t.report.plan;
    t.report = merged;
    if (merged.plan.atMs == 0)
        t.report.plan = keptPlan;
    t.atMs = nowMs;
}

bool ReportedLimitsMemo::due(const std::string& model, const Report& report, std::int64_t nowMs)
{
    std::lock_guard lock(m_mutex);
    return dueLocked(model, mergedLocked(model, report), nowMs);
}

} // namespace tollgate
