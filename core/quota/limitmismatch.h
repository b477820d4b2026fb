#pragma once

// LimitMismatch: where the provider's own limits — as its rate-limit headers last reported
// them (ProviderState::reported*, learned by the proxy) — differ from the limits set in
// Tollgate. The history's limit-mismatch event, `status` and the dashboard all say it in the
// words of describe(), and the Redis script builds the same words (redisquota.lua, keep both).
//
// Rule: Anthropic and OpenAI document their rate limits per minute (RPM, TPM), and their
// headers' `limit` is that figure, so a reported limit R is compared with the limit G set for
// a window of W ms scaled to a minute, exactly: they differ when R × W ≠ G × 60,000. A
// provider limit with no Tollgate limit at all is a difference too (nothing protects the key
// there). Headroom is not applied: the user compares what they set with what the provider says.
// The figures are for a scope (ProviderState::reportedScope: the class of the request's model,
// LimitLearning::scopeOf) and are compared with that scope's limits; a limit that follows the
// provider (learned) is not flagged, nor is an unset one while learning is on (it is about to
// follow), and a class no longer in the limits compares with nothing.

#include "quota/quotalimits.h"
#include "quota/quotastate.h"
#include "quota/reportedlimits.h"

#include <functional>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tollgate {

struct LimitNotice
{
    std::string budget; // "requests", "tokens", "input tokens" or "output tokens"
    std::int64_t reported = 0; // per minute, as the provider said
    std::optional<std::int64_t> given; // Tollgate's limit per window; nullopt: none set
    std::int64_t windowMs = 60000;
    std::string text; // "provider reports 40 requests/min; Tollgate is set to 60"
};

class LimitMismatch
{
public:
    // A report that says what is kept is written again only after this long (QuotaBackend::
    // noteReportedLimits): the kept time says "still reported", at one write a minute at most.
    static constexpr std::int64_t REFRESH_MS = 60000;
    // A reported figure is kept clamped to this (the largest limit Tollgate takes, 2^40).
    static constexpr std::int64_t MAX_REPORTED = std::int64_t(1) << 40;

    // The budgets where the provider's reported limit differs from `limits` (null: the provider
    // has none in Tollgate). Nothing when nothing was reported.
    [[nodiscard]] static std::vector<LimitNotice> find(
        const ProviderState& state, const ProviderLimits* limits);
    // The same for figures not yet kept (the backends, before they keep them): `only` limits
    // which budgets are looked at (a budget whose figure did not change is not news).
    [[nodiscard]] static std::vector<LimitNotice> find(const ReportedLimits& reported,
        const ProviderLimits* limits, const std::function<bool(const std::string& budget)>& only);
    [[nodiscard]] static bool differs(
        std::int64_t reported, std::optional<std::int64_t> given, std::int64_t windowMs);
    [[nodiscard]] static std::string describe(const std::string& budget, std::int64_t reported,
        std::optional<std::int64_t> given, std::int64_t windowMs, const std::string& scope = {});
};

} // namespace tollgate
