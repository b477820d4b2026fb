#include "quota/retryafter.h"

#include "base/intmath.h"
#include "base/textsanitizer.h"

#include <array>
#include <optional>
#include <string>

namespace tollgate {

namespace {

constexpr std::int64_t DAY_MS = 24LL * 3600 * 1000;
constexpr std::array<std::string_view, 7> SHORT_DAYS { "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun" };
constexpr std::array<std::string_view, 7> LONG_DAYS { "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
    "Saturday", "Sunday" };
constexpr std::array<std::string_view, 12> MONTHS { "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug",
    "Sep", "Oct", "Nov", "Dec" };

// The fields of an HTTP date as written, before any of them is checked.
struct DateText
{
    std::string_view weekday;
    bool longWeekday = false; // rfc850 spells the weekday out
    std::string_view day; // 2 digits, or " D" in asctime
    std::string_view month;
    std::string_view year; // 4 digits, or 2 in rfc850
    std::string_view time; // HH:MM:SS
};

std::string quotedValue(std::string_view value)
{
    return "'" + TextSanitizer::clean(value, 64) + "'";
}

Error notADate(std::string_view value, const std::string& why)
{
    return Error::make(
        ErrorKind::Usage, "", "Retry-After " + quotedValue(value) + " is not a valid HTTP date: " + why);
}

bool isDigit(char c)
{
    return c >= '0' && c <= '9';
}

bool allDigits(std::string_view s)
{
    for (char c : s) {
        if (!isDigit(c))
            return false;
    }
    return !s.empty();
}

// Only ever called on at most 4 digits (checked by the shape).
int number(std::string_view s)
{
    int n = 0;
    for (char c : s)
        n = isDigit(c) ? n * 10 + (c - '0') : n;
    return n;
}

bool sameLetters(std::string_view a, std::string_view b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
        if (lower(a[i]) != lower(b[i]))
            return false;
    }
    return true;
}

template <std::size_t N> int indexOf(const std::array<std::string_view, N>& names, std::string_view name)
{
    for (std::size_t i = 0; i < N; ++i) {
        if (sameLetters(names[i], name))
            return static_cast<int>(i);
    }
    return -1;
}

bool isTime(std::string_view t)
{
    return t.size() == 8 && allDigits(t.substr(0, 2)) && t[2] == ':' && allDigits(t.substr(3, 2))
        && t[5] == ':' && allDigits(t.substr(6, 2));
}

// The three shapes of RFC 9110 §5.6.7, by position: each has a fixed layout.
std::optional<DateText> shapeOf(std::string_view s)
{
    DateText d;
    if (s.size() == 29 && s[3] == ',' && s[4] == ' ' && s[7] == ' ' && s[11] == ' ' && s[16] == ' '
        && s.substr(26) == "GMT" && s[25] == ' ') {
        // IMF-fixdate: "Fri, 15 Jan 2027 08:01:00 GMT"
        d = { s.substr(0, 3), false, s.substr(5, 2), s.substr(8, 3), s.substr(12, 4), s.substr(17, 8) };
        if (allDigits(d.day) && allDigits(d.year) && isTime(d.time))
            return d;
        return std::nullopt;
    }
    if (const std::size_t comma = s.find(','); comma != std::string_view::npos && comma >= 6) {
        // rfc850-date: "Friday, 15-Jan-27 08:01:00 GMT"
        const std::string_view r = s.substr(comma);
        if (r.size() != 24 || r[1] != ' ' || r[4] != '-' || r[8] != '-' || r[11] != ' ' || r[20] != ' '
            || r.substr(21) != "GMT")
            return std::nullopt;
        d = { s.substr(0, comma), true, r.substr(2, 2), r.substr(5, 3), r.substr(9, 2), r.substr(12, 8) };
        if (allDigits(d.day) && allDigits(d.year) && isTime(d.time))
            return d;
        return std::nullopt;
    }
    if (s.size() == 24 && s[3] == ' ' && s[7] == ' ' && s[10] == ' ' && s[19] == ' ') {
        // asctime-date: "Fri Jan 15 08:01:00 2027", a one-digit day padded with a space
        d = { s.substr(0, 3), false, s.substr(8, 2), s.substr(4, 3), s.substr(20, 4), s.substr(11, 8) };
        const bool dayOk = allDigits(d.day) || (d.day[0] == ' ' && isDigit(d.day[1]));
        if (dayOk && allDigits(d.year) && isTime(d.time))
            return d;
    }
    return std::nullopt;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t daysFromCivil(std::int64_t y, int m, int d)
{
    y -= m <= 2;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const std::int64_t yoe = y - era * 400;
    const std::int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

// The year of a day number (H. Hinnant's civil_from_days, year only).
std::int64_t yearOfDay(std::int64_t z)
{
    z += 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const std::int64_t doe = z - era * 146097;
    const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const std::int64_t mp = (5 * doy + 2) / 153;
    return yoe + era * 400 + (mp >= 10 ? 1 : 0);
}

bool isLeap(std::int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int daysInMonth(std::int64_t y, int month) // month 1..12
{
    static constexpr std::array<int, 12> DAYS { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    return month == 2 && isLeap(y) ? 29 : DAYS[static_cast<std::size_t>(month - 1)];
}

std::string twoDigits(int n)
{
    return std::string(1, static_cast<char>('0' + n / 10 % 10)) + static_cast<char>('0' + n % 10);
}

std::string dateName(int day, int month, std::int64_t year)
{
    std::string y = std::to_string(year);
    if (y.size() < 4)
        y.insert(0, 4 - y.size(), '0');
    return twoDigits(day) + " " + std::string(MONTHS[static_cast<std::size_t>(month - 1)]) + " " + y;
}

// Checks every field; the instant in Unix ms (|result| < 2^49, so never near overflow).
Result<std::int64_t> instantOf(std::string_view value, const DateText& d, std::int64_t nowUnixMs)
{
    const int month = indexOf(MONTHS, d.month) + 1;
    if (month == 0)
        return notADate(value, "unknown month " + quotedValue(d.month));
    const int weekday = d.longWeekday ? indexOf(LONG_DAYS, d.weekday) : indexOf(SHORT_DAYS, d.weekday);
    if (weekday < 0)
        return notADate(value, "unknown weekday " + quotedValue(d.weekday));
    std::int64_t year = number(d.year);
    if (d.year.size() == 2) {
        // RFC 9110: a two-digit year more than 50 years ahead is the last such year in the past.
        // `now` is clamped to years 0..9999 so every date stays a small number.
        const std::int64_t nowYear
            = std::min<std::int64_t>(9999, std::max<std::int64_t>(0, yearOfDay(IntMath::floorDiv(nowUnixMs, DAY_MS))));
        year += nowYear / 100 * 100 + 100;
        while (year > nowYear + 50)
            year -= 100;
    }
    const int hour = number(d.time.substr(0, 2));
    const int minute = number(d.time.substr(3, 2));
    const int second = number(d.time.substr(6, 2));
    if (hour > 23 || minute > 59 || second > 60) // 60: a leap second
        return notADate(value, "time " + std::string(d.time) + " is out of range (00:00:00 to 23:59:60)");
    const int day = number(d.day);
    if (day < 1 || day > daysInMonth(year, month)) {
        std::string why = dateName(day, month, year) + " does not exist";
        if (month == 2 && day == 29)
            why += " (" + std::to_string(year) + " is not a leap year)";
        return notADate(value, why);
    }
    const std::int64_t days = daysFromCivil(year, month, day);
    const int actual = static_cast<int>(((days % 7) + 7 + 3) % 7); // 1970-01-01 was a Thursday
    if (actual != weekday)
        return notADate(value,
            quotedValue(d.weekday) + " does not match " + dateName(day, month, year) + ", a "
                + std::string(LONG_DAYS[static_cast<std::size_t>(actual)]));
    return days * DAY_MS + hour * 3600000LL + minute * 60000LL + second * 1000LL;
}

// delay-seconds, with an optional fraction; nullopt when the text is not that shape.
// Exact decimal arithmetic, rounded half up to the millisecond; saturates instead of
// overflowing on any number of digits.
std::optional<RetryAfter::Delay> secondsOf(std::string_view v)
{
    std::size_t i = 0;
    std::int64_t whole = 0;
    bool tooBig = false;
    for (; i < v.size() && isDigit(v[i]); ++i) {
        if (!tooBig)
            whole = whole * 10 + (v[i] - '0');
        tooBig = tooBig || whole > RetryAfter::MAX_MS / 1000;
    }
    if (i == 0)
        return std::nullopt;
    std::int64_t ms = 0;
    if (i < v.size()) {
        if (v[i] != '.')
            return std::nullopt;
        const std::size_t first = ++i;
        for (; i < v.size() && isDigit(v[i]); ++i) {
            const std::size_t n = i - first;
            if (n < 3)
                ms += (v[i] - '0') * (n == 0 ? 100 : n == 1 ? 10 : 1);
            else if (n == 3 && v[i] >= '5')
                ++ms;
        }
        if (i == first || i != v.size())
            return std::nullopt;
    }
    if (tooBig)
        return RetryAfter::Delay { RetryAfter::MAX_MS, true };
    const std::int64_t total = whole * 1000 + ms;
    return total > RetryAfter::MAX_MS ? RetryAfter::Delay { RetryAfter::MAX_MS, true }
                                      : RetryAfter::Delay { total, false };
}

} // namespace

Result<RetryAfter::Delay> RetryAfter::parse(std::string_view value, std::int64_t nowUnixMs)
{
    const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    while (!value.empty() && blank(value.front()))
        value.remove_prefix(1);
    while (!value.empty() && blank(value.back()))
        value.remove_suffix(1);
    if (value.empty())
        return Error::make(ErrorKind::Usage, "", "empty Retry-After value");
    if (auto s = secondsOf(value))
        return *s;
    const auto shape = shapeOf(value);
    if (!shape)
        return Error::make(ErrorKind::Usage, "",
            "Retry-After must be seconds or an HTTP date like 'Wed, 21 Oct 2026 07:28:00 GMT', not "
                + quotedValue(value));
    auto at = instantOf(value, *shape, nowUnixMs);
    if (!at)
        return at.error();
    // |*at| < 2^49, so `*at - MAX_MS` cannot overflow, and `*at - nowUnixMs` is only
    // computed when it lies in (0, MAX_MS].
    if (nowUnixMs >= *at)
        return Delay { 0, false };
    if (nowUnixMs < *at - MAX_MS)
        return Delay { MAX_MS, true };
    return Delay { *at - nowUnixMs, false };
}

Result<std::int64_t> RetryAfter::parseMs(std::string_view value, std::int64_t nowUnixMs)
{
    auto d = parse(value, nowUnixMs);
    if (!d)
        return d.error();
    return d->ms;
}

} // namespace tollgate
