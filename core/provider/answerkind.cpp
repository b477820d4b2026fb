#include "provider/answerkind.h"

#include "base/textsanitizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace tollgate {

namespace {

std::string text(const nlohmann::json& o, const char* key)
{
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

} // namespace

AnswerKind AnswerKind::of(int status, bool hasRetryAfter, std::string_view body)
{
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
    const nlohmann::json j = nlohmann::json::parse(body.substr(0, 65536), nullptr, false);
    if (!j.is_object())
        return a;
    auto e = j.find("error");
    if (e == j.end() || !e->is_object())
        return a;
    const std::string code = text(*e, "code");
    const std::string type = text(*e, "type");
    const std::string message = text(*e, "message");
    const std::string m = TextSanitizer::asciiLower(message);
    const bool namesCap = m.find("spend limit") != std::string::npos || m.find("spending limit") != std::string::npos
        || m.find("usage limit") != std::string::npos || m.find("credit balance") != std::string::npos
        || m.find("exceeded your current quota") != std::string::npos;
    if (code == "insufficient_quota" || type == "insufficient_quota" || (namesCap && !hasRetryAfter)) {
        a.kind = Kind::SpendCap;
        a.reason = TextSanitizer::clean(message.empty() ? code : message, 200);
    }
    return a;
}

} // namespace tollgate
