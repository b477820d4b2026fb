#include "provider/ratelimitheaders.h"

#include "base/textsanitizer.h"
#include "quota/retryafter.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

namespace tollgate {

namespace {

// Numbers in headers: whole, non-negative, below 2^53 (what every other count here allows).
constexpr std::int64_t MAX_NUMBER = (1LL << 53);

std::string_view trimHeaderSpace(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

std::optional<std::int64_t> wholeNumber(std::string_view s)
{
    s = trimHeaderSpace(s);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0 || v > MAX_NUMBER)
        return std::nullopt;
    return v;
}

Error bad(std::string_view what, std::string_view text)
{
    // The value is a provider's (or a hostile upstream's): quoted, cut short, printable only.
    std::string shown;
    for (char c : text.substr(0, 64))
        shown += (c >= 0x20 && c < 0x7f) ? c : '?';
    return Error::make(ErrorKind::Corrupt, {}, std::string(what) + " '" + shown + "'");
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t daysFromCivil(std::int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool leap(std::int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

std::optional<int> digits(std::string_view s, std::size_t at, std::size_t n)
{
    if (at + n > s.size())
        return std::nullopt;
    int v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
        if (s[i] < '0' || s[i] > '9')
            return std::nullopt;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

constexpr std::string_view UNIFIED = "anthropic-ratelimit-unified-";
// A reset further ahead than the longest window (7 days) and a day of slack is not a window's.
constexpr std::int64_t PLAUSIBLE_WINDOW_MS = 8LL * 24 * 3600 * 1000;

std::optional<SubscriptionStatus> subscriptionStatus(std::string_view s)
{
    s = trimHeaderSpace(s);
    if (s == "allowed")
        return SubscriptionStatus::Allowed;
    if (s == "allowed_warning")
        return SubscriptionStatus::AllowedWarning;
    if (s == "rejected")
        return SubscriptionStatus::Rejected;
    return std::nullopt;
}

// A name the headers use for a window or a claim: lowercase letters, digits and '_', short.
bool plainName(std::string_view s, std::size_t max)
{
    if (s.empty() || s.size() > max)
        return false;
    return std::all_of(s.begin(), s.end(),
        [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

// What one anthropic-ratelimit-unified-* header says, into `sub`; false: a value that did not
// parse (named in problems by the caller through `why`).
struct UnifiedReader
{
    SubscriptionReport& sub;
    std::int64_t nowMs;
    std::int64_t latest;
    std::vector<std::string>& problems;

    void note(const std::string& name, const Error& e) { problems.push_back(name + ": " + e.message); }

    // Epoch seconds -> unix ms, bounded to a day ahead; `bounded` says it was cut.
    std::optional<std::int64_t> reset(const std::string& name, std::string_view value, bool& bounded)
    {
        const auto v = wholeNumber(value);
        if (!v) {
            note(name, bad("not a time in epoch seconds", value));
            return std::nullopt;
        }
        const std::int64_t at = *v * 1000; // v <= 2^53: no overflow
        bounded = at > latest;
        if (at - nowMs > PLAUSIBLE_WINDOW_MS)
            note(name, bad("a reset beyond any window (held for at most a day)", value));
        return std::min(at, latest);
    }

    SubscriptionWindow* window(const std::string& name, std::string_view windowName)
    {
        for (SubscriptionWindow& w : sub.windows)
            if (w.name == windowName)
                return &w;
        if (sub.windows.size() >= SubscriptionReport::MAX_WINDOWS) {
            note(name, bad("one window more than the bound of 8", windowName));
            return nullptr;
        }
        sub.windows.push_back(SubscriptionWindow { std::string(windowName), {}, {}, false, {} });
        return &sub.windows.back();
    }

    void read(const std::string& name, std::string_view value)
    {
        const std::string_view rest = std::string_view(name).substr(UNIFIED.size());
        const std::string_view v = trimHeaderSpace(value);
        if (rest == "status") {
            if (auto st = subscriptionStatus(v))
                sub.status = st;
            else
                note(name, bad("an unknown status (allowed, allowed_warning, rejected)", value));
        } else if (rest == "reset") {
            if (auto at = reset(name, value, sub.resetBounded))
                sub.resetAtMs = at;
        } else if (rest == "representative-claim") {
            if (plainName(v, SubscriptionReport::MAX_TEXT))
                sub.representativeClaim = std::string(v);
            else
                note(name, bad("not a claim's name", value));
        } else if (rest == "fallback-percentage") {
            auto p = RateLimitHeaders::parseUtilization(value);
            if (p && *p <= 1.0)
                sub.fallbackPercentage = *p;
            else
                note(name, bad("not a share between 0 and 1", value));
        } else if (rest == "overage-disabled-reason") {
            if (plainName(v, SubscriptionReport::MAX_TEXT))
                sub.overageDisabledReason = std::string(v);
            else
                note(name, bad("not a reason's name", value));
        } else if (rest == "overage-in-use") {
            if (v == "true" || v == "false")
                sub.overageInUse = v == "true";
            else
                note(name, bad("neither true nor false", value));
        } else {
            // <window>-<field>; other fields (surpassed-threshold, period, ...) are not needed.
            for (const std::string_view field : { std::string_view("-utilization"),
                     std::string_view("-reset"), std::string_view("-status") }) {
                if (rest.size() <= field.size() || rest.substr(rest.size() - field.size()) != field)
                    continue;
                const std::string_view windowName = rest.substr(0, rest.size() - field.size());
                if (!plainName(windowName, 24))
                    return; // not a window we can name: ignored like any unknown header
                if (field == "-utilization") {
                    auto u = RateLimitHeaders::parseUtilization(value);
                    if (!u) {
                        note(name, u.error());
                        return;
                    }
                    if (SubscriptionWindow* w = window(name, windowName))
                        w->utilization = *u;
                } else if (field == "-reset") {
                    bool bounded = false;
                    if (auto at = reset(name, value, bounded))
                        if (SubscriptionWindow* w = window(name, windowName)) {
                            w->resetAtMs = at;
                            w->resetBounded = bounded;
                        }
                } else {
                    auto st = subscriptionStatus(v);
                    if (!st) {
                        note(name, bad("an unknown status (allowed, allowed_warning, rejected)", value));
                        return;
                    }
                    if (SubscriptionWindow* w = window(name, windowName))
                        w->status = st;
                }
                return;
            }
        }
    }
};

} // namespace

std::optional<std::int64_t> RateLimitReport::exhaustedUntilMs() const
{
    std::optional<std::int64_t> until;
    for (const ProviderBudget* b : { &requests, &tokens, &inputTokens, &outputTokens }) {
        if (b->remaining && *b->remaining == 0 && b->resetAtMs)
            until = std::max(until.value_or(*b->resetAtMs), *b->resetAtMs);
    }
    return until;
}

const SubscriptionWindow* SubscriptionReport::window(std::string_view name) const
{
    for (const SubscriptionWindow& w : windows)
        if (w.name == name)
            return &w;
    return nullptr;
}

std::optional<std::int64_t> SubscriptionReport::rejectedUntilMs() const
{
    std::optional<std::int64_t> until;
    if (status == SubscriptionStatus::Rejected && resetAtMs)
        until = resetAtMs;
    for (const SubscriptionWindow& w : windows) {
        // The overage window being rejected means only that paid overage is off; the plan's
        // own windows (or its status) say whether calls are refused.
        if (w.name != "overage" && w.status == SubscriptionStatus::Rejected && w.resetAtMs)
            until = std::max(until.value_or(*w.resetAtMs), *w.resetAtMs);
    }
    return until;
}

Result<double> RateLimitHeaders::parseUtilization(std::string_view text)
{
    const std::string_view s = trimHeaderSpace(text);
    double v = 0;
    // Plain decimal only: from_chars' general format also takes "inf" and "nan", refused below.
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < 0
        || v > SubscriptionReport::MAX_UTILIZATION)
        return bad("not a share between 0 and 10", text);
    return v;
}

Result<std::int64_t> RateLimitHeaders::parseDuration(std::string_view text)
{
    const std::string_view s = trimHeaderSpace(text);
    if (s.empty())
        return bad("an empty duration", text);
    if (s == "0")
        return std::int64_t(0);
    double totalMs = 0;
    std::size_t i = 0;
    while (i < s.size()) {
        const std::size_t start = i;
        while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.'))
            ++i;
        const std::string_view number = s.substr(start, i - start);
        if (number.empty() || number.front() == '.' || number.back() == '.'
            || std::count(number.begin(), number.end(), '.') > 1 || number.size() > 18)
            return bad("a duration that is not a Go duration (like 1s, 6m0s, 12ms)", text);
        const std::size_t unitStart = i;
        while (i < s.size() && !((s[i] >= '0' && s[i] <= '9') || s[i] == '.'))
            ++i;
        const std::string_view unit = s.substr(unitStart, i - unitStart);
        double scale = 0;
        if (unit == "h")
            scale = 3600e3;
        else if (unit == "m")
            scale = 60e3;
        else if (unit == "s")
            scale = 1e3;
        else if (unit == "ms")
            scale = 1;
        else if (unit == "us" || unit == "\xc2\xb5s" || unit == "\xce\xbcs")
            scale = 1e-3;
        else if (unit == "ns")
            scale = 1e-6;
        else
            return bad("a duration with an unknown unit", text);
        double amount = 0;
        const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), amount);
        if (ec != std::errc() || end != number.data() + number.size())
            return bad("a duration that is not a Go duration (like 1s, 6m0s, 12ms)", text);
        totalMs += amount * scale;
        if (totalMs > 1e12)
            return bad("a duration beyond any bound", text);
    }
    return static_cast<std::int64_t>(std::ceil(totalMs - 1e-9));
}

Result<std::int64_t> RateLimitHeaders::parseRfc3339(std::string_view text)
{
    const std::string_view s = trimHeaderSpace(text);
    const auto year = digits(s, 0, 4);
    const auto month = digits(s, 5, 2);
    const auto day = digits(s, 8, 2);
    const auto hour = digits(s, 11, 2);
    const auto minute = digits(s, 14, 2);
    const auto second = digits(s, 17, 2);
    if (!year || !month || !day || !hour || !minute || !second || s[4] != '-' || s[7] != '-'
        || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':')
        return bad("a time that is not RFC 3339 (like 2026-11-24T10:00:30Z)", text);
    static constexpr std::array<int, 12> DAYS { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    if (*month < 1 || *month > 12 || *day < 1
        || *day > DAYS[static_cast<std::size_t>(*month - 1)] + ((*month == 2 && leap(*year)) ? 1 : 0)
        || *hour > 23 || *minute > 59 || *second > 60)
        return bad("a time that does not exist", text);
    std::size_t i = 19;
    std::int64_t fractionMs = 0;
    if (i < s.size() && s[i] == '.') {
        ++i;
        const std::size_t start = i;
        std::int64_t scaled = 0; // the fraction in ns, rounded up to whole ms below
        int places = 0;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
            if (places < 9) {
                scaled = scaled * 10 + (s[i] - '0');
                ++places;
            }
            ++i;
        }
        if (i == start)
            return bad("a time with an empty fraction", text);
        while (places < 9) {
            scaled *= 10;
            ++places;
        }
        fractionMs = (scaled + 999999) / 1000000;
    }
    std::int64_t offsetMin = 0;
    if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
        ++i;
    } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
        const auto oh = digits(s, i + 1, 2);
        const auto om = digits(s, i + 4, 2);
        if (!oh || !om || i + 3 >= s.size() || s[i + 3] != ':' || *oh > 23 || *om > 59)
            return bad("a time with a malformed offset", text);
        offsetMin = (*oh * 60 + *om) * (s[i] == '+' ? 1 : -1);
        i += 6;
    } else {
        return bad("a time without its offset (Z or +hh:mm)", text);
    }
    if (i != s.size())
        return bad("a time followed by something else", text);
    const std::int64_t secs
        = daysFromCivil(*year, static_cast<unsigned>(*month), static_cast<unsigned>(*day)) * 86400
        + *hour * 3600 + *minute * 60 + std::min(*second, 59) - offsetMin * 60;
    return secs * 1000 + fractionMs;
}

RateLimitReport RateLimitHeaders::parse(const HttpHeaders& headers, std::int64_t nowMs)
{
    RateLimitReport r;
    const std::int64_t latest
        = nowMs > INT64_MAX - RetryAfter::MAX_MS ? INT64_MAX : nowMs + RetryAfter::MAX_MS;
    auto note
        = [&](const std::string& name, const Error& e) { r.problems.push_back(name + ": " + e.message); };
    std::optional<std::int64_t> retryAfter;
    std::optional<std::int64_t> retryAfterMs;
    UnifiedReader unified { r.subscription, nowMs, latest, r.problems };
    for (const auto& [rawName, value] : headers) {
        const std::string name = TextSanitizer::asciiLower(trimHeaderSpace(rawName));
        if (name.rfind(UNIFIED, 0) == 0) {
            unified.read(name, value);
            continue;
        }
        ProviderBudget* budget = nullptr;
        enum class Field { Limit, Remaining, ResetTime, ResetDuration } field = Field::Limit;
        std::string rest;
        if (name.rfind("anthropic-ratelimit-", 0) == 0) {
            rest = name.substr(20);
            for (const auto& [stem, b] : std::initializer_list<std::pair<const char*, ProviderBudget*>> {
                     { "requests-", &r.requests }, { "tokens-", &r.tokens },
                     { "input-tokens-", &r.inputTokens }, { "output-tokens-", &r.outputTokens } }) {
                if (rest.rfind(stem, 0) == 0) {
                    const std::string tail = rest.substr(std::char_traits<char>::length(stem));
                    budget = b;
                    if (tail == "limit")
                        field = Field::Limit;
                    else if (tail == "remaining")
                        field = Field::Remaining;
                    else if (tail == "reset")
                        field = Field::ResetTime;
                    else
                        budget = nullptr;
                    break;
                }
            }
        } else if (name.rfind("x-ratelimit-", 0) == 0) {
            rest = name.substr(12);
            for (const auto& [stem, f] :
                std::initializer_list<std::pair<const char*, Field>> { { "limit-", Field::Limit },
                    { "remaining-", Field::Remaining }, { "reset-", Field::ResetDuration } }) {
                if (rest.rfind(stem, 0) == 0) {
                    const std::string tail = rest.substr(std::char_traits<char>::length(stem));
                    field = f;
                    budget = tail == "requests" ? &r.requests : tail == "tokens" ? &r.tokens : nullptr;
                    break;
                }
            }
        } else if (name == "retry-after-ms") {
            if (auto v = wholeNumber(value))
                retryAfterMs = RetryAfter::bound(*v);
            else
                note(name, bad("not a whole number of ms", value));
            continue;
        } else if (name == "retry-after") {
            auto v = RetryAfter::parseMs(trimHeaderSpace(value), nowMs);
            if (v)
                retryAfter = *v;
            else
                note(name, v.error());
            continue;
        }
        if (!budget)
            continue;
        if (field == Field::Limit || field == Field::Remaining) {
            auto v = wholeNumber(value);
            if (!v) {
                note(name, bad("not a whole number", value));
                continue;
            }
            (field == Field::Limit ? budget->limit : budget->remaining) = *v;
        } else {
            auto v = field == Field::ResetTime ? parseRfc3339(value) : parseDuration(value);
            if (!v) {
                note(name, v.error());
                continue;
            }
            const std::int64_t at
                = field == Field::ResetTime ? *v : (nowMs > latest - *v ? latest : nowMs + *v);
            budget->resetAtMs = std::min(at, latest);
        }
    }
    // retry-after-ms is the more precise of the two when both are sent.
    r.retryAfterMs = retryAfterMs ? retryAfterMs : retryAfter;
    return r;
}

} // namespace tollgate
