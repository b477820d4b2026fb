#include "base/secretmask.h"

#include <cctype>
#include <optional>

namespace tollgate {

namespace {

// Where the password of `text` lies: [begin, end), end at the last '@' (an empty password is
// still one: "u:@h").
struct PasswordSpan
{
    std::size_t begin = 0;
    std::size_t end = 0;
};

// The userinfo of a URL that starts at `p`, when it has a password.
std::optional<PasswordSpan> spanFrom(std::string_view text, std::size_t p)
{
    const auto at = text.rfind('@');
    if (at == std::string_view::npos || at < p)
        return std::nullopt;
    const auto colon = text.find(':', p);
    if (colon == std::string_view::npos || colon > at)
        return std::nullopt;
    if (text.substr(p, colon - p).find('/') != std::string_view::npos)
        return std::nullopt; // a path, or a URL's path: no user name holds a '/'
    return PasswordSpan { colon + 1, at };
}

// Past ":/" and every '/' after it.
std::size_t pastSlashes(std::string_view text, std::size_t colon)
{
    std::size_t p = colon + 1;
    while (p < text.size() && text[p] == '/')
        ++p;
    return p;
}

std::optional<PasswordSpan> passwordSpan(std::string_view text)
{
    std::size_t p = 0;
    while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p])))
        ++p;
    // A scheme (a letter, then letters, digits, '+', '-', '.') followed by ':' and at least
    // one '/': the userinfo begins after the slashes. "redis:u:pw@h" has no scheme by this
    // rule, so its userinfo is "redis:u:pw" and the password still ends up hidden.
    std::size_t q = p;
    if (q < text.size() && std::isalpha(static_cast<unsigned char>(text[q]))) {
        ++q;
        while (q < text.size()
            && (std::isalnum(static_cast<unsigned char>(text[q])) || text[q] == '+' || text[q] == '-'
                || text[q] == '.'))
            ++q;
        if (q + 1 < text.size() && text[q] == ':' && text[q + 1] == '/')
            p = pastSlashes(text, q);
    }
    if (auto span = spanFrom(text, p))
        return span;
    // A URL further in ("x/redis://u:pw@h", a home refused for its "://" inside).
    for (auto c = text.find(":/", p); c != std::string_view::npos; c = text.find(":/", c + 1)) {
        if (auto span = spanFrom(text, pastSlashes(text, c)))
            return span;
    }
    // A URL whose scheme lost its ':' or itself ("redis//u:pw@h", "redis;//u:pw@h",
    // "//u:pw@h"): after a "//", a user:password@ with no '/' in it is a URL's userinfo, not a
    // path (a directory named so would be "./u:pw@h").
    for (auto c = text.find("//", p); c != std::string_view::npos; c = text.find("//", c + 1)) {
        if (auto span = spanFrom(text, pastSlashes(text, c)))
            return span;
    }
    return std::nullopt;
}

} // namespace

std::string SecretMask::userinfo(std::string_view text)
{
    const auto span = passwordSpan(text);
    if (!span)
        return std::string(text);
    std::string out(text.substr(0, span->begin));
    out += HIDDEN;
    out += text.substr(span->end);
    return out;
}

bool SecretMask::holdsPassword(std::string_view text)
{
    return passwordSpan(text).has_value();
}

} // namespace tollgate
