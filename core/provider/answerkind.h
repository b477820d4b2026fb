#pragma once

// AnswerKind: what a provider's answer means for the shared quota (the rules, with their
// sources, are in docs/PROXY.md and docs/PROVIDERS.md):
//
//   RateLimited  429 that is a rate limit: everyone backs off (system-wide), honouring the
//                answer's retry-after-ms / retry-after
//   SpendCap     429 that is a spending or credit cap, not a rate: retrying cannot help, so
//                the provider is paused with the provider's words as the reason. Recognised
//                by OpenAI's error code "insufficient_quota", or by an error message naming a
//                spend/usage/credit limit on a 429 without retry-after
//   SubscriptionLimit
//                429 whose message is "Claude AI usage limit reached|<epoch seconds>": a
//                subscription plan's window (5 hours, 7 days) is used up until that time. Not
//                a spend cap (it passes by itself) and not a short rate limit: a hold until
//                resetAtMs. Only the overload that is given the time (of(..., nowMs)) says it;
//                the three-argument of() keeps its earlier answer (SpendCap without
//                retry-after, RateLimited with it) for callers that do not handle the kind yet
//   Overloaded   529 (Anthropic "overloaded_error") and 503: the provider's capacity, not our
//                quota; recorded, no backoff
//   Ok           2xx; Other: anything else (passed through, nothing learned)
//
// Invariant: resetAtMs, when set, lies in [nowMs, nowMs + RetryAfter::MAX_MS] (a reset in the
// past is now; one further than a day is cut to a day and `reason` says so), like every other
// time read from an answer.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate {

struct AnswerKind
{
    enum class Kind { Ok, RateLimited, SpendCap, Overloaded, Other, SubscriptionLimit };
    Kind kind = Kind::Other;
    std::string reason; // SpendCap, SubscriptionLimit: the provider's message (sanitised, bounded)
    std::optional<std::int64_t> resetAtMs; // SubscriptionLimit: when the window resets (unix ms)

    // `body`: the answer's body, or its first bytes (error bodies are small).
    [[nodiscard]] static AnswerKind of(int status, bool hasRetryAfter, std::string_view body);
    // The same, and a subscription window's end recognised as SubscriptionLimit, bounded
    // from `nowMs`.
    [[nodiscard]] static AnswerKind of(
        int status, bool hasRetryAfter, std::string_view body, std::int64_t nowMs);
};

} // namespace tollgate
