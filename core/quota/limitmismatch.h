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

#include "quota/quotalimits.h"
#include "quota/quotastate.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tollgate {

struct LimitNotice
{
    std::string budget; // "requests" or "tokens"
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
    [[nodiscard]] static bool differs(
        std::int64_t reported, std::optional<std::int64_t> given, std::int64_t windowMs);
    [[nodiscard]] static std::string describe(const std::string& budget, std::int64_t reported,
        std::optional<std::int64_t> given, std::int64_t windowMs);
};

} // namespace tollgate
