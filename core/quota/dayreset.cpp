#include "quota/dayreset.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <date/tz.h>

namespace tollgate {

namespace {

using Ms = std::chrono::milliseconds;
using std::chrono::duration_cast;

// 0001-01-01 .. 9999-12-31: every date the library converts without overflow, and more than
// any clock a caller may pass (forged or hand-set to the year 9999).
constexpr std::int64_t MIN_MS = 0;
constexpr std::int64_t MAX_MS = 253402300799999LL;

Error refused(std::string_view text, const std::string& why)
{
    std::string shown(text.substr(0, DayReset::MAX_TEXT));
    for (char& c : shown) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F)
            c = '?';
    }
    return Error::make(ErrorKind::Usage, "", "day reset '" + shown + "': " + why);
}

bool twoDigits(std::string_view s, int max, int& out)
{
    if (s.size() != 2)
        return false;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + 2, out);
    return ec == std::errc() && end == s.data() + 2 && out >= 0 && out <= max;
}

} // namespace

Result<DayReset> DayReset::parse(std::string_view text)
{
    if (text == "rolling")
        return DayReset();
    if (text.size() > MAX_TEXT)
        return refused(text, "longer than " + std::to_string(MAX_TEXT) + " characters");
    const auto at = text.find('@');
    const std::string_view clock = text.substr(0, at);
    int hours = 0;
    int minutes = 0;
    if (clock.size() != 5 || clock[2] != ':' || !twoDigits(clock.substr(0, 2), 23, hours)
        || !twoDigits(clock.substr(3, 2), 59, minutes))
        return refused(text, "expected 'rolling', HH:MM (UTC) or HH:MM@Area/City, from 00:00 to 23:59");
    DayReset out;
    out.m_minute = hours * 60 + minutes;
    if (at == std::string_view::npos)
        return out;
    const std::string zone(text.substr(at + 1));
    if (zone.empty())
        return refused(text, "no time zone after '@'");
    try {
        out.m_zone = date::locate_zone(zone);
    } catch (const std::exception&) {
        // The library says "not found" or that the database could not be read; either way the
        // limit cannot be judged, so it is refused rather than taken as UTC.
        return refused(text,
            "unknown time zone '" + zone + "' (names as in /usr/share/zoneinfo, e.g. America/Los_Angeles)");
    }
    return out;
}

std::string DayReset::text() const
{
    if (rolling())
        return "rolling";
    char buf[6];
    buf[0] = static_cast<char>('0' + m_minute / 600);
    buf[1] = static_cast<char>('0' + m_minute / 60 % 10);
    buf[2] = ':';
    buf[3] = static_cast<char>('0' + m_minute % 60 / 10);
    buf[4] = static_cast<char>('0' + m_minute % 10);
    buf[5] = '\0';
    return m_zone ? std::string(buf) + "@" + std::string(m_zone->name()) : std::string(buf);
}

DayReset::Span DayReset::dayOf(std::int64_t nowMs) const
{
    if (rolling())
        return { nowMs - DAY_MS, nowMs };
    const std::int64_t now = std::clamp(nowMs, MIN_MS + DAY_MS * 2, MAX_MS - DAY_MS * 2);
    const date::sys_time<Ms> sysNow { Ms(now) };
    const auto reset = std::chrono::minutes(m_minute);
    if (!m_zone) {
        const auto day = date::floor<date::days>(sysNow);
        auto start = day + reset;
        if (start > sysNow)
            start -= date::days(1);
        const auto startMs = duration_cast<Ms>(start.time_since_epoch()).count();
        return { startMs, startMs + DAY_MS };
    }
    // The reset on a local calendar day, as a moment: the gap's end for a time that does not
    // exist, the first of two for one that exists twice.
    auto resetOn = [&](date::local_days day) {
        const auto local = date::local_time<Ms>(day) + reset;
        return duration_cast<Ms>(m_zone->to_sys(local, date::choose::earliest).time_since_epoch()).count();
    };
    const auto localNow = m_zone->to_local(sysNow);
    auto day = date::floor<date::days>(localNow);
    std::int64_t start = resetOn(day);
    if (start > now) {
        day -= date::days(1);
        start = resetOn(day);
    }
    std::int64_t end = resetOn(day + date::days(1));
    if (end <= now) { // a reset moved by a transition the same day: step on
        start = end;
        end = resetOn(day + date::days(2));
    }
    return { start, end };
}

} // namespace tollgate
