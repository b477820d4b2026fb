#pragma once

// RateLimitHeaders: what a provider's answer says about its own quota, read from its headers
// (the proxy reads every answer; docs/PROXY.md lists the rules and their sources).
//
//   Anthropic  anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}
//              reset: an RFC 3339 time ("2026-11-24T10:00:30Z", fractions and offsets allowed)
//   OpenAI     x-ratelimit-{limit,remaining}-{requests,tokens}, x-ratelimit-reset-{requests,tokens}
//              reset: a Go duration from now ("1s", "6m0s", "12ms", "1h2m3.5s")
//   both       retry-after (seconds or an HTTP date, see RetryAfter), retry-after-ms
//
// Header names are matched without regard to case. A value that does not parse is left out
// and named in `problems` (never guessed); every time is bounded like Retry-After (at most
// RetryAfter::MAX_MS ahead), so no answer can stop callers for longer than a day.

#include "base/result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tollgate {

// One of the provider's budgets (requests, tokens, ...), as far as the answer told it.
struct ProviderBudget
{
    std::optional<std::int64_t> limit;
    std::optional<std::int64_t> remaining;
    std::optional<std::int64_t> resetAtMs; // unix ms
    [[nodiscard]] bool known() const { return limit || remaining || resetAtMs; }
};

struct RateLimitReport
{
    ProviderBudget requests;
    ProviderBudget tokens;
    ProviderBudget inputTokens;
    ProviderBudget outputTokens;
    std::optional<std::int64_t> retryAfterMs; // from retry-after-ms, else retry-after
    std::vector<std::string> problems; // "header: why", for values that did not parse

    // When the provider said a budget is exhausted (remaining 0) and when it refills: nobody
    // should be admitted before this time. nullopt: nothing is exhausted (or no reset given).
    [[nodiscard]] std::optional<std::int64_t> exhaustedUntilMs() const;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

class RateLimitHeaders
{
public:
    [[nodiscard]] static RateLimitReport parse(const HttpHeaders& headers, std::int64_t nowMs);

    // "1s", "6m0s", "12ms", "1h2m3.5s", "250us" -> milliseconds (rounded up: never early).
    [[nodiscard]] static Result<std::int64_t> parseDuration(std::string_view text);
    // RFC 3339 "2026-11-24T10:00:30.5Z" / "...+01:00" -> unix ms (a fraction rounds up).
    [[nodiscard]] static Result<std::int64_t> parseRfc3339(std::string_view text);
};

} // namespace tollgate
