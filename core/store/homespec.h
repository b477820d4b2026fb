#pragma once

// HomeSpec: what a home string names — a directory (the file store) or a Redis server
// (redis://[user@]host[:port][/db][?prefix=NAME]). Every front-end resolves --home and
// TOLLGATE_HOME through here, so a string is read the same way by every command and the
// dashboard.
//
// Why parse rather than pass through: a URL taken as a relative directory ("redis:/host"
// created as ./redis:/host) silently splits the callers into two quotas. So anything shaped
// like a URL (a scheme followed by ':/') is either a home kind we know or refused by name,
// never a directory. A password is never part of the string (the command line shows in `ps`
// and in shell history): it comes from TOLLGATE_REDIS_PASSWORD or the 0600 file named by
// TOLLGATE_REDIS_PASSWORD_FILE, read when the store connects. `rediss://` (TLS) is refused by
// name: Debian's hiredis 0.14 has no TLS, and falling back to plain text would send the
// password in the clear. A refusal never repeats a password, whatever the shape of the string
// (SecretMask).

#include "base/result.h"

#include <optional>
#include <string>
#include <string_view>

namespace tollgate {

struct RedisAddress
{
    static constexpr int DEFAULT_PORT = 6379;
    static constexpr int MAX_DB = 65535;
    static constexpr std::size_t MAX_PREFIX = 64;
    static constexpr const char* DEFAULT_PREFIX = "tollgate";

    std::string user; // ACL user; empty: the default user
    std::string host; // a name, an IPv4 address or an IPv6 address (without brackets)
    int port = DEFAULT_PORT;
    int db = 0;
    std::string prefix = DEFAULT_PREFIX; // every key is "{prefix}:..." (one hash tag)

    // The canonical URL (never a password): redis://user@host:port/db?prefix=NAME.
    [[nodiscard]] std::string url() const;
    bool operator==(const RedisAddress&) const = default;
};

class HomeSpec
{
public:
    enum class Kind { Directory, Redis };

    // --home VALUE, else $TOLLGATE_HOME, else $XDG_STATE_HOME/tollgate, else
    // ~/.local/state/tollgate. An explicit empty value is refused by the CLI before this.
    [[nodiscard]] static Result<HomeSpec> resolve(const std::optional<std::string>& explicitHome);
    // One home string: a URL (see above) or a directory (PathPolicy applies; trailing
    // slashes dropped).
    [[nodiscard]] static Result<HomeSpec> parse(std::string_view text);

    [[nodiscard]] Kind kind() const { return m_kind; }
    [[nodiscard]] bool isDirectory() const { return m_kind == Kind::Directory; }
    [[nodiscard]] const std::string& dir() const { return m_dir; } // Directory only
    [[nodiscard]] const RedisAddress& redis() const { return m_redis; } // Redis only
    // What to show and what to pass on (TOLLGATE_HOME of a child): the directory or the URL.
    [[nodiscard]] std::string text() const;
    // The default home ($XDG_STATE_HOME/tollgate, ~/.local/state/tollgate), not one the user
    // named (--home, TOLLGATE_HOME, any string given to parse). Only the default home gets
    // missing parents created: a named one is created as its last directory alone, so a
    // mistyped --home is refused instead of growing a tree (StoreFactory).
    [[nodiscard]] bool isDefault() const { return m_default; }

private:
    // parse() without the final mask of its refusals.
    [[nodiscard]] static Result<HomeSpec> parseUnmasked(std::string_view text);

    Kind m_kind = Kind::Directory;
    bool m_default = false;
    std::string m_dir;
    RedisAddress m_redis;
};

} // namespace tollgate
