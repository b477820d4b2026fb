#include "quota/limitmismatch.h"

#include <numeric>

namespace tollgate {

bool LimitMismatch::differs(std::int64_t reported, std::optional<std::int64_t> given, std::int64_t windowMs)
{
    if (reported < 0)
        return false;
    if (!given)
        return true;
    // reported × W = given × 60,000 exactly when given = q·W' and reported = q·M' for one q
    // (W' = W/g, M' = 60,000/g, g = gcd): no product is formed, so nothing can overflow — and
    // the Redis script, whose numbers are doubles, decides it the same way.
    if (windowMs < 1 || *given < 0)
        return true;
    const std::int64_t g = std::gcd(windowMs, std::int64_t(60000));
    const std::int64_t wq = windowMs / g;
    const std::int64_t mq = 60000 / g;
    return !(*given % wq == 0 && reported % mq == 0 && *given / wq == reported / mq);
}

std::string LimitMismatch::describe(const std::string& budget, std::int64_t reported,
    std::optional<std::int64_t> given, std::int64_t windowMs)
{
    std::string out = "provider reports " + std::to_string(reported) + " " + budget + "/min; ";
    if (!given)
        return out + "Tollgate sets no " + (budget == "requests" ? "request" : "token") + " limit";
    out += "Tollgate is set to " + std::to_string(*given);
    if (windowMs != 60000) {
        // A window that is not a minute: say it as set, not a rounded rate the user never typed.
        out += " per ";
        out += windowMs % 1000 == 0 ? std::to_string(windowMs / 1000) + " s"
                                    : std::to_string(windowMs) + " ms";
    }
    return out;
}

std::vector<LimitNotice> LimitMismatch::find(const ProviderState& state, const ProviderLimits* limits)
{
    std::vector<LimitNotice> out;
    const std::int64_t windowMs = limits ? limits->windowMs : 60000;
    auto check = [&](const std::string& budget, std::int64_t reported, std::optional<std::int64_t> given) {
        if (!differs(reported, given, windowMs))
            return;
        LimitNotice n;
        n.budget = budget;
        n.reported = reported;
        n.given = given;
        n.windowMs = windowMs;
        n.text = describe(budget, reported, given, windowMs);
        out.push_back(std::move(n));
    };
    check("requests", state.reportedRequests, limits ? limits->requests : std::nullopt);
    check("tokens", state.reportedTokens, limits ? limits->tokens : std::nullopt);
    return out;
}

} // namespace tollgate
