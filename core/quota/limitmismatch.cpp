#include "quota/limitmismatch.h"

#include <algorithm>
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
    std::optional<std::int64_t> given, std::int64_t windowMs, const std::string& scope)
{
    std::string out = "provider reports " + std::to_string(reported) + " " + budget + "/min";
    if (!scope.empty())
        out += " for class " + scope;
    out += "; ";
    if (!given) {
        // "requests" -> "request", "input tokens" -> "input-token"
        std::string one = budget.substr(0, budget.size() - 1);
        std::replace(one.begin(), one.end(), ' ', '-');
        return out + "Tollgate sets no " + one + " limit";
    }
    out += "Tollgate is set to " + std::to_string(*given);
    if (windowMs != 60000) {
        // A window that is not a minute: say it as set, not a rounded rate the user never typed.
        out += " per ";
        out += windowMs % 1000 == 0 ? std::to_string(windowMs / 1000) + " s"
                                    : std::to_string(windowMs) + " ms";
    }
    return out;
}

std::vector<LimitNotice> LimitMismatch::find(const ReportedLimits& reported, const ProviderLimits* limits,
    const std::function<bool(const std::string& budget)>& only)
{
    std::vector<LimitNotice> out;
    const ModelLimits* cls = nullptr;
    if (!reported.scope.empty()) {
        if (!limits)
            return out;
        auto it = limits->models.find(reported.scope);
        if (it == limits->models.end())
            return out; // the class is gone: nothing to compare with
        cls = &it->second;
    }
    const std::int64_t windowMs = cls ? cls->windowMs : limits ? limits->windowMs : 60000;
    const std::vector<std::string> none;
    const std::vector<std::string>& learned = cls ? cls->learned : limits ? limits->learned : none;
    const Budget given = cls ? cls->perWindow() : limits ? limits->perWindow() : Budget {};
    auto check = [&](const std::string& budget, const char* key, std::int64_t figure,
                     std::optional<std::int64_t> limit) {
        // A learned limit, or an unset one while learning (it is about to be learned), follows.
        const bool follows = std::binary_search(learned.begin(), learned.end(), std::string(key))
            || (!limit && limits && limits->learn);
        if (!only(budget) || follows || !differs(figure, limit, windowMs))
            return;
        LimitNotice n;
        n.budget = budget;
        n.reported = figure;
        n.given = limit;
        n.windowMs = windowMs;
        n.text = describe(budget, figure, limit, windowMs, reported.scope);
        out.push_back(std::move(n));
    };
    check("requests", "requests", reported.requests, given.requests);
    check("tokens", "tokens", reported.tokens, given.tokens);
    check("input tokens", "input_tokens", reported.inputTokens, given.inputTokens);
    check("output tokens", "output_tokens", reported.outputTokens, given.outputTokens);
    return out;
}

std::vector<LimitNotice> LimitMismatch::find(const ProviderState& state, const ProviderLimits* limits)
{
    const ReportedLimits kept { state.reportedRequests, state.reportedTokens, state.reportedInputTokens,
        state.reportedOutputTokens, state.reportedScope };
    return find(kept, limits, [](const std::string&) { return true; });
}

} // namespace tollgate
