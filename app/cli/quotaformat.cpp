// QuotaFormat: durations and limits as the shared-quota commands write them.

#include "quotaformat.h"

#include "backend/statusreport.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tollgate::cli {

using nlohmann::json;

std::string QuotaFormat::seconds(std::int64_t ms)
{
    char buf[32];
    if (ms % 1000 == 0)
        std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(ms / 1000));
    else
        std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
    return buf;
}

std::int64_t QuotaFormat::toMs(double seconds)
{
    constexpr double MAX_SECONDS = 1e15; // 31 million years: more than any history holds
    return static_cast<std::int64_t>(std::llround(std::clamp(seconds, 0.0, MAX_SECONDS) * 1000.0));
}

json QuotaFormat::limitsJson(const std::string& name, const ProviderLimits& l)
{
    return StatusReport::limitsJson(name, l);
}

std::string QuotaFormat::planWords(const ProviderCapacity& cap, std::int64_t nowMs)
{
    const PlanUsage& u = cap.plan;
    auto window = [&](const char* name, std::int64_t permille, std::int64_t resetMs) -> std::string {
        if (permille < 0 && resetMs == 0)
            return {};
        std::string w = name;
        w += permille < 0 ? std::string(" ?") : " " + std::to_string((permille + 5) / 10) + "%";
        if (resetMs > nowMs)
            w += " (resets in " + seconds(((resetMs - nowMs + 999) / 1000) * 1000) + ")";
        return w;
    };
    std::string line;
    for (const std::string& w : { window("5h", u.fiveHourPermille, u.fiveHourResetMs),
             window("7d", u.sevenDayPermille, u.sevenDayResetMs) }) {
        if (!w.empty())
            line += (line.empty() ? "" : ", ") + w;
    }
    if (u.status == PlanUsage::Status::Warning)
        line += (line.empty() ? "" : "; ") + std::string("nearly used up");
    else if (u.status == PlanUsage::Status::Rejected)
        line += (line.empty() ? "" : "; ") + std::string("USED UP: callers are held until the reset");
    if (!line.empty() && !cap.planCurrent)
        line += " (stated " + seconds(std::max<std::int64_t>(0, nowMs - u.atMs)) + " ago, before a reset)";
    return line;
}

} // namespace tollgate::cli
