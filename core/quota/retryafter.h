#pragma once

// RetryAfter: parses an HTTP Retry-After value into milliseconds from now. Accepted forms
// (RFC 9110 §10.2.3 and §5.6.7):
//   delay-seconds   "120" (digits, optionally a fraction: "1.5"; no sign, exponent or hex)
//   IMF-fixdate     "Fri, 15 Jan 2027 08:01:00 GMT"
//   rfc850-date     "Friday, 15-Jan-27 08:01:00 GMT" (a year more than 50 years ahead is
//                   taken as the century before, as RFC 9110 requires)
//   asctime-date    "Fri Jan 15 08:01:00 2027"
// A date in the past means 0. A date that does not exist (29 Feb in a common year, 31 Apr,
// hour 24, a weekday that is not the date's) or anything else is refused with a one-line
// message naming what is wrong: a garbled value must not be read as some other instant.
//
// Bound: one Retry-After asks at most MAX_MS (24 h), whatever its form. A longer one is
// CLAMPED to MAX_MS, not refused — the server did ask for a long silence, and a day of it is
// still honoured; Delay::clamped tells the caller so it can warn. A value is one provider's
// word about one request; without the bound a single report (or a hostile local caller)
// could stop every caller of the home for millennia ("31 Dec 9999").
// Every computation is exact integer arithmetic on bounded values: no overflow for any input
// or any `now`, including INT64_MIN and INT64_MAX.

#include "base/result.h"

#include <cstdint>
#include <string_view>

namespace tollgate {

class RetryAfter
{
public:
    static constexpr std::int64_t MAX_MS = 24LL * 3600 * 1000;

    struct Delay
    {
        std::int64_t ms = 0; // 0 to MAX_MS
        bool clamped = false; // the value asked for more than MAX_MS
    };

    [[nodiscard]] static Result<Delay> parse(std::string_view value, std::int64_t nowUnixMs);
    // parse(), without telling whether the value was clamped.
    [[nodiscard]] static Result<std::int64_t> parseMs(std::string_view value, std::int64_t nowUnixMs);
    // For a delay that arrives as a number (the library API): the same bound, 0 to MAX_MS.
    [[nodiscard]] static constexpr std::int64_t bound(std::int64_t ms)
    {
        return ms < 0 ? 0 : (ms > MAX_MS ? MAX_MS : ms);
    }
};

} // namespace tollgate
