#pragma once

// RateLimitHeaders: what a provider's answer says about its own quota, read from its headers
// (the proxy reads every answer; docs/PROXY.md lists the rules and their sources).
//
//   Anthropic  anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}
//              reset: an RFC 3339 time ("2026-11-24T10:00:30Z", fractions and offsets allowed)
//   OpenAI     x-ratelimit-{limit,remaining}-{requests,tokens}, x-ratelimit-reset-{requests,tokens}
//              reset: a Go duration from now ("1s", "6m0s", "12ms", "1h2m3.5s")
//   both       retry-after (seconds or an HTTP date, see RetryAfter), retry-after-ms
//   Anthropic subscription plans (Pro/Max, OAuth; the "unified" limits), into `subscription`:
//              anthropic-ratelimit-unified-status        allowed | allowed_warning | rejected
//              anthropic-ratelimit-unified-reset         epoch seconds
//              anthropic-ratelimit-unified-representative-claim   five_hour, seven_day, ...
//              anthropic-ratelimit-unified-fallback-percentage    0..1
//              anthropic-ratelimit-unified-<window>-{utilization,reset,status} for the windows
//              5h, 7d, 7d_sonnet, 7d_oi, overage, ... (utilization a share, 0..1 and a little
//              over when overrun; reset epoch seconds)
//              anthropic-ratelimit-unified-overage-disabled-reason, -overage-in-use (true|false)
//              Not documented by Anthropic: the names and forms are those the public clients
//              of these plans read (docs/PROVIDERS.md lists them). OpenAI documents no per-day
//              headers (its rate-limit guide lists the six x-ratelimit-* above): none are read.
//
// Header names are matched without regard to case. A value that does not parse is left out
// and named in `problems` (never guessed); every time is bounded like Retry-After (at most
// RetryAfter::MAX_MS ahead), so no answer can stop callers for longer than a day. A
// subscription window's reset may lawfully be days ahead (the 7-day window): it is cut to a
// day silently (resetBounded says so); one beyond any window (more than 8 days ahead: the
// year 9999) is cut and named in `problems` too. A utilisation that is not a finite number in
// [0, MAX_UTILIZATION] (1e300, -0.5, NaN) and an unknown status are left out and named.
// Memory is bounded whatever the answer holds: at most MAX_WINDOWS windows, short strings.

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

enum class SubscriptionStatus { Allowed, AllowedWarning, Rejected };

// One window of a subscription plan (5 hours, 7 days, a model's 7 days, the paid overage).
struct SubscriptionWindow
{
    std::string name; // as the header names it: "5h", "7d", "7d_sonnet", "overage", ...
    std::optional<double> utilization; // the share used, 0 .. SubscriptionReport::MAX_UTILIZATION
    std::optional<std::int64_t> resetAtMs; // unix ms, at most RetryAfter::MAX_MS ahead
    bool resetBounded = false; // the reset said was further ahead than that, and was cut
    std::optional<SubscriptionStatus> status;
};

// What an answer says of the subscription plan's windows (nothing, for an API key's answers).
struct SubscriptionReport
{
    static constexpr std::size_t MAX_WINDOWS = 8;
    static constexpr std::size_t MAX_TEXT = 64;
    static constexpr double MAX_UTILIZATION = 10.0; // ten times the window: past it, nonsense

    std::optional<SubscriptionStatus> status; // the plan as a whole
    std::optional<std::int64_t> resetAtMs; // when the limiting window resets (unix ms, bounded)
    bool resetBounded = false;
    std::string representativeClaim; // the window that limits: "five_hour", "seven_day", ...
    std::optional<double> fallbackPercentage; // 0..1
    std::vector<SubscriptionWindow> windows; // in the order first named, at most MAX_WINDOWS
    std::string overageDisabledReason; // "org_level_disabled", "out_of_credits", ...
    std::optional<bool> overageInUse; // this answer was paid for as overage

    [[nodiscard]] bool known() const
    {
        return status || resetAtMs || !representativeClaim.empty() || fallbackPercentage || !windows.empty()
            || !overageDisabledReason.empty() || overageInUse;
    }
    [[nodiscard]] const SubscriptionWindow* window(std::string_view name) const;
    // The plan said rejected: nobody should be admitted before this time (the plan's reset, or
    // the latest reset of a rejected window). nullopt: not rejected, or no reset given.
    [[nodiscard]] std::optional<std::int64_t> rejectedUntilMs() const;
};

struct RateLimitReport
{
    ProviderBudget requests;
    ProviderBudget tokens;
    ProviderBudget inputTokens;
    ProviderBudget outputTokens;
    std::optional<std::int64_t> retryAfterMs; // from retry-after-ms, else retry-after
    SubscriptionReport subscription; // anthropic-ratelimit-unified-*
    std::vector<std::string> problems; // "header: why", for values that did not parse

    // When the provider said a budget is exhausted (remaining 0) and when it refills: nobody
    // should be admitted before this time. nullopt: nothing is exhausted (or no reset given).
    // The subscription's windows are not in it (see subscription.rejectedUntilMs()).
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
    // "0.42" -> 0.42: a finite share in [0, SubscriptionReport::MAX_UTILIZATION].
    [[nodiscard]] static Result<double> parseUtilization(std::string_view text);
};

} // namespace tollgate
