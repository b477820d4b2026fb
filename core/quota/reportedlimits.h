#pragma once

// ReportedLimits: the provider's own per-window limits as one answer's rate-limit headers state
// them (per minute: Anthropic and OpenAI document RPM/TPM, ITPM/OTPM), and the scope they are
// for — the class of the request's model, or the provider (LimitLearning::scopeOf). -1: the
// answer did not say.

#include <cstdint>
#include <string>

namespace tollgate {

struct ReportedLimits
{
    std::int64_t requests = -1;
    std::int64_t tokens = -1;
    std::int64_t inputTokens = -1;
    std::int64_t outputTokens = -1;
    std::string scope; // a class's name; empty: the provider's own limits

    [[nodiscard]] bool any() const { return requests >= 0 || tokens >= 0 || inputTokens >= 0 || outputTokens >= 0; }
    bool operator==(const ReportedLimits&) const = default;
};

} // namespace tollgate
