#include "store/redisconnection.h"

#include "system/fd.h"
#include "system/secretfile.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <map>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tollgate {

namespace {

// The most of a notification's payload takeMessages keeps.
constexpr std::size_t MAX_PAYLOAD_KEPT = 64;

struct ContextDeleter
{
    void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

struct ReplyDeleter
{
    void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

constexpr std::size_t MAX_PASSWORD_BYTES = 4096;

std::atomic<std::uint64_t> g_commandsSent { 0 };

RedisReply convert(const redisReply* r)
{
    RedisReply out;
    switch (r->type) {
    case REDIS_REPLY_STRING:
        out.type = RedisReply::Type::String;
        out.text.assign(r->str, r->len);
        break;
    case REDIS_REPLY_STATUS:
        out.type = RedisReply::Type::Status;
        out.text.assign(r->str, r->len);
        break;
    case REDIS_REPLY_ERROR:
        out.type = RedisReply::Type::Error;
        out.text.assign(r->str, r->len);
        break;
    case REDIS_REPLY_INTEGER:
        out.type = RedisReply::Type::Integer;
        out.integer = r->integer;
        break;
    case REDIS_REPLY_ARRAY:
        out.type = RedisReply::Type::Array;
        out.elements.reserve(r->elements);
        for (std::size_t i = 0; i < r->elements; ++i)
            out.elements.push_back(convert(r->element[i]));
        break;
    default:
        out.type = RedisReply::Type::Nil;
        break;
    }
    return out;
}

// hiredis reports a timeout as an I/O error with EAGAIN (the socket timeout) or ETIMEDOUT.
Error transportError(const redisContext* c, const std::string& url, const char* doing)
{
    const int err = c ? (c->err == REDIS_ERR_IO ? errno : 0) : ENOMEM;
    const std::string why = c ? std::string(c->errstr) : std::string("out of memory");
    if (err == EAGAIN || err == EWOULDBLOCK || err == ETIMEDOUT || err == EINPROGRESS)
        return Error::make(
            ErrorKind::Timeout, url, std::string("Redis did not answer in time while ") + doing);
    return Error::make(ErrorKind::Io, url, std::string("Redis ") + doing + " failed: " + why);
}

using Steady = std::chrono::steady_clock;

// Waits until `fd` is ready for `events` or the deadline passes (EINTR does not stretch it:
// the deadline is absolute). True when ready (or in error: the next read or write says which).
bool waitReady(int fd, short events, Steady::time_point deadline)
{
    for (;;) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Steady::now());
        if (left.count() <= 0)
            return false;
        pollfd p { fd, events, 0 };
        const int n = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30)));
        if (n > 0)
            return true;
        if (n < 0 && errno != EINTR)
            return true; // let the read or write report it
    }
}

// Resolves the host (a numeric address needs no lookup; a name is looked up by the system
// resolver, whose own timeouts apply) and connects a non-blocking, close-on-exec socket to the
// first address that answers before the deadline. The socket stays non-blocking: every
// command is written and its reply read with poll() against one deadline (Impl::raw).
Result<Fd> connectSocket(const RedisAddress& address, Steady::time_point deadline)
{
    const std::string url = address.url();
    addrinfo hints {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(address.port);
    if (int rc = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found); rc != 0)
        return Error::make(
            ErrorKind::Io, url, std::string("cannot resolve the Redis host: ") + ::gai_strerror(rc));
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, &::freeaddrinfo);
    Error last = Error::make(ErrorKind::Io, url, "no address to connect to");
    for (const addrinfo* ai = found; ai; ai = ai->ai_next) {
        const int raw
            = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (raw < 0) {
            last = Error::fromErrno(errno, url, "cannot create a socket for Redis");
            continue;
        }
        Fd sock(raw, url);
        int rc = ::connect(sock.get(), ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            pollfd p { sock.get(), POLLOUT, 0 };
            for (;;) {
                const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now());
                if (left.count() <= 0) {
                    rc = -1;
                    errno = ETIMEDOUT;
                    break;
                }
                const int n = ::poll(&p, 1, static_cast<int>(left.count()));
                if (n < 0 && errno == EINTR)
                    continue; // the deadline still holds: it is absolute
                if (n <= 0) {
                    rc = -1;
                    errno = n == 0 ? ETIMEDOUT : errno;
                    break;
                }
                int err = 0;
                socklen_t len = sizeof err;
                ::getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &err, &len);
                rc = err == 0 ? 0 : -1;
                errno = err;
                break;
            }
        }
        if (rc != 0) {
            last = errno == ETIMEDOUT
                ? Error::make(ErrorKind::Timeout, url, "Redis did not accept the connection in time")
                : Error::fromErrno(errno, url, "cannot connect to Redis");
            continue;
        }
        const int one = 1;
        (void)::setsockopt(sock.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return sock;
    }
    return last;
}

} // namespace

struct RedisConnection::Impl
{
    RedisAddress address;
    std::chrono::milliseconds timeout;
    std::optional<std::string> password;
    ContextPtr context;
    std::map<std::string, std::string> loadedAs; // SHA1 of a script text -> the SHA1 the server gave
    bool functionsRefused = false; // this server (or our user) has no FUNCTION/FCALL
    bool readOnlyRefused = false; // ... nor EVALSHA_RO (before Redis 7, or an ACL)

    // One command and its whole reply before `deadline`: the command is written and the
    // reply read without blocking, polling against that one deadline, so a server that
    // trickles its reply, or signals arriving meanwhile, cannot stretch it.
    Result<RedisReply> raw(const std::vector<std::string>& argv, Steady::time_point deadline)
    {
        if (!context)
            return Error::make(ErrorKind::Io, address.url(), "not connected to Redis");
        std::vector<const char*> args;
        std::vector<std::size_t> lens;
        args.reserve(argv.size());
        lens.reserve(argv.size());
        for (const auto& a : argv) {
            args.push_back(a.data());
            lens.push_back(a.size());
        }
        const std::string doing = "running " + argv.front();
        if (redisAppendCommandArgv(context.get(), static_cast<int>(args.size()), args.data(), lens.data())
            != REDIS_OK)
            return broken(doing);
        g_commandsSent.fetch_add(1, std::memory_order_relaxed);
        auto reply = readReply(doing, deadline, true);
        if (!reply)
            return reply.error();
        return convert(reply->get());
    }

    // Writes what hiredis holds for the server (when `write`), then reads one reply, before
    // `deadline`. Any failure leaves the connection unusable (the reply stream may be out of
    // step), so it is dropped.
    Result<ReplyPtr> readReply(const std::string& doing, Steady::time_point deadline, bool write)
    {
        redisContext* c = context.get();
        for (int done = !write; !done;) {
            errno = 0;
            if (redisBufferWrite(c, &done) != REDIS_OK)
                return broken(doing);
            if (!done && !waitReady(c->fd, POLLOUT, deadline))
                return timedOut(doing);
        }
        for (;;) {
            void* raw = nullptr;
            if (redisGetReplyFromReader(c, &raw) != REDIS_OK)
                return broken(doing);
            if (raw)
                return ReplyPtr(static_cast<redisReply*>(raw));
            if (!waitReady(c->fd, POLLIN, deadline))
                return timedOut(doing);
            errno = 0;
            if (redisBufferRead(c) != REDIS_OK)
                return broken(doing);
        }
    }

    Error broken(const std::string& doing)
    {
        auto e = transportError(context.get(), address.url(), doing.c_str());
        context.reset();
        return e;
    }
    Error timedOut(const std::string& doing)
    {
        context.reset();
        return Error::make(ErrorKind::Timeout, address.url(), "Redis did not answer in time while " + doing);
    }
};

RedisConnection::RedisConnection(std::unique_ptr<Impl> impl)
    : m_impl(std::move(impl))
{
}
RedisConnection::~RedisConnection() = default;
RedisConnection::RedisConnection(RedisConnection&&) noexcept = default;
RedisConnection& RedisConnection::operator=(RedisConnection&&) noexcept = default;

Result<std::optional<std::string>> RedisConnection::password()
{
    if (const char* p = std::getenv("TOLLGATE_REDIS_PASSWORD"); p && *p)
        return std::optional<std::string>(p);
    const char* file = std::getenv("TOLLGATE_REDIS_PASSWORD_FILE");
    if (!file || !*file)
        return std::optional<std::string>();
    auto pw = SecretFile::read(
        file, "the Redis password file (TOLLGATE_REDIS_PASSWORD_FILE)", MAX_PASSWORD_BYTES);
    if (!pw) {
        // Whatever is wrong with the file (missing, mistyped, empty, not ours), the home cannot
        // be reached: a failure (exit 3), never "not found" — readers take that for a home
        // where nothing has run, and a backup job would export an empty one (issue 27).
        Error e = pw.error();
        e.kind = ErrorKind::Permission;
        return e;
    }
    return std::optional<std::string>(std::move(pw).value());
}

std::string RedisConnection::key(const RedisAddress& address, const std::string& name)
{
    return "{" + address.prefix + "}:" + name;
}

Result<RedisConnection> RedisConnection::open(const RedisAddress& address, std::chrono::milliseconds timeout)
{
    if (timeout < std::chrono::milliseconds(1))
        return Error::make(
            ErrorKind::Usage, address.url(), "a Redis timeout must be at least 1 ms"); // 0 would mean none
    auto impl = std::make_unique<Impl>();
    impl->address = address;
    impl->timeout = timeout;
    auto pw = password();
    if (!pw)
        return pw.error();
    impl->password = std::move(pw).value();
    RedisConnection c(std::move(impl));
    if (auto r = c.reconnect(std::chrono::steady_clock::now() + timeout); !r)
        return r.error();
    return c;
}

Result<void> RedisConnection::reconnect(std::chrono::steady_clock::time_point deadline)
{
    Impl& d = *m_impl;
    d.context.reset();
    const std::string url = d.address.url();
    // Our own socket, close-on-exec from its first instant (`tollgate run` must not hand the
    // connection to its command, nor may another thread's fork catch it half-made), connected
    // with a deadline; then given to hiredis, which is told it does not block (so it hands
    // EAGAIN back to our poll() instead of treating it as an error).
    auto fd = connectSocket(d.address, deadline);
    if (!fd)
        return fd.error();
    errno = 0;
    ContextPtr ctx(redisConnectFd(fd->get()));
    if (!ctx || ctx->err)
        return transportError(ctx.get(), url, "connecting");
    (void)fd->release(); // hiredis owns it now (redisFree closes it)
    ctx->flags &= ~REDIS_BLOCK;
    (void)redisEnableKeepAlive(ctx.get()); // a peer that vanished is noticed, not waited on
    d.context = std::move(ctx);
    if (d.password) {
        std::vector<std::string> auth { "AUTH" };
        if (!d.address.user.empty())
            auth.push_back(d.address.user);
        auth.push_back(*d.password);
        auto r = d.raw(auth, deadline);
        if (!r)
            return r.error();
        if (r->type == RedisReply::Type::Error) {
            d.context.reset();
            // The server's words (WRONGPASS ...) never contain the password.
            return Error::make(ErrorKind::Permission, url, "Redis refused the password: " + r->text);
        }
    } else if (!d.address.user.empty()) {
        d.context.reset();
        return Error::make(ErrorKind::Permission, url,
            "a Redis user is named but no password is set (TOLLGATE_REDIS_PASSWORD or "
            "TOLLGATE_REDIS_PASSWORD_FILE)");
    }
    if (d.address.db != 0) {
        auto r = d.raw({ "SELECT", std::to_string(d.address.db) }, deadline);
        if (!r)
            return r.error();
        if (r->type == RedisReply::Type::Error) {
            d.context.reset();
            return Error::make(ErrorKind::Io, url,
                "Redis refused database " + std::to_string(d.address.db) + ": " + r->text);
        }
    }
    return {};
}

void RedisConnection::setTimeout(std::chrono::milliseconds timeout)
{
    m_impl->timeout = std::max(timeout, std::chrono::milliseconds(1));
}

Result<RedisReply> RedisConnection::command(const std::vector<std::string>& argv)
{
    if (argv.empty())
        return Error::make(ErrorKind::Usage, url(), "an empty Redis command");
    // A connection the server closed while it was idle (a restart, CLIENT KILL, its idle
    // timeout) is made again before the command is sent — nothing was sent on it, so nothing
    // can run twice. An idle connection has nothing to read: if it has, the server hung up.
    if (m_impl->context) {
        pollfd p { m_impl->context->fd, POLLIN | POLLRDHUP, 0 };
        if (::poll(&p, 1, 0) > 0)
            m_impl->context.reset();
    }
    // One deadline for the whole operation: reconnecting, sending, and the complete reply.
    const auto deadline = std::chrono::steady_clock::now() + m_impl->timeout;
    if (!m_impl->context) {
        if (auto r = reconnect(deadline); !r)
            return r.error();
    }
    auto reply = m_impl->raw(argv, deadline);
    // A server that wants a password answers a client that gave none with NOAUTH — or, when
    // the command has more than 10 parts or a part longer than 16 KiB (a script call, a
    // function load), with "Protocol error: unauthenticated ..." and closes the connection.
    // Either way the hint is the same.
    if (reply && reply->type == RedisReply::Type::Error
        && (reply->text.rfind("NOAUTH", 0) == 0
            || reply->text.rfind("ERR Protocol error: unauthenticated", 0) == 0)) {
        m_impl->context.reset();
        return Error::make(ErrorKind::Permission, url(),
            "Redis requires a password: set TOLLGATE_REDIS_PASSWORD or TOLLGATE_REDIS_PASSWORD_FILE");
    }
    return reply;
}

Result<std::int64_t> RedisConnection::serverTimeMs()
{
    auto r = command({ "TIME" });
    if (!r)
        return r.error();
    if (r->type != RedisReply::Type::Array || r->elements.size() != 2
        || r->elements[0].type != RedisReply::Type::String || r->elements[1].type != RedisReply::Type::String)
        return Error::make(
            ErrorKind::Corrupt, url(), "Redis answered TIME with something that is not a time");
    char* end = nullptr;
    const long long s = std::strtoll(r->elements[0].text.c_str(), &end, 10);
    const long long us = std::strtoll(r->elements[1].text.c_str(), &end, 10);
    return static_cast<std::int64_t>(s) * 1000 + us / 1000;
}

Result<RedisReply> RedisConnection::eval(
    const std::string& script, const std::vector<std::string>& keys, const std::vector<std::string>& args)
{
    return evalAs("EVALSHA", RedisLibrary(script), keys, args);
}

Result<RedisReply> RedisConnection::evalAs(const char* verb, const RedisLibrary& script,
    const std::vector<std::string>& keys, const std::vector<std::string>& args)
{
    // The server names a script by its SHA1, so the first call needs no SCRIPT LOAD.
    std::string sha = script.sha();
    if (auto it = m_impl->loadedAs.find(sha); it != m_impl->loadedAs.end())
        sha = it->second;
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (attempt > 0) {
            auto loaded = command({ "SCRIPT", "LOAD", script.text() });
            if (!loaded)
                return loaded.error();
            if (loaded->type != RedisReply::Type::String)
                return Error::make(ErrorKind::Io, url(), "Redis did not load a script: " + loaded->text);
            sha = loaded->text;
            m_impl->loadedAs[script.sha()] = sha;
        }
        std::vector<std::string> argv { verb, sha, std::to_string(keys.size()) };
        argv.insert(argv.end(), keys.begin(), keys.end());
        argv.insert(argv.end(), args.begin(), args.end());
        auto r = command(argv);
        if (!r)
            return r;
        // NOSCRIPT: the server lost its scripts (a restart, SCRIPT FLUSH); nothing ran. Load again.
        if (r->type == RedisReply::Type::Error && r->text.rfind("NOSCRIPT", 0) == 0)
            continue;
        return r;
    }
    return Error::make(ErrorKind::Io, url(), "Redis kept forgetting the script");
}

namespace {

bool startsWith(const std::string& text, const char* prefix)
{
    return text.rfind(prefix, 0) == 0;
}

// Errors that mean "this server or user cannot use functions" (nothing ran): fall back to
// EVALSHA.
bool functionsRefused(const RedisReply& r)
{
    return r.type == RedisReply::Type::Error
        && (startsWith(r.text, "ERR unknown command") || startsWith(r.text, "NOPERM"));
}

} // namespace

Result<RedisReply> RedisConnection::callFunction(
    const std::string& library, const std::vector<std::string>& keys, const std::vector<std::string>& args)
{
    return invoke(RedisLibrary(library), keys, args, false);
}

Result<RedisReply> RedisConnection::callFunction(
    const RedisLibrary& library, const std::vector<std::string>& keys, const std::vector<std::string>& args)
{
    return invoke(library, keys, args, false);
}

Result<RedisReply> RedisConnection::callReadOnly(
    const std::string& library, const std::vector<std::string>& keys, const std::vector<std::string>& args)
{
    return invoke(RedisLibrary(library), keys, args, true);
}

Result<RedisReply> RedisConnection::callReadOnly(
    const RedisLibrary& library, const std::vector<std::string>& keys, const std::vector<std::string>& args)
{
    return invoke(library, keys, args, true);
}

Result<RedisReply> RedisConnection::invoke(const RedisLibrary& library, const std::vector<std::string>& keys,
    const std::vector<std::string>& args, bool readOnly)
{
    // The read-only way where the server has none (before Redis 7) or the user may not take it:
    // the ordinary one, which writes nothing either but is held by CLIENT PAUSE WRITE and refused
    // by a replica — as every look was before.
    if (readOnly && m_impl->readOnlyRefused)
        readOnly = false;
    if (m_impl->functionsRefused)
        return evalReadOnlyOr(library, keys, args, readOnly);
    const std::string& name = library.functionName();
    std::vector<std::string> argv { readOnly ? "FCALL_RO" : "FCALL", readOnly ? name + "_ro" : name,
        std::to_string(keys.size()) };
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    for (int attempt = 0; attempt < 2; ++attempt) {
        auto r = command(argv);
        if (!r)
            return r;
        if (functionsRefused(*r)) {
            if (!readOnly) // FCALL_RO alone may be refused (an ACL): keep FCALL for the writers
                m_impl->functionsRefused = true;
            return evalReadOnlyOr(library, keys, args, readOnly);
        }
        // Not loaded on this server (a new server, a restart without persistence, FUNCTION
        // FLUSH): nothing ran. Load it and call again.
        if (attempt == 0 && r->type == RedisReply::Type::Error
            && startsWith(r->text, "ERR Function not found")) {
            auto loaded = command({ "FUNCTION", "LOAD",
                "#!lua name=" + name + "\nlocal FUNCTION_NAME = '" + name + "'\n" + library.text() });
            if (!loaded)
                return loaded.error();
            if (functionsRefused(*loaded)) {
                m_impl->functionsRefused = true;
                return evalReadOnlyOr(library, keys, args, readOnly);
            }
            // A replica loads no library (its primary's arrive by replication): a look there
            // runs the text by EVALSHA_RO; this connection keeps trying FCALL (a failover may
            // make the server a primary).
            if (readOnly && loaded->type == RedisReply::Type::Error && startsWith(loaded->text, "READONLY"))
                return evalReadOnlyOr(library, keys, args, readOnly);
            // "already exists": another client loaded it in between, as wanted.
            if (loaded->type == RedisReply::Type::Error
                && loaded->text.find("already exists") == std::string::npos)
                return Error::make(
                    ErrorKind::Io, url(), "Redis did not load Tollgate's function library: " + loaded->text);
            continue;
        }
        return r;
    }
    return Error::make(ErrorKind::Io, url(), "Redis kept forgetting Tollgate's function library");
}

Result<RedisReply> RedisConnection::evalReadOnlyOr(const RedisLibrary& library,
    const std::vector<std::string>& keys, const std::vector<std::string>& args, bool readOnly)
{
    if (!readOnly)
        return evalAs("EVALSHA", library, keys, args);
    auto r = evalAs("EVALSHA_RO", library, keys, args);
    if (r && functionsRefused(*r)) {
        // Neither read-only way (before Redis 7, or an ACL without them): the ordinary one, by
        // FCALL where that is allowed.
        m_impl->readOnlyRefused = true;
        return invoke(library, keys, args, false);
    }
    return r;
}

std::uint64_t RedisConnection::commandsSent()
{
    return g_commandsSent.load(std::memory_order_relaxed);
}

Result<void> RedisConnection::subscribe(const std::vector<std::string>& channels)
{
    const auto deadline = std::chrono::steady_clock::now() + m_impl->timeout;
    if (!m_impl->context) {
        if (auto r = reconnect(deadline); !r)
            return r.error();
    }
    std::vector<std::string> argv { "SUBSCRIBE" };
    argv.insert(argv.end(), channels.begin(), channels.end());
    auto first = m_impl->raw(argv, deadline);
    if (!first)
        return first.error();
    // One confirmation per channel; the first came as the command's reply.
    for (std::size_t i = 1; i < channels.size(); ++i) {
        auto r = m_impl->readReply("subscribing", deadline, false);
        if (!r)
            return r.error();
    }
    return {};
}

int RedisConnection::fd() const
{
    return m_impl->context ? m_impl->context->fd : -1;
}

Result<int> RedisConnection::takeMessages(std::vector<std::string>* payloads)
{
    redisContext* c = m_impl->context.get();
    if (!c)
        return Error::make(ErrorKind::Io, url(), "the subscription to Redis was lost");
    int n = 0;
    for (;;) {
        void* raw = nullptr;
        if (redisGetReplyFromReader(c, &raw) != REDIS_OK) {
            auto e = transportError(c, url(), "reading a notification");
            m_impl->context.reset();
            return e;
        }
        if (raw) {
            ReplyPtr reply(static_cast<redisReply*>(raw));
            if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1
                && reply->element[0]->type == REDIS_REPLY_STRING
                && std::string_view(reply->element[0]->str, reply->element[0]->len) == "message") {
                ++n;
                // ["message", channel, payload]
                if (payloads && reply->elements >= 3 && reply->element[2]->type == REDIS_REPLY_STRING)
                    payloads->emplace_back(reply->element[2]->str,
                        std::min<std::size_t>(reply->element[2]->len, MAX_PAYLOAD_KEPT));
            }
            continue;
        }
        pollfd p { c->fd, POLLIN, 0 };
        int ready = 0;
        do
            ready = ::poll(&p, 1, 0);
        while (ready < 0 && errno == EINTR);
        if (ready <= 0)
            break;
        if (redisBufferRead(c) != REDIS_OK) {
            auto e = transportError(c, url(), "reading a notification");
            m_impl->context.reset();
            return e;
        }
    }
    return n;
}

const RedisAddress& RedisConnection::address() const
{
    return m_impl->address;
}

bool RedisConnection::broken() const
{
    return !m_impl->context;
}

} // namespace tollgate
