#pragma once

// RedisConnection: one connection to the Redis server of a Redis home, through hiredis (no
// RESP code of ours). The groundwork of the Redis store; hiredis types never leave the .cpp.
//
// Invariants:
// - Nothing waits for ever: each command has one deadline, `timeout` from its start, for
//   all of it: reconnecting (our own non-blocking, close-on-exec socket, handed to hiredis as
//   a non-blocking context), writing the command and reading its complete reply, each step
//   a poll() against that deadline. A server that trickles its reply byte by byte, or signals
//   arriving meanwhile, cannot stretch it; past it the command is an ErrorKind::Timeout naming
//   the URL. Known gap: a host *name* is resolved by the system resolver with its own
//   timeouts (a numeric address needs no lookup).
// - Fail closed: any transport error marks the connection broken and is returned (naming the
//   URL and the error); the next command reconnects once before it reports failure. No command
//   is retried after it may have reached the server — a retried EVALSHA could apply a
//   transition twice — only the connect (and a NOSCRIPT, which ran nothing) is.
// - The password never comes from the URL: TOLLGATE_REDIS_PASSWORD, else the file named by
//   TOLLGATE_REDIS_PASSWORD_FILE, which must be a regular file of ours that others cannot read
//   (it is opened without blocking, like every file Tollgate reads).
// - Scripts are loaded once per server and called by their SHA1; after a server restart (or
//   SCRIPT FLUSH) the NOSCRIPT answer reloads them and the call is made again.
// - A function library (callFunction) is loaded once per server under a name made from its
//   SHA1 (so versions side by side never clash) and called by FCALL; "Function not found" (a
//   restart without persistence, FUNCTION FLUSH) ran nothing and loads it again. Where
//   functions are refused (an ACL without FUNCTION/FCALL, a server before Redis 7) the same
//   text runs by EVALSHA: slower, never different.
// - A look that writes nothing (callReadOnly) goes by FCALL_RO / EVALSHA_RO, which Redis lets
//   run on a read-only replica and under CLIENT PAUSE WRITE: `status` is not a writing call.

#include "base/result.h"
#include "store/homespec.h"
#include "store/redislibrary.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tollgate {

// A reply, converted from hiredis's: a value tree of our own.
struct RedisReply
{
    enum class Type { Nil, Integer, String, Status, Array, Error };
    Type type = Type::Nil;
    std::int64_t integer = 0;
    std::string text; // String, Status and Error
    std::vector<RedisReply> elements; // Array

    [[nodiscard]] bool isNil() const { return type == Type::Nil; }
};

class RedisConnection
{
public:
    static constexpr std::chrono::milliseconds DEFAULT_TIMEOUT { 2000 };

    ~RedisConnection();
    RedisConnection(RedisConnection&&) noexcept;
    RedisConnection& operator=(RedisConnection&&) noexcept;
    RedisConnection(const RedisConnection&) = delete;
    RedisConnection& operator=(const RedisConnection&) = delete;

    // Connects, authenticates and selects the database. Errors name the URL.
    [[nodiscard]] static Result<RedisConnection> open(
        const RedisAddress& address, std::chrono::milliseconds timeout = DEFAULT_TIMEOUT);

    // The deadline of each later command (at least 1 ms), from its start.
    void setTimeout(std::chrono::milliseconds timeout);

    // One command; an error reply ("ERR ...", "NOSCRIPT ...") is returned as a reply of type
    // Error, a transport failure as an Error.
    [[nodiscard]] Result<RedisReply> command(const std::vector<std::string>& argv);
    // The server's clock (TIME), in unix ms: the one clock every host's decisions use.
    [[nodiscard]] Result<std::int64_t> serverTimeMs();
    // Runs `script` (EVALSHA, loading it first when the server does not know it).
    [[nodiscard]] Result<RedisReply> eval(const std::string& script, const std::vector<std::string>& keys,
        const std::vector<std::string>& args);

    // Runs `library`, a script that registers FUNCTION_NAME when loaded as a function library
    // and runs itself otherwise (see core/backend/redisquota.lua): FCALL, loading the library
    // first when the server does not have it; EVALSHA where functions are refused.
    [[nodiscard]] Result<RedisReply> callFunction(const std::string& library,
        const std::vector<std::string>& keys, const std::vector<std::string>& args);
    [[nodiscard]] Result<RedisReply> callFunction(const RedisLibrary& library,
        const std::vector<std::string>& keys, const std::vector<std::string>& args);
    // The same for a call that writes nothing: the library's FUNCTION_NAME_ro (registered with
    // the no-writes flag) by FCALL_RO, else the text by EVALSHA_RO. Such a call runs on a
    // read-only replica and while the server holds writers (CLIENT PAUSE WRITE, a failover);
    // on a server without either (before Redis 7) it is an ordinary call.
    [[nodiscard]] Result<RedisReply> callReadOnly(const std::string& library,
        const std::vector<std::string>& keys, const std::vector<std::string>& args);
    [[nodiscard]] Result<RedisReply> callReadOnly(const RedisLibrary& library,
        const std::vector<std::string>& keys, const std::vector<std::string>& args);

    // Pub/sub: after subscribe() the connection only receives (no command() any more).
    // fd() becomes readable when a message may have arrived; takeMessages() counts the
    // messages that arrived, without blocking, and appends their payloads to `payloads` when
    // given (each cut to a short prefix: they are signals, not data). A lost connection is an
    // error there (the subscriber reconnects and re-reads the state: messages sent meanwhile
    // are gone).
    [[nodiscard]] Result<void> subscribe(const std::vector<std::string>& channels);
    [[nodiscard]] int fd() const;
    [[nodiscard]] Result<int> takeMessages(std::vector<std::string>* payloads = nullptr);

    // Commands this process sent to any Redis server (each one round trip): for the bench's
    // "one round trip per acquire", counted where they leave, not guessed from server stats.
    [[nodiscard]] static std::uint64_t commandsSent();

    [[nodiscard]] const RedisAddress& address() const;
    [[nodiscard]] std::string url() const { return address().url(); }
    [[nodiscard]] bool broken() const;

    // The password for `address` from the environment (see above); nullopt: none configured.
    [[nodiscard]] static Result<std::optional<std::string>> password();
    // A key of this home: "{prefix}:name" (one hash tag for every key: Redis Cluster keeps a
    // home's keys in one slot, so a script may touch them all).
    [[nodiscard]] static std::string key(const RedisAddress& address, const std::string& name);

private:
    struct Impl;
    explicit RedisConnection(std::unique_ptr<Impl> impl);
    Result<void> reconnect(std::chrono::steady_clock::time_point deadline);
    Result<RedisReply> evalAs(const char* command, const RedisLibrary& script,
        const std::vector<std::string>& keys, const std::vector<std::string>& args);
    Result<RedisReply> invoke(const RedisLibrary& library, const std::vector<std::string>& keys,
        const std::vector<std::string>& args, bool readOnly);
    Result<RedisReply> evalReadOnlyOr(const RedisLibrary& library, const std::vector<std::string>& keys,
        const std::vector<std::string>& args, bool readOnly);
    std::unique_ptr<Impl> m_impl;
};

} // namespace tollgate
