#include "store/homespec.h"

#include "base/secretmask.h"
#include "system/pathpolicy.h"

#include <cctype>
#include <charconv>
#include <cstdlib>

namespace tollgate {

namespace {

// A refused URL as it may be shown: its password hidden (SecretMask), and the values of its
// query options other than prefix= and its fragment too — a password typed as "?password=…"
// or "#…" is refused as an unknown option, and the refusal quotes the URL.
std::string maskedUrl(std::string_view text)
{
    std::string s = SecretMask::userinfo(text);
    const auto scheme = s.find("://");
    if (scheme == std::string::npos)
        return s; // a directory: a '?' or '#' in its name is part of the name
    if (const auto hash = s.find('#', scheme); hash != std::string::npos)
        s.replace(hash + 1, std::string::npos, SecretMask::HIDDEN);
    const auto query = s.find('?', scheme);
    if (query == std::string::npos)
        return s;
    std::string out = s.substr(0, query + 1);
    std::string_view rest = std::string_view(s).substr(query + 1);
    const auto hash = rest.find('#');
    const std::string_view tail = hash == std::string_view::npos ? std::string_view {} : rest.substr(hash);
    rest = rest.substr(0, hash);
    bool first = true;
    while (true) {
        const auto amp = rest.find('&');
        const std::string_view item = rest.substr(0, amp);
        if (!first)
            out += '&';
        first = false;
        const auto eq = item.find('=');
        if (eq != std::string_view::npos && item.substr(0, eq) != "prefix")
            out.append(item.substr(0, eq + 1)).append(SecretMask::HIDDEN);
        else
            out.append(item);
        if (amp == std::string_view::npos)
            break;
        rest = rest.substr(amp + 1);
    }
    out.append(tail);
    return out;
}

constexpr const char* FORM = "redis://[USER@]HOST[:PORT][/DB][?prefix=NAME]";

Error bad(std::string_view text, const std::string& why)
{
    return Error::make(ErrorKind::Usage, std::string(text), why);
}

// "redis" of "redis://...", when the text starts like a URL: a scheme (RFC 3986: a letter,
// then letters, digits, '+', '-', '.') and ":/". Empty otherwise.
std::string_view schemeOf(std::string_view text)
{
    const auto colon = text.find(':');
    if (colon == 0 || colon == std::string_view::npos || colon + 1 >= text.size() || text[colon + 1] != '/')
        return {};
    if (!std::isalpha(static_cast<unsigned char>(text[0])))
        return {};
    for (std::size_t i = 1; i < colon; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (!std::isalnum(c) && c != '+' && c != '-' && c != '.')
            return {};
    }
    return text.substr(0, colon);
}

// "localhost:6379", "10.0.0.5:6380": a name, a colon and digits, nothing else.
bool looksLikeHostPort(std::string_view text)
{
    const auto colon = text.rfind(':');
    if (colon == 0 || colon == std::string_view::npos || colon + 1 == text.size())
        return false;
    for (std::size_t i = 0; i < colon; ++i) {
        const char c = text[i];
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-')
            return false;
    }
    for (std::size_t i = colon + 1; i < text.size(); ++i) {
        if (text[i] < '0' || text[i] > '9')
            return false;
    }
    return true;
}

bool isAsciiLower(std::string_view a, std::string_view lower)
{
    if (a.size() != lower.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) != lower[i])
            return false;
    }
    return true;
}

std::optional<int> parseNumber(std::string_view s, int max)
{
    int v = 0;
    if (s.empty() || s.size() > 6)
        return std::nullopt;
    for (char c : s) {
        if (c < '0' || c > '9')
            return std::nullopt; // from_chars would take a '-'
    }
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc {} || end != s.data() + s.size() || v < 0 || v > max)
        return std::nullopt;
    return v;
}

bool hostChar(char c)
{
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

bool prefixChar(char c)
{
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' || c == ':';
}

// `text` holds no password: HomeSpec::parse refused it before.
Result<RedisAddress> parseRedis(std::string_view text)
{
    RedisAddress a;
    const std::size_t start = text.find("://") + 3;
    std::string_view rest = text.substr(start);
    if (rest.find('%') != std::string_view::npos)
        return bad(
            text, "percent-encoding is not supported in a Redis home; write the URL as " + std::string(FORM));
    if (rest.find('#') != std::string_view::npos)
        return bad(text, "a Redis home has no '#' part");

    std::string_view query;
    if (auto q = rest.find('?'); q != std::string_view::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
    }
    std::string_view path;
    if (auto slash = rest.find('/'); slash != std::string_view::npos) {
        path = rest.substr(slash + 1);
        rest = rest.substr(0, slash);
    }
    if (auto at = rest.rfind('@'); at != std::string_view::npos) {
        const std::string_view userinfo = rest.substr(0, at);
        rest = rest.substr(at + 1);
        if (userinfo.empty() || userinfo.size() > 64)
            return bad(text, "the Redis user name must have 1 to 64 characters");
        for (char c : userinfo) {
            if (!hostChar(c))
                return bad(text, "the Redis user name may only hold letters, digits, '-', '.' and '_'");
        }
        a.user = std::string(userinfo);
    }

    std::string_view port;
    bool hasPort = false;
    if (!rest.empty() && rest.front() == '[') {
        const auto close = rest.find(']');
        if (close == std::string_view::npos)
            return bad(text, "an IPv6 address must be closed by ']'");
        a.host = std::string(rest.substr(1, close - 1));
        bool hexOrColon = a.host.find(':') != std::string::npos;
        for (char c : a.host) {
            if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.')
                hexOrColon = false;
        }
        if (!hexOrColon)
            return bad(text, "not an IPv6 address between '[' and ']'");
        rest = rest.substr(close + 1);
        if (!rest.empty() && rest.front() != ':')
            return bad(text, "after an IPv6 address only ':PORT' may follow");
        hasPort = !rest.empty();
        if (hasPort)
            port = rest.substr(1);
    } else {
        const auto colon = rest.find(':');
        a.host = std::string(rest.substr(0, colon));
        hasPort = colon != std::string_view::npos;
        if (hasPort)
            port = rest.substr(colon + 1);
        for (char c : a.host) {
            if (!hostChar(c))
                return bad(text, "the Redis host may only hold letters, digits, '-', '.' and '_'");
        }
    }
    if (a.host.empty() || a.host.size() > 253)
        return bad(text, "a Redis home needs a host: " + std::string(FORM));
    if (hasPort) {
        auto p = parseNumber(port, 65535);
        if (!p || *p == 0)
            return bad(text, "the Redis port must be a number from 1 to 65535");
        a.port = *p;
    }
    if (!path.empty()) {
        auto db = parseNumber(path, RedisAddress::MAX_DB);
        if (!db)
            return bad(text,
                "the part after the host must be a database number from 0 to "
                    + std::to_string(RedisAddress::MAX_DB));
        a.db = *db;
    }
    bool seenPrefix = false;
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view item = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view {} : query.substr(amp + 1);
        const auto eq = item.find('=');
        const std::string_view key = item.substr(0, eq);
        const std::string_view value
            = eq == std::string_view::npos ? std::string_view {} : item.substr(eq + 1);
        if (key != "prefix")
            return bad(text, "unknown option '" + std::string(key) + "' in a Redis home (known: prefix)");
        if (seenPrefix)
            return bad(text, "prefix= is given twice");
        seenPrefix = true;
        if (value.empty() || value.size() > RedisAddress::MAX_PREFIX)
            return bad(
                text, "prefix= must have 1 to " + std::to_string(RedisAddress::MAX_PREFIX) + " characters");
        for (char c : value) {
            if (!prefixChar(c))
                return bad(text, "prefix= may only hold letters, digits, '-', '.', '_' and ':'");
        }
        a.prefix = std::string(value);
    }
    return a;
}

} // namespace

std::string RedisAddress::url() const
{
    std::string out = "redis://";
    if (!user.empty())
        out += user + "@";
    out += host.find(':') != std::string::npos ? "[" + host + "]" : host;
    out += ":" + std::to_string(port) + "/" + std::to_string(db);
    if (prefix != DEFAULT_PREFIX)
        out += "?prefix=" + prefix;
    return out;
}

Result<HomeSpec> HomeSpec::resolve(const std::optional<std::string>& explicitHome)
{
    std::string text;
    bool isDefault = true;
    if (explicitHome && !explicitHome->empty()) {
        text = *explicitHome;
        isDefault = false;
    } else if (const char* env = std::getenv("TOLLGATE_HOME"); env && *env) {
        text = env;
        isDefault = false;
    } else if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) {
        text = std::string(xdg) + "/tollgate";
    } else if (const char* home = std::getenv("HOME"); home && *home) {
        text = std::string(home) + "/.local/state/tollgate";
    } else {
        return Error::make(ErrorKind::Usage, "", "no home directory: pass --home DIR or set TOLLGATE_HOME");
    }
    auto spec = parse(text);
    if (spec)
        spec->m_default = isDefault;
    return spec;
}

Result<HomeSpec> HomeSpec::parse(std::string_view text)
{
    auto spec = parseUnmasked(text);
    if (spec)
        return spec;
    // Every refusal names the text, and some quote it inside the message too: whatever the
    // branch, what reaches the user goes through the one mask (stderr and --json end up in
    // logs).
    Error e = spec.error();
    const std::string masked = maskedUrl(text);
    if (masked != text) {
        for (std::string* field : { &e.path, &e.message }) {
            for (auto at = field->find(text); at != std::string::npos;
                 at = field->find(text, at + masked.size()))
                field->replace(at, text.size(), masked);
        }
    }
    e.path = maskedUrl(e.path);
    return e;
}

Result<HomeSpec> HomeSpec::parseUnmasked(std::string_view text)
{
    HomeSpec spec;
    if (text.find('\0') != std::string_view::npos)
        return bad(text.substr(0, text.find('\0')), "the home contains a NUL byte; refused");
    // A password is refused before anything else is looked at, in any shape of home string
    // ("rediss://u:pw@h", " redis://u:pw@h", "redis:/u:pw@h", "u:pw@h:6379"), and shown masked.
    if (SecretMask::holdsPassword(text))
        return bad(SecretMask::userinfo(text),
            "a password in the home is refused (the command line shows in `ps` and in shell history): "
            "give it in TOLLGATE_REDIS_PASSWORD or in a 0600 file named by TOLLGATE_REDIS_PASSWORD_FILE");
    const std::string_view scheme = schemeOf(text);
    if (!scheme.empty()) {
        if (text.substr(scheme.size(), 3) != "://")
            return bad(
                text, "this looks like a URL but is not one (a Redis home is " + std::string(FORM) + ")");
        if (isAsciiLower(scheme, "redis")) {
            auto a = parseRedis(text);
            if (!a)
                return a.error();
            spec.m_kind = Kind::Redis;
            spec.m_redis = std::move(a).value();
            return spec;
        }
        if (isAsciiLower(scheme, "rediss"))
            return Error::make(ErrorKind::Unsupported, std::string(text),
                "rediss:// (Redis over TLS) is not supported: this build's hiredis (0.14) has no TLS, and "
                "Tollgate "
                "never falls back to plain text. Run a local TLS tunnel and point the home at it "
                "(README, \"Redis over TLS\")");
        if (isAsciiLower(scheme, "unix"))
            return bad(
                text, "a unix socket is not a Tollgate home; give a directory or " + std::string(FORM));
        return bad(text,
            "unknown kind of home '" + std::string(scheme) + "://': a home is a directory or "
                + std::string(FORM));
    }
    if (!text.empty()
        && (std::isspace(static_cast<unsigned char>(text.front()))
            || std::isspace(static_cast<unsigned char>(text.back()))))
        return bad(text, "the home begins or ends with white space (pasted?); refused");
    if (text.find("://") != std::string_view::npos)
        return bad(text,
            "a home with '://' inside is neither a directory nor a URL; a Redis home is "
                + std::string(FORM));
    if (looksLikeHostPort(text))
        return bad(text,
            "this looks like HOST:PORT, not a directory; a Redis home is written " + std::string(FORM)
                + " (a directory of that name: ./" + std::string(text) + ")");
    std::string dir(text);
    while (dir.size() > 1 && dir.back() == '/')
        dir.pop_back();
    auto valid = PathPolicy::validate(dir);
    if (!valid)
        return valid.error();
    spec.m_dir = std::move(dir);
    return spec;
}

std::string HomeSpec::text() const
{
    return m_kind == Kind::Directory ? m_dir : m_redis.url();
}

} // namespace tollgate
