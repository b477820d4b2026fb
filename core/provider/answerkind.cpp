#include "provider/answerkind.h"

#include "base/textsanitizer.h"
#include "quota/retryafter.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tollgate {

namespace {

constexpr std::string_view SUBSCRIPTION_LIMIT = "claude ai usage limit reached";
// Epoch seconds: at most 12 digits (year 33658); more is not a time but a lie, and a longer
// run of digits could overflow the product below.
constexpr std::size_t MAX_EPOCH_DIGITS = 12;

std::string text(const nlohmann::json& o, const char* key)
{
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

struct Subscription
{
    bool named = false; // the message is the subscription window's
    std::optional<std::int64_t> resetSeconds; // the epoch after '|', when it is one
};

// "Claude AI usage limit reached|1755772800" (as Claude Code's clients receive it), with or
// without the epoch; matched without regard to case, anywhere in the message.
Subscription subscriptionOf(std::string_view message)
{
    Subscription s;
    const std::string lower = TextSanitizer::asciiLower(message.substr(0, 4096));
    const std::size_t at = lower.find(SUBSCRIPTION_LIMIT);
    if (at == std::string::npos)
        return s;
    s.named = true;
    std::size_t i = at + SUBSCRIPTION_LIMIT.size();
    if (i >= lower.size() || lower[i] != '|')
        return s;
    ++i;
    std::int64_t seconds = 0;
    std::size_t digits = 0;
    while (i < lower.size() && lower[i] >= '0' && lower[i] <= '9' && digits <= MAX_EPOCH_DIGITS) {
        seconds = seconds * 10 + (lower[i] - '0');
        ++digits;
        ++i;
    }
    // Whole digits up to the end of the message or a space: "|17557x" and "|1.7e9" are not times.
    const bool ends
        = i == lower.size() || lower[i] == ' ' || lower[i] == '\n' || lower[i] == '\r' || lower[i] == '\t';
    if (digits > 0 && digits <= MAX_EPOCH_DIGITS && ends)
        s.resetSeconds = seconds;
    return s;
}

AnswerKind classify(int status, bool hasRetryAfter, std::string_view body, std::optional<std::int64_t> nowMs)
{
    using Kind = AnswerKind::Kind;
    AnswerKind a;
    if (status >= 200 && status < 300) {
        a.kind = Kind::Ok;
        return a;
    }
    if (status == 529 || status == 503) {
        a.kind = Kind::Overloaded;
        return a;
    }
    if (status != 429)
        return a;
    a.kind = Kind::RateLimited;
    const std::string_view head = body.substr(0, 65536);
    const nlohmann::json j = nlohmann::json::parse(head, nullptr, false);
    std::string code;
    std::string type;
    std::string message;
    if (j.is_object()) {
        if (auto e = j.find("error"); e != j.end() && e->is_object()) {
            code = text(*e, "code");
            type = text(*e, "type");
            message = text(*e, "message");
        }
    } else if (nowMs) {
        // Only the subscription message is looked for in a body that is not JSON (a client
        // that passes the CLI's words on); the earlier rules want the JSON error.
        message = std::string(head.substr(0, 4096));
    }
    if (nowMs) {
        const Subscription s = subscriptionOf(message);
        if (s.named && s.resetSeconds) {
            const std::int64_t now = *nowMs;
            const std::int64_t latest
                = now > INT64_MAX - RetryAfter::MAX_MS ? INT64_MAX : now + RetryAfter::MAX_MS;
            // 12 digits of seconds * 1000 < 10^15: no overflow.
            const std::int64_t at = *s.resetSeconds * 1000;
            a.kind = Kind::SubscriptionLimit;
            a.resetAtMs = std::clamp(at, std::min(now, latest), latest);
            a.reason = TextSanitizer::clean(message, 200);
            if (at > latest)
                a.reason += " (a reset more than a day ahead: held for a day)";
            return a;
        }
        if (s.named)
            return a; // the window's words without a time: a rate limit that will pass, not a cap
    }
    if (!j.is_object())
        return a;
    const std::string m = TextSanitizer::asciiLower(message);
    const bool namesCap = m.find("spend limit") != std::string::npos
        || m.find("spending limit") != std::string::npos || m.find("usage limit") != std::string::npos
        || m.find("credit balance") != std::string::npos
        || m.find("exceeded your current quota") != std::string::npos;
    if (code == "insufficient_quota" || type == "insufficient_quota" || (namesCap && !hasRetryAfter)) {
        a.kind = Kind::SpendCap;
        a.reason = TextSanitizer::clean(message.empty() ? code : message, 200);
    }
    return a;
}

} // namespace

AnswerKind AnswerKind::of(int status, bool hasRetryAfter, std::string_view body)
{
    return classify(status, hasRetryAfter, body, std::nullopt);
}

AnswerKind AnswerKind::of(int status, bool hasRetryAfter, std::string_view body, std::int64_t nowMs)
{
    return classify(status, hasRetryAfter, body, nowMs);
}

} // namespace tollgate
