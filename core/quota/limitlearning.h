#pragma once

// LimitLearning: what the provider's own limits (ReportedLimits, read by the proxy from every
// answer's headers) change in the limits Tollgate enforces.
//
//   learn   with `limits set P --learn`: a per-window limit the user has not set follows the
//           provider's. Only those: a limit the user set is never overwritten (a mismatch is
//           flagged instead, LimitMismatch). A limit that followed the provider is marked in
//           `learned` until the user sets it; `--no-X` removes it (and learning may bring the
//           provider's figure back). Headroom applies to a learned limit as to any other.
//   adopt   the dashboard's "use the provider's limits" and `limits adopt P`: every reported
//           figure replaces the scope's limit, the user's too, because the user asked. What is
//           adopted is the user's from then on (unmarked).
//
// Scope: Anthropic's headers state the limits of the request's model class, so they are for
// the first class (by name) that the request's model matches, else for the provider's own
// limits. The provider counts per minute; a scope's window of W ms takes floor(R × W / 60,000)
// (at least 1) for W below a minute, and R itself for a longer window (R per W is below R per
// minute: conservative). A figure of 0 or less is no limit and is never learned; a learned
// figure that would contradict the scope's per-day limit (a day below a window) is skipped.

#include "quota/quotalimits.h"
#include "quota/quotastate.h"
#include "quota/reportedlimits.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate {

class LimitLearning
{
public:
    struct Change
    {
        std::string key; // the limits.json key: requests, tokens, input_tokens, output_tokens
        std::optional<std::int64_t> before;
        std::int64_t after = 0;
    };
    struct Lesson
    {
        ProviderLimits limits; // the provider's limits after the lesson
        std::string scope; // the class changed; empty: the provider's own limits
        std::vector<Change> changes; // the values changed (none when only marks did)
        // The history's words: "learned from the provider: input_tokens 30000 -> 40000 (class opus)".
        [[nodiscard]] std::string describe(std::string_view how) const;
    };

    [[nodiscard]] static std::string scopeOf(const ProviderLimits& limits, std::string_view model);
    // nullopt: nothing to change (learning is off, the scope is gone, every figure is the
    // user's or already followed).
    [[nodiscard]] static std::optional<Lesson> learn(const ProviderLimits& limits, const ReportedLimits& reported);
    [[nodiscard]] static std::optional<Lesson> adopt(const ProviderLimits& limits, const ReportedLimits& reported);
    // The figures a provider's state keeps (what its answers last stated; none: -1 each).
    [[nodiscard]] static ReportedLimits keptIn(const ProviderState* state);
    // A per-minute figure as a limit per windowMs (see above).
    [[nodiscard]] static std::int64_t perWindow(std::int64_t perMinute, std::int64_t windowMs);

private:
    [[nodiscard]] static std::optional<Lesson> apply(
        const ProviderLimits& limits, const ReportedLimits& reported, bool userToo);
};

} // namespace tollgate
