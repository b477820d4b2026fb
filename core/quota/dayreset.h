#pragma once

// DayReset: when a provider's per-day budget starts afresh. Providers count a day in one of
// two ways, and a limit must use the provider's:
//
//   rolling      the last 24 hours, whatever the clock says (the default; written "rolling")
//   calendar     a wall-clock time in a named IANA time zone ("00:00@America/Los_Angeles":
//                Gemini's requests per day reset at midnight Pacific time), or in UTC ("07:30")
//
// The zone's rules come from the system's time-zone database (Debian's tzdata, read by the
// date library), so a daylight-saving change moves the reset with the wall clock: a day can
// last 23 or 25 hours. A reset time that does not exist on a day (inside a spring-forward gap)
// falls at the gap's end; one that exists twice (autumn) is its first occurrence.
//
// A DayReset is a value: the zone is resolved when it is parsed, so an unknown zone is refused
// there, with its name, and nothing later can fail for it.

#include "base/result.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace date {
class time_zone;
}

namespace tollgate {

class DayReset
{
public:
    static constexpr std::int64_t DAY_MS = 24LL * 3600 * 1000;
    static constexpr std::size_t MAX_TEXT = 80;

    DayReset() = default; // rolling

    // "rolling", "HH:MM" (UTC) or "HH:MM@Zone/Name". Refused (ErrorKind::Usage) with the text
    // and what is wrong: a time outside 00:00–23:59, an unknown zone.
    [[nodiscard]] static Result<DayReset> parse(std::string_view text);

    [[nodiscard]] bool rolling() const { return m_zone == nullptr && m_minute < 0; }
    [[nodiscard]] std::string text() const; // as parse() reads it back
    [[nodiscard]] int minuteOfDay() const { return m_minute; } // -1: rolling

    // The calendar day that holds nowMs: [start, end) in unix ms. For a rolling day:
    // [now - 24 h, now). Times before 1970 or past year 9999 are clamped into range.
    struct Span
    {
        std::int64_t startMs = 0;
        std::int64_t endMs = 0;
    };
    [[nodiscard]] Span dayOf(std::int64_t nowMs) const;

    bool operator==(const DayReset& o) const { return m_minute == o.m_minute && m_zone == o.m_zone; }

private:
    int m_minute = -1;
    const date::time_zone* m_zone = nullptr; // null with m_minute >= 0: UTC
};

} // namespace tollgate
