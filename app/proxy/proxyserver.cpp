#include "proxy/proxyserver.h"

#include "backend/quotalimiter.h"
#include "base/textsanitizer.h"
#include "exchange/quotaexchange.h"
#include "provider/requestestimate.h"
#include "provider/toplevelfields.h"
#include "provider/usagemeter.h"
#include "proxy/bodyshare.h"
#include "proxy/bodystreambuf.h"
#include "proxy/limiterlease.h"
#include "proxy/netcommon.h"
#include "proxy/offload.h"
#include "proxy/peerprocess.h"
#include "proxy/reply.h"
#include "proxy/requestrules.h"
#include "proxy/requeststore.h"
#include "proxy/server.h"
#include "system/fd.h"
#include "system/secretfile.h"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <cerrno>
#include <fcntl.h>
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <openssl/crypto.h>
#include <optional>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

namespace tollgate::proxy {

namespace {

// A shared token (--token-file): what clients put in their base URL's path, so it must need
// no escaping there, and long enough that guessing it is hopeless.
Result<std::string> readToken(const std::string& file)
{
    const std::string what = "--token-file " + TextSanitizer::clean(file, 1024);
    auto token = SecretFile::read(file, "the token file", 4096);
    if (!token)
        return Error::make(ErrorKind::Usage, {}, what + ": " + token.error().message);
    if (token->size() < ProxyServer::MIN_TOKEN || token->size() > ProxyServer::MAX_TOKEN
        || token->find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
            != std::string::npos)
        return Error::make(ErrorKind::Usage, {},
            what + ": the token must be " + std::to_string(ProxyServer::MIN_TOKEN) + " to "
                + std::to_string(ProxyServer::MAX_TOKEN)
                + " letters, digits or -._~ (it goes in a URL), e.g. from: openssl rand -hex 24");
    return token;
}

// true: `fd` has something to read (or hung up); false: the timeout passed. For the threads
// that block (a long body, a queued admission's watcher); the event loop never calls it.
bool waitReadable(int fd, std::chrono::milliseconds timeout)
{
    pollfd p { fd, POLLIN, 0 };
    return ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, timeout.count()))) > 0;
}

} // namespace

struct ProxyServer::Impl : Server
{
};

namespace {

// One client connection: requests one after another (keep-alive), each admitted, forwarded
// and answered; ends when the client or a deadline ends the connection. Runs on the event
// loop; what blocks (store operations, a queued admission, a long body) runs elsewhere
// (offload) while the session is suspended.
template <class Client> class Session
{
public:
    Session(Client client, std::shared_ptr<Server> server)
        : m_client(std::move(client))
        , m_s(*server)
        , m_keep(std::move(server))
        , m_o(m_s.options)
        , m_up(m_s.upstream)
    {
    }

    void close()
    {
        beast::error_code ec;
        m_client.shutdown(net::socket_base::shutdown_both, ec);
        m_client.close(ec);
    }

    net::awaitable<void> run()
    {
        for (;;) {
            http::request_parser<http::string_body> parser;
            parser.header_limit(ProxyServer::MAX_HEADER_BYTES);
            // A Content-Length is judged against this with the headers; a body read whole
            // (below) against MAX_BODY_BYTES.
            parser.body_limit(ProxyServer::MAX_STREAMED_BODY_BYTES);
            beast::error_code ec;
            // The first byte of the next request may be a while in coming (an idle keep-alive
            // connection: at most CLIENT_IDLE, and not once serving stops); once it came, the
            // headers have --header-timeout and the body --body-timeout, in total, however the
            // bytes trickle in.
            // (No co_await in an operand of ?:, && or || anywhere here: GCC 12 evaluates both
            // sides of such an expression, or destroys their temporaries twice.)
            if (m_buffer.size() == 0) {
                if (!co_await receive(Steady::now() + ProxyServer::CLIENT_IDLE, true, ec))
                    co_return;
            }
            if (!co_await readUntil(parser, true, Steady::now() + m_o.headerTimeout, ec)) {
                co_await finishWith(ec);
                co_return;
            }
            if (!m_s.token.empty() && !tokenGiven(parser.get())) {
                co_await send(Reply { 401,
                    "this proxy needs its token: put it in the base URL (http://HOST:PORT/t/TOKEN) or in an "
                    "X-Tollgate-Token header",
                    false, std::nullopt, true });
                co_return;
            }
            m_clientVersion = parser.get().version();
            if (const auto why = RequestRules::unforwardable(parser.get())) {
                co_await send(Reply { why->first, why->second, false, std::nullopt, true });
                co_return;
            }
            if (const auto length = parser.content_length();
                parser.chunked() || (length && *length > ProxyServer::STREAM_BODY_AFTER)) {
                std::optional<std::uint64_t> announced;
                if (length)
                    announced = *length;
                if (!co_await streamRequest(parser, announced))
                    co_return;
                continue;
            }
            BodyShare body(m_s.bodies); // until this request is answered
            if (const auto length = parser.content_length(); length && !body.hold(*length)) {
                beast::error_code refused = net::error::no_buffer_space;
                if (*length > m_s.bodies.limit())
                    refused = net::error::message_size;
                co_await finishWith(refused);
                co_return;
            }
            co_await continueIfAsked(parser.get());
            if (!co_await readUntil(parser, false, Steady::now() + m_o.bodyTimeout, ec)) {
                body.release();
                co_await finishWith(ec);
                co_return;
            }
            http::request<http::string_body> request = parser.release();
            if (!co_await handle(request))
                co_return;
        }
    }

private:
    static constexpr std::size_t RECEIVE_BYTES = 16384;

    // Appends what the client sent to m_buffer, waiting until `deadline` at most (and, when
    // `stoppable`, not once serving stops); false with `ec` (timeout, closed, an error).
    net::awaitable<bool> receive(Steady::time_point deadline, bool stoppable, beast::error_code& ec)
    {
        using namespace net::experimental::awaitable_operators;
        beast::error_code readError, timerError, stopError;
        net::steady_timer timer(m_client.get_executor(), deadline);
        std::size_t got = 0;
        bool inTime = false;
        auto space = m_buffer.prepare(RECEIVE_BYTES);
        if (stoppable) {
            auto r = co_await (m_client.async_read_some(space, into(readError))
                || timer.async_wait(into(timerError)) || m_s.stopping.async_wait(into(stopError)));
            inTime = r.index() == 0;
            if (inTime)
                got = std::get<0>(r);
        } else {
            auto r = co_await (
                m_client.async_read_some(space, into(readError)) || timer.async_wait(into(timerError)));
            inTime = r.index() == 0;
            if (inTime)
                got = std::get<0>(r);
        }
        if (!inTime) {
            ec = beast::error::timeout;
            co_return false;
        }
        if (readError) {
            // Closed: before a request, or in the middle of one.
            ec = readError == net::error::eof ? beast::error_code(http::error::end_of_stream) : readError;
            co_return false;
        }
        m_buffer.commit(got);
        co_return true;
    }

    // Reads until the header (or the whole message) is in, within `deadline` in total. The
    // bytes are read here and handed to Beast's parser (put), so a client that trickles them
    // cannot stretch the deadline: Beast's own read loop would wait for the whole header.
    net::awaitable<bool> readUntil(http::request_parser<http::string_body>& parser, bool headerOnly,
        Steady::time_point deadline, beast::error_code& ec)
    {
        auto done = [&] { return headerOnly ? parser.is_header_done() : parser.is_done(); };
        while (!done()) {
            if (m_buffer.size() > 0) {
                const std::size_t used = parser.put(m_buffer.data(), ec);
                m_buffer.consume(used);
                if (ec == http::error::need_more)
                    ec = {};
                if (ec)
                    co_return false;
                if (done())
                    co_return true;
                if (used > 0)
                    continue;
            }
            // Bytes the parser has not taken yet (a chunk-size line, extensions or trailers
            // that never end: Beast bounds none of them) are bounded here.
            if (m_buffer.size() > ProxyServer::MAX_HEADER_BYTES) {
                ec = http::error::bad_chunk;
                co_return false;
            }
            if (!co_await receive(deadline, false, ec))
                co_return false;
        }
        co_return true;
    }

    // A client that sent `Expect: 100-continue` (curl does for bodies past 1 MiB) waits for a
    // 100 before it sends the body — a second, else. The body is wanted: say so at once (a
    // refusal before it is read is the final answer instead). The upstream is not asked: the
    // header is not forwarded, and the proxy reads the body itself.
    net::awaitable<void> continueIfAsked(const http::request<http::string_body>& request)
    {
        const auto it = request.find(http::field::expect);
        if (it == request.end() || !beast::iequals(it->value(), "100-continue"))
            co_return;
        static constexpr std::string_view CONTINUE = "HTTP/1.1 100 Continue\r\n\r\n";
        beast::error_code ec;
        co_await net::async_write(m_client, net::buffer(CONTINUE.data(), CONTINUE.size()), into(ec));
    }

    // Whether a request carries the shared token: as the first segment of its path after /t/
    // (the SDKs take it in their base URL; it is taken off the path here) or in the
    // X-Tollgate-Token header (never forwarded). Compared in constant time.
    bool tokenGiven(http::request<http::string_body>& request) const
    {
        const std::string& token = m_s.token;
        auto same = [&token](std::string_view given) {
            return given.size() == token.size()
                && CRYPTO_memcmp(given.data(), token.data(), token.size()) == 0;
        };
        bool given = false;
        if (const auto it = request.find("X-Tollgate-Token"); it != request.end()) {
            if (!same(std::string_view(it->value().data(), it->value().size())))
                return false;
            given = true;
        }
        // A path under /t/ is always the token's (no provider has one): a wrong one is refused
        // even beside a right header, so no token goes upstream in a path.
        const std::string_view target(request.target().data(), request.target().size());
        if (target.rfind("/t/", 0) != 0)
            return given;
        const std::size_t end = target.find_first_of("/?", 3);
        if (!same(target.substr(3, end == std::string_view::npos ? std::string_view::npos : end - 3)))
            return false;
        std::string rest(end == std::string_view::npos ? std::string_view("/") : target.substr(end));
        if (rest.front() == '?')
            rest.insert(0, "/");
        request.target(rest);
        return true;
    }

    // A read that failed: say why when the client can still hear it, then close.
    net::awaitable<void> finishWith(const beast::error_code& ec)
    {
        if (auto reply = Reply::forFailedRead(ec, m_s.bodies.limit()))
            co_await send(*reply);
    }

    net::awaitable<void> send(const Reply& reply)
    {
        auto res = reply.response();
        beast::error_code ec;
        co_await http::async_write(m_client, res, into(ec));
        if (reply.linger)
            co_await lingerClose();
    }

    // After an answer that ends the connection while the client may still be sending: no more
    // writes (the client sees the end of the answer), then its bytes are read and dropped until
    // it closes, for at most LINGER in all and LINGER_BYTES (what an honest client still has
    // in flight; a client that keeps sending past that is cut off).
    net::awaitable<void> lingerClose()
    {
        static constexpr std::chrono::seconds LINGER { 2 };
        static constexpr std::size_t LINGER_BYTES = 64u << 20;
        beast::error_code ec;
        m_client.shutdown(net::socket_base::shutdown_send, ec);
        const auto until = Steady::now() + LINGER;
        std::size_t dropped = 0;
        m_buffer.clear();
        while (dropped < LINGER_BYTES) {
            if (!co_await receive(until, false, ec))
                co_return;
            dropped += m_buffer.size();
            m_buffer.clear();
        }
    }

    // The caller a request names in its X-Tollgate-Caller header (sanitised), if any.
    static std::optional<std::string> namedCaller(const http::request<http::string_body>& request)
    {
        auto it = request.find("X-Tollgate-Caller");
        if (it == request.end())
            return std::nullopt;
        std::string named = QuotaLimiter::sanitizeCaller(std::string(it->value()));
        return named.empty() ? std::nullopt : std::optional<std::string>(std::move(named));
    }

    // Whether naming this request's caller takes a look at the process at the other end: once
    // per connection, and only when a request does not name itself (the scan of /proc costs
    // more than a whole short exchange). Off the event loop, and not on the store's strand,
    // where it would hold up every other request's store operations.
    bool wantsPeer(const http::request<http::string_body>& request) const
    {
        return !m_peerLooked && !m_o.callerGiven && !namedCaller(request);
    }
    void lookUpPeer()
    {
        if (m_peerLooked)
            return;
        m_peerLooked = true;
        if constexpr (std::is_same_v<Client, tcp::socket>)
            m_peer = PeerProcess::ofLoopbackTcp(m_client.native_handle());
        else
            m_peer = PeerProcess::ofUnixSocket(m_client.native_handle());
    }

    std::string callerOf(const http::request<http::string_body>& request)
    {
        if (auto named = namedCaller(request))
            return *named;
        if (m_o.callerGiven)
            return m_o.defaultCaller;
        lookUpPeer(); // done already when this runs on a store thread (see wantsPeer)
        return m_peer.empty() ? m_o.defaultCaller : QuotaLimiter::sanitizeCaller(m_peer);
    }

    // Waits in the quota's FIFO queue, on a thread of its own; a client that hangs up
    // meanwhile cancels the wait (a second thread sleeps in poll() until it does, or until
    // the admission is decided and `decided` wakes it: no admission waits for a polling
    // interval).
    QuotaExchange::Admission waitTurn(const AdmitRequest& request)
    {
        std::atomic<bool> cancel { false };
        std::optional<Result<Permit>> permit;
        {
            // However this block ends (an exception included), the watcher is woken and
            // joined and the eventfd closed: a joinable thread left behind ends the process.
            struct Watching
            {
                int decided = ::eventfd(0, EFD_CLOEXEC);
                std::thread watcher;
                ~Watching()
                {
                    if (watcher.joinable()) {
                        const std::uint64_t one = 1;
                        (void)!::write(decided, &one, sizeof one);
                        watcher.join();
                    }
                    if (decided >= 0)
                        ::close(decided);
                }
            } watching;
            if (watching.decided < 0)
                return m_s.exchange->conclude(
                    m_lease->store(), Error::fromErrno(errno, {}, "cannot make an eventfd"), false);
            const int client = m_client.native_handle();
            const int decided = watching.decided;
            watching.watcher = std::thread([client, decided, &cancel] {
                pollfd p[2] = { { client, POLLRDHUP, 0 }, { decided, POLLIN, 0 } };
                for (;;) {
                    const int n = ::poll(p, 2, -1); // ends with the admission: `decided` is written
                    if (n < 0 && errno == EINTR)
                        continue;
                    if (n > 0 && (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR)))
                        cancel = true;
                    return;
                }
            });
            permit.emplace(m_s.exchange->waitInQueue(m_lease->store(), request, cancel));
        }
        return m_s.exchange->conclude(m_lease->store(), std::move(*permit), cancel.load());
    }

    struct Outcome
    {
        bool clientOk = false; // the answer reached the client whole: the connection may go on
        bool answered = false; // the upstream answered (status is meaningful)
        unsigned status = 0;
        HttpHeaders headers;
        std::optional<std::int64_t> retryAfterMs; // the answer's Retry-After (or -ms)
        std::string errorBody; // the first bytes of a non-2xx body
        std::optional<TokenUsage> usage;
        bool reusable = false; // the upstream connection may serve the next request
        bool retryFresh = false; // a kept connection was found closed before any answer: retry
        bool clientLeft = false; // the client went before the answer began: nobody to answer
        bool closeAfter = false; // the answer ends with the connection (an HTTP/1.0 client's)
    };

    // Points m_lease at a request's lease for as long as it runs.
    struct Unlease
    {
        LimiterLease*& lease;
        ~Unlease() { lease = nullptr; }
    };

    // `known`: the body's estimate, made already off the event loop (a held long body: parsing
    // up to MAX_BODY_BYTES here would stall every other connection).
    net::awaitable<bool> handle(
        http::request<http::string_body>& request, const RequestEstimate* known = nullptr)
    {
        const bool keepAlive = request.keep_alive();
        // The store connection this request uses, from first to last (its permit refers to it).
        RequestStore store(m_s.limiters, *m_s.exchange, m_s.storeExecutor());
        LimiterLease& lease = store.lease();
        m_lease = &lease;
        Unlease unlease { m_lease };
        RequestEstimate estimate;
        if (known)
            estimate = *known;
        else
            estimate = RequestEstimate::of(request.body());
        if (!estimate.repeated.empty()) {
            co_await send(Reply { 400, repeatedMessage(estimate.repeated), keepAlive });
            co_return keepAlive;
        }
        if (wantsPeer(request)) {
            auto look = [this] { lookUpPeer(); };
            co_await offload(m_s.storeSideBySide, look);
        }
        AdmitRequest ask;
        QuotaExchange::Admission admission;
        std::string why;
        bool opened = false;
        auto first = [&] {
            opened = lease.open(why);
            if (!opened)
                return;
            ask = m_s.exchange->askFor(estimate, callerOf(request));
            admission = m_s.exchange->firstTry(lease.store(), ask);
        };
        co_await offload(m_s.storeExecutor(), first);
        if (!opened) {
            co_await send(Reply { 502, "the shared quota cannot be reached: " + why });
            co_return false;
        }
        if (admission.mustWait) {
            auto wait = [&] { admission = waitTurn(ask); };
            co_await offload({}, wait);
        }
        if (!admission.permit) {
            if (admission.hungUp)
                co_return false; // nobody to answer; the wait left the queue
            co_await send(Reply::refusal(*admission.refusal, keepAlive));
            co_return keepAlive;
        }
        store.permit() = std::move(admission.permit);
        m_caller = ask.caller;
        const Outcome outcome = co_await forward(request, keepAlive);
        co_await settle(*store.permit(), outcome, ask.caller);
        co_return keepAlive&& outcome.clientOk && !outcome.closeAfter;
    }

    // The slot was held for the whole upstream exchange, no longer. With it go, in the same
    // store operation, the answer's real usage (it replaces the estimate in the window) and,
    // for a success, the reset of the 429 count; then what the answer says is learnt.
    net::awaitable<void> settle(Permit& permit, const Outcome& outcome, const std::string& caller)
    {
        QuotaExchange::Answer answer;
        answer.answered = outcome.answered;
        answer.status = outcome.status;
        answer.retryAfterMs = outcome.retryAfterMs;
        answer.errorBody = outcome.errorBody;
        answer.usage = outcome.usage;
        auto work = [&] { m_s.exchange->settle(m_lease->store(), permit, answer, caller); };
        co_await offload(m_s.storeExecutor(), work);
    }

    static std::string repeatedMessage(const std::string& member)
    {
        return "the request body names '" + TextSanitizer::clean(member, 64)
            + "' twice (or both output bounds after the first); which one the provider would take is not "
              "known, so it is not forwarded";
    }

    // The request to send upstream: the client's, less its hop-by-hop headers, for the
    // upstream's host. Its body is set by the caller.
    http::request<http::string_body> upstreamRequest(const http::request<http::string_body>& request) const
    {
        http::request<http::string_body> up { request.method(), m_up.base + std::string(request.target()),
            11 };
        for (const auto& field : request) {
            if (!RequestRules::hopByHop(TextSanitizer::asciiLower(
                    std::string_view(field.name_string().data(), field.name_string().size()))))
                up.insert(field.name_string(), field.value());
        }
        up.set(http::field::host, m_up.hostHeader);
        // Bodies are read on the way (usage, error kinds): not compressed, please.
        up.set(http::field::accept_encoding, "identity");
        up.keep_alive(true);
        return up;
    }

    // A long request body (see streamBody) and what its thread leaves for the event loop.
    struct Streamed
    {
        explicit Streamed(Server& s)
            : share(s.bodies)
            , store(s.limiters, *s.exchange, s.storeExecutor())
            , dog(*s.stalls)
        {
        }
        enum class End { Closed, Held, Forwarded };
        End end = End::Closed;
        std::optional<Reply> reply; // to answer before the end (Closed)
        BodyShare share;
        std::string held; // the body so far, until it goes upstream (all of it: Held)
        RequestEstimate estimate; // of a held body (End::Held), made on the body's thread
        RequestStore store;
        AdmitRequest ask;
        std::unique_ptr<UpstreamLink> link;
        http::request<http::string_body> up;
        // Last, so first to go: it lets go of the link's descriptor before the link closes it.
        // Armed only while there is a link: before, the body's own deadlines hold.
        StallMonitor::Watch dog;
    };

    // A body longer than STREAM_BODY_AFTER, framed by its Content-Length, or chunked: read by
    // streamBody on a thread of its own, then (Forwarded) the answer is relayed here, or
    // (Held) the request is handled as a short one.
    net::awaitable<bool> streamRequest(
        http::request_parser<http::string_body>& parser, std::optional<std::uint64_t> length)
    {
        http::request<http::string_body> head = parser.get(); // its headers; no body read yet
        const bool keepAlive = head.keep_alive();
        Streamed s(m_s);
        // What may be held, until this request is answered: the whole Content-Length from the
        // start (at most MAX_BODY_BYTES: no more is ever held), as for a short body (first
        // come, first served: a later request cannot take the room a body already announced),
        // given back once the body streams. A body larger than all the proxy may hold takes
        // its share as it is held, and is refused only if its members come too late for it to
        // stream.
        const std::size_t mayHold = static_cast<std::size_t>(
            std::min<std::uint64_t>(length.value_or(0), ProxyServer::MAX_BODY_BYTES));
        if (mayHold <= m_s.bodies.limit() && !s.share.hold(mayHold)) {
            co_await finishWith(net::error::no_buffer_space);
            co_return false;
        }
        co_await continueIfAsked(head);
        const int fd = m_client.native_handle();
        auto body = [&] { streamBody(parser, length, head, s); };
        co_await offload({}, body);
        m_lease = &s.store.lease();
        Unlease unlease { m_lease };
        if (s.end == Streamed::End::Closed) {
            s.dog.watch(-1, -1);
            if (s.reply)
                co_await send(*s.reply);
            co_return false;
        }
        if (s.end == Streamed::End::Held) {
            s.dog.watch(-1, -1);
            head.body() = std::move(s.held);
            co_return co_await handle(head, &s.estimate);
        }
        UpstreamLink& link = *s.link;
        // (No co_await inside ?:, see run().)
        Outcome outcome;
        if (link.tls)
            outcome = co_await exchange(*link.tls, s.up, keepAlive, s.dog, false, true);
        else
            outcome = co_await exchange(*link.plain, s.up, keepAlive, s.dog, false, true);
        s.dog.watch(fd, -1); // disarmed before the link is kept or closed
        if (outcome.reusable && !s.dog.fired())
            m_s.pool.give(std::move(s.link));
        co_await settle(*s.store.permit(), outcome, s.ask.caller);
        co_return keepAlive&& outcome.clientOk && !outcome.closeAfter;
    }

    // On a thread of its own (nlohmann's parser pulls the body, blocking): the body is read
    // through TopLevelFields as it arrives and held only until its model and output bound were
    // parsed (the SDKs write them first); then admitted, and the head and what was held go
    // upstream, and the rest is forwarded as it comes. Nothing goes upstream before admission.
    // A member named twice cuts the upstream off mid-body (the provider never gets a whole
    // request) and the client gets a 400. A body that is not a JSON object (or breaks off
    // before its members) is admitted by its size and streams as well. A JSON object whose
    // members come late is held whole after all (at most MAX_BODY_BYTES) and handled like a
    // short one (End::Held). The client's socket is read with poll() and recv() here (the
    // event loop does not touch it meanwhile); answers are left in s.reply for the loop.
    void streamBody(http::request_parser<http::string_body>& parser, std::optional<std::uint64_t> length,
        const http::request<http::string_body>& head, Streamed& s)
    {
        const bool chunked = !length;
        // A chunked body's bytes as Beast's parser takes them out of their chunks.
        std::string decoded;
        std::size_t decodedAt = 0;
        std::function<std::size_t(std::uint64_t, std::string_view, beast::error_code&)> onChunk
            = [&](std::uint64_t, std::string_view bytes, beast::error_code&) {
                  decoded.append(bytes.data(), bytes.size());
                  return bytes.size();
              };
        if (chunked)
            parser.on_chunk_body(onChunk);
        const int fd = m_client.native_handle();
        // The body's bytes must keep coming: --body-timeout for a start, then a further second
        // for each MIN_BODY_RATE bytes received (a client that trickles a byte at a time
        // cannot hold its slot for the hour a long Content-Length would otherwise allow).
        const auto started = Steady::now();
        std::uint64_t received = 0;
        TopLevelFields fields;
        beast::error_code readError; // the client's side (as Reply::forFailedRead takes it)
        beast::error_code upstreamError;
        bool answered = false; // the client was told why (a refusal, a 502) and is let go
        bool byItsSize = false; // not a JSON object: admitted by its size (RequestEstimate::ofSize)
        StallMonitor::Watch& dog = s.dog;
        auto& link = s.link;
        auto& held = s.held;
        // An answer that ends the connection while the client may still be sending.
        auto answer = [&](Reply reply) {
            reply.keepAlive = false;
            reply.linger = true;
            s.reply = std::move(reply);
            answered = true;
        };

        // Waits until the client's socket has bytes and appends them to m_buffer; false (with
        // readError) when it is gone, or too slow for the rate a body must keep.
        auto receive = [&]() -> bool {
            const auto deadline = started + m_o.bodyTimeout
                + std::chrono::milliseconds(received * 1000 / ProxyServer::MIN_BODY_RATE);
            for (;;) {
                const auto left
                    = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Steady::now());
                if (left.count() <= 0 || !waitReadable(fd, left)) {
                    readError = beast::error::timeout;
                    return false;
                }
                auto space = m_buffer.prepare(RECEIVE_BYTES);
                ssize_t got = 0;
                do {
                    got = ::recv(fd, space.data(), space.size(), 0);
                } while (got < 0 && errno == EINTR);
                if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                    continue; // the event loop made the socket non-blocking: poll again
                if (got <= 0) {
                    readError = got == 0 ? beast::error_code(http::error::end_of_stream)
                                         : beast::error_code(errno, boost::system::system_category());
                    return false;
                }
                m_buffer.commit(static_cast<std::size_t>(got));
                received += static_cast<std::size_t>(got);
                if (link)
                    dog.touch();
                return true;
            }
        };
        auto pull = [&](char* into, std::size_t max) -> std::ptrdiff_t {
            if (!chunked) {
                if (m_buffer.size() == 0 && !receive())
                    return BodyStreamBuf::FAILED;
                const std::size_t n = net::buffer_copy(net::buffer(into, max), m_buffer.data());
                m_buffer.consume(n);
                return static_cast<std::ptrdiff_t>(n);
            }
            // Chunked: what the parser decoded, fed from m_buffer (which then keeps whatever
            // follows the body: a pipelined request).
            while (decodedAt == decoded.size()) {
                decoded.clear();
                decodedAt = 0;
                if (parser.is_done())
                    return BodyStreamBuf::END;
                if (m_buffer.size() > 0) {
                    beast::error_code ec;
                    const std::size_t used = parser.put(m_buffer.data(), ec);
                    m_buffer.consume(used);
                    if (ec == http::error::need_more)
                        ec = {};
                    if (ec) {
                        readError = ec;
                        return BodyStreamBuf::FAILED;
                    }
                    if (used > 0)
                        continue;
                }
                // Chunk lines and trailers the parser has not taken yet are bounded here, as
                // for a body read whole (readUntil).
                if (m_buffer.size() > ProxyServer::MAX_HEADER_BYTES) {
                    readError = http::error::bad_chunk;
                    return BodyStreamBuf::FAILED;
                }
                if (!receive())
                    return BodyStreamBuf::FAILED;
            }
            const std::size_t n = std::min(max, decoded.size() - decodedAt);
            std::memcpy(into, decoded.data() + decodedAt, n);
            decodedAt += n;
            return static_cast<std::ptrdiff_t>(n);
        };
        // Bytes of the body to the upstream: as they are, or for a chunked body as one chunk
        // (Beast frames it; an empty one would end the body, so none is sent).
        auto sendUp = [&](std::string_view bytes) {
            beast::error_code ec;
            if (bytes.empty())
                return ec;
            const net::const_buffer data(bytes.data(), bytes.size());
            if (chunked && link->tls)
                net::write(*link->tls, http::make_chunk(data), ec);
            else if (chunked)
                net::write(*link->plain, http::make_chunk(data), ec);
            else if (link->tls)
                net::write(*link->tls, data, ec);
            else
                net::write(*link->plain, data, ec);
            dog.touch();
            return ec;
        };
        auto piece = [&](std::string_view bytes) -> bool {
            if (!link) {
                held.append(bytes);
                if (held.size() > ProxyServer::MAX_BODY_BYTES) {
                    readError = http::error::body_limit;
                    return false;
                }
                if (!s.share.hold(held.size())) {
                    readError = held.size() > m_s.bodies.limit() ? net::error::message_size
                                                                 : net::error::no_buffer_space;
                    return false;
                }
                return true;
            }
            upstreamError = sendUp(bytes);
            return !upstreamError;
        };
        std::optional<BodyStreamBuf> body; // made below, once the steps it takes are
        // Admission, once the members it needs were parsed; then the head and what was held
        // go upstream (on a kept connection, or once more on a new one if that one was closed:
        // nothing was read from the client past what is held).
        auto admitAndSend = [&]() -> bool {
            std::string why;
            if (!s.store.lease().open(why)) {
                answer(Reply { 502, "the shared quota cannot be reached: " + why });
                return false;
            }
            m_lease = &s.store.lease();
            // (A chunked body is admitted by its members only once it is whole: held, as a
            // short one; one that is not a JSON object, by what arrived of it so far.)
            s.ask
                = m_s.exchange->askFor(byItsSize ? RequestEstimate::ofSize(length.value_or(body->received()))
                                                 : RequestEstimate::fromFields(fields, *length),
                    callerOf(head));
            QuotaExchange::Admission admission = m_s.exchange->firstTry(m_lease->store(), s.ask);
            if (admission.mustWait)
                admission = waitTurn(s.ask);
            if (!admission.permit) {
                answered = true;
                if (!admission.hungUp)
                    answer(Reply::refusal(*admission.refusal, false));
                return false;
            }
            s.store.permit() = std::move(admission.permit);
            m_caller = s.ask.caller;
            s.up = upstreamRequest(head);
            if (chunked)
                s.up.chunked(true);
            else
                s.up.content_length(*length);
            for (int attempt = 0; attempt < 2; ++attempt) {
                link = attempt == 0 ? m_s.pool.take() : nullptr;
                const bool reused = link != nullptr;
                if (!link) {
                    // Asynchronous, on the event loop; this thread waits for it (unless the
                    // loop stops meanwhile: the proxy is stopping, past its grace).
                    std::optional<Reply> failure;
                    auto connecting = net::co_spawn(
                        m_client.get_executor(), connectUpstream(dog, failure), net::use_future);
                    while (connecting.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
                        if (m_s.io.stopped()) {
                            answered = true;
                            return false;
                        }
                    }
                    link = connecting.get();
                    if (!link) {
                        answer(std::move(*failure));
                        return false;
                    }
                }
                dog.watch(fd, link->fd());
                dog.touch();
                http::request_serializer<http::string_body> serializer { s.up };
                beast::error_code ec;
                if (link->tls)
                    http::write_header(*link->tls, serializer, ec);
                else
                    http::write_header(*link->plain, serializer, ec);
                if (!ec)
                    ec = sendUp(held);
                if (!ec) {
                    held = std::string(); // sent: nothing more is held for this request
                    s.share.release();
                    return true;
                }
                dog.watch(-1, -1);
                link.reset();
                if (!reused || dog.fired()) {
                    answer(Reply { 502,
                        "the upstream " + m_up.hostHeader + " did not take the request: " + ec.message() });
                    return false;
                }
            }
            answered = true; // not reached: a new connection is not retried
            return false;
        };
        auto before = [&]() -> bool {
            if (link || chunked || !fields.known() || !fields.repeated().empty())
                return true;
            return admitAndSend();
        };

        body.emplace(length, pull, piece, before);
        bool parsed = true;
        {
            std::istream in(&*body);
            parsed = nlohmann::json::sax_parse(in, &fields);
        }
        // Not a JSON object (an upload, say), or one broken before its members: the rest of it
        // cannot tell more, so it is admitted by its size (as a short one is) and streams too;
        // the provider answers what it makes of it.
        if (!parsed && !link && !answered && !body->failed() && fields.repeated().empty()) {
            byItsSize = true;
            (void)admitAndSend();
        }
        auto giveBack = [&] {
            s.share.release();
            dog.watch(-1, -1);
            link.reset(); // mid-request: never kept
            if (auto& permit = s.store.permit())
                m_s.exchange->abandon(m_lease->store(), *permit);
        };
        if (!fields.repeated().empty()) {
            giveBack();
            answer(Reply { 400, repeatedMessage(fields.repeated()) });
            return;
        }
        if (answered) {
            giveBack(); // s.reply says why (none: the client hung up while queued)
            return;
        }
        if (!link) {
            // Never admitted: a JSON object whose members came late (or never). Held whole
            // after all, then as a short body.
            if (!body->failed())
                (void)body->finish();
            if (body->failed()) {
                s.share.release();
                s.reply = Reply::forFailedRead(
                    readError ? readError : beast::error_code(http::error::end_of_stream),
                    m_s.bodies.limit());
                return;
            }
            s.estimate = RequestEstimate::of(held);
            s.end = Streamed::End::Held;
            return;
        }
        // Forwarding: what the parser did not ask for (it stopped at a syntax error the
        // provider will answer, or at the whitespace after the value).
        if (!body->failed() && body->finish() && chunked) {
            if (link->tls)
                net::write(*link->tls, http::make_chunk_last(), upstreamError);
            else
                net::write(*link->plain, http::make_chunk_last(), upstreamError);
        }
        if (body->failed() || upstreamError) {
            // The client went away or stalled mid-body, or the upstream stopped taking it: the
            // upstream connection is dropped, so the provider never gets a whole request.
            giveBack();
            if (upstreamError)
                s.reply = Reply { 502,
                    "the upstream " + m_up.hostHeader
                        + " stopped taking the request: " + upstreamError.message() };
            else
                s.reply = Reply::forFailedRead(readError, m_s.bodies.limit());
            return;
        }
        s.end = Streamed::End::Forwarded;
    }

    // Whether a request the upstream may have received can be sent once more: an idempotent
    // method, or a request that carries an Idempotency-Key (the provider answers a repeat
    // with the first answer).
    static bool mayRepeat(const http::request<http::string_body>& up)
    {
        switch (up.method()) {
        case http::verb::get:
        case http::verb::head:
        case http::verb::options:
        case http::verb::put:
        case http::verb::delete_:
            return true;
        default:
            return up.find("Idempotency-Key") != up.end();
        }
    }

    // A new connection to the upstream (TLS verified, the host name checked); nullptr with
    // `failure` (a 502 to answer) when there is none.
    net::awaitable<std::unique_ptr<UpstreamLink>> connectUpstream(
        StallMonitor::Watch& dog, std::optional<Reply>& failure)
    {
        beast::error_code ec;
        tcp::resolver resolver(m_client.get_executor());
        const auto endpoints = co_await resolver.async_resolve(m_up.host, m_up.port, into(ec));
        if (ec) {
            failure = Reply { 502, "cannot resolve the upstream " + m_up.host + ": " + ec.message() };
            co_return nullptr;
        }
        auto socket = std::make_unique<tcp::socket>(m_client.get_executor());
        for (const auto& e : endpoints) {
            dog.watch(m_client.native_handle(), -1); // never a closed (and maybe reused) descriptor
            socket->close(ec);
            socket->open(e.endpoint().protocol(), ec);
            if (ec)
                continue;
            ::fcntl(socket->native_handle(), F_SETFD, FD_CLOEXEC);
            dog.watch(m_client.native_handle(), socket->native_handle());
            co_await socket->async_connect(e.endpoint(), into(ec));
            if (!ec) {
                beast::error_code ignored;
                socket->set_option(tcp::no_delay(true), ignored); // as for clients: no Nagle wait
                break;
            }
        }
        if (ec || !socket->is_open()) {
            dog.watch(m_client.native_handle(), -1);
            failure
                = Reply { 502, "cannot connect to the upstream " + m_up.hostHeader + ": " + ec.message() };
            co_return nullptr;
        }
        dog.touch();
        auto link = std::make_unique<UpstreamLink>();
        if (!m_up.tls) {
            link->plain = std::move(socket);
            co_return link;
        }
        link->tls = std::make_unique<ssl::stream<tcp::socket>>(std::move(*socket), m_s.tls);
        if (!SSL_set_tlsext_host_name(link->tls->native_handle(), m_up.host.c_str())) {
            dog.watch(m_client.native_handle(), -1);
            failure = Reply { 502, "cannot set up TLS to the upstream" };
            co_return nullptr;
        }
        link->tls->set_verify_callback(ssl::host_name_verification(m_up.host));
        co_await link->tls->async_handshake(ssl::stream_base::client, into(ec));
        dog.touch();
        if (ec) {
            dog.watch(m_client.native_handle(), -1);
            failure = Reply { 502, "TLS with the upstream " + m_up.hostHeader + " failed: " + ec.message() };
            co_return nullptr;
        }
        co_return link;
    }

    net::awaitable<Outcome> forward(http::request<http::string_body>& request, bool keepAlive)
    {
        StallMonitor::Watch dog(*m_s.stalls);
        dog.watch(m_client.native_handle(), -1);
        http::request<http::string_body> up = upstreamRequest(request);
        up.body() = std::move(request.body());
        up.prepare_payload();
        // A kept connection first; if the upstream had closed it meanwhile (nothing of an
        // answer came), once more on a new one.
        for (int attempt = 0; attempt < 2; ++attempt) {
            std::unique_ptr<UpstreamLink> link = attempt == 0 ? m_s.pool.take() : nullptr;
            // However this iteration ends (an exception included), the watch lets go of the
            // link's descriptor before the link can close it.
            struct Disarm
            {
                StallMonitor::Watch& dog;
                int client;
                ~Disarm() { dog.watch(client, -1); }
            } disarm { dog, m_client.native_handle() };
            const bool reused = link != nullptr;
            if (!link) {
                std::optional<Reply> failure;
                link = co_await connectUpstream(dog, failure);
                if (!link) {
                    co_await send(*failure);
                    co_return Outcome {};
                }
            }
            dog.watch(m_client.native_handle(), link->fd());
            dog.touch();
            Outcome done;
            if (link->tls)
                done = co_await exchange(*link->tls, up, keepAlive, dog, reused);
            else
                done = co_await exchange(*link->plain, up, keepAlive, dog, reused);
            dog.watch(m_client.native_handle(), -1); // disarmed before the link is kept or closed
            if (done.retryFresh)
                continue;
            if (done.reusable && !dog.fired())
                m_s.pool.give(std::move(link));
            co_return done;
        }
        co_await send(
            Reply { 502, "the upstream " + m_up.hostHeader + " closed the connection without an answer" });
        co_return Outcome {};
    }

    // Completes when the client has gone (closed, reset, or shut its sending side: as a queued
    // client's, such a request is taken as given up); never when it merely sent more bytes (a
    // pipelined request, read after this answer: then there is nothing more to watch). Ended by
    // cancellation when the answer comes first.
    net::awaitable<void> clientLeaves()
    {
        for (;;) {
            beast::error_code ec;
            co_await m_client.async_wait(net::socket_base::wait_read, into(ec));
            if (ec == net::error::operation_aborted)
                co_return; // cancelled: the answer came (this result is not looked at)
            char byte = 0;
            const ssize_t n = ec ? -1 : ::recv(m_client.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
            if (n < 0 && !ec && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                continue;
            if (n <= 0)
                co_return; // end of stream or an error: gone
            break;
        }
        // Bytes of a next request: the client is there. Wait for cancellation only.
        net::steady_timer never(m_client.get_executor(), Steady::time_point::max());
        beast::error_code ignored;
        co_await never.async_wait(into(ignored));
    }

    template <class Stream>
    // `sent`: the request (a streamed body) is on its way already; only the answer is read.
    net::awaitable<Outcome> exchange(Stream& upstream, http::request<http::string_body>& up, bool keepAlive,
        StallMonitor::Watch& dog, bool reused, bool sent = false)
    {
        Outcome out;
        beast::error_code ec;
        if (!sent)
            co_await http::async_write(upstream, up, into(ec));
        dog.touch();
        if (ec && reused && !dog.fired()) {
            out.retryFresh = true; // a kept connection the upstream had closed: nothing was sent
            co_return out;
        }
        if (ec) {
            co_await send(Reply {
                502, "the upstream " + m_up.hostHeader + " did not take the request: " + ec.message() });
            co_return out;
        }
        // Bounded: what the parser has not taken yet (headers, chunk lines) stays under 64 KiB.
        beast::flat_buffer buffer(ProxyServer::MAX_HEADER_BYTES);
        // Interim answers (1xx: 100 Continue, 103 Early Hints) are read and dropped: the
        // client gets the final answer, and the connection stays in step with its requests.
        std::optional<http::response_parser<http::buffer_body>> parser;
        // Until the answer begins only the upstream can stall (nothing is written to the
        // client): a stall then shuts the upstream alone, and the client is told (504).
        const int upstreamFd = beast::get_lowest_layer(upstream).native_handle();
        dog.watch(-1, upstreamFd);
        for (int interim = 0;; ++interim) {
            parser.emplace();
            parser->header_limit(ProxyServer::MAX_HEADER_BYTES);
            parser->body_limit(boost::none); // answers stream through: their size is the client's business
            parser->skip(up.method() == http::verb::head); // the answer to a HEAD has no body
            bool gone = false;
            {
                using namespace net::experimental::awaitable_operators;
                // A long answer that is not streamed sends nothing until it is whole: a
                // client that gives up meanwhile (an SDK's timeout, before its retry) ends the
                // exchange now, the upstream closed (the provider stops) and the slot given
                // back, not when the provider is done or the stall timeout passes.
                auto r = co_await (
                    http::async_read_header(upstream, buffer, *parser, into(ec)) || clientLeaves());
                gone = r.index() == 1;
            }
            if (gone) {
                out.clientLeft = true;
                co_return out;
            }
            dog.touch();
            const unsigned status = ec ? 0 : parser->get().result_int();
            if (status < 100 || status >= 200 || status == 101 || interim == 16)
                break; // a final answer, an error — or a 101, or an endless run of 1xx: as it is
        }
        if (ec && reused && !parser->got_some() && buffer.size() == 0 && !dog.fired() && mayRepeat(up)) {
            // A kept connection closed by the upstream as the request arrived (its idle
            // timeout), no byte of an answer: sent again only when repeating it is harmless.
            // A POST may have been taken and worked on before the connection broke (the
            // provider would bill it twice, under one admission): the client gets a 502 and
            // its SDK retries through admission.
            out.retryFresh = true;
            co_return out;
        }
        if (ec && dog.fired()) {
            co_await send(Reply { 504,
                "the upstream " + m_up.hostHeader + " sent no answer in "
                    + std::to_string(m_o.stallTimeout.count()) + " ms (--stall-timeout)" });
            co_return out;
        }
        if (ec) {
            co_await send(
                Reply { 502, "the upstream " + m_up.hostHeader + " sent no answer: " + ec.message() });
            co_return out;
        }
        dog.watch(m_client.native_handle(), upstreamFd);
        if (const unsigned status = parser->get().result_int(); status < 200) {
            // A 101 would make the connection another protocol; 1xx without end, an upstream
            // that never answers. Neither is relayed as if it were the answer. (The message is
            // made before the co_await: GCC 12 destroys the temporaries of a ?: in its
            // full-expression twice.)
            std::string what = "the upstream " + m_up.hostHeader;
            if (status == 101)
                what += " switched protocols (101), which this proxy does not relay";
            else
                what += " sent interim (1xx) answers and no final one";
            co_await send(Reply { 502, std::move(what) });
            co_return out;
        }
        auto& response = parser->get();
        out.answered = true;
        out.status = response.result_int();
        for (const auto& field : response)
            out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
        // What the headers say is acted on before the body streams: a hold must be in place
        // before this exchange's slot is given back, or the next admission would not see it.
        co_await learnFromHeaders(out);
        // The connection may serve another request only after a final answer (a 1xx is
        // followed by another) that the upstream framed and lets go on.
        const bool upstreamGoesOn = out.status >= 200 && parser->keep_alive();
        const bool success = out.status >= 200 && out.status < 300;
        UsageMeter meter(response[http::field::content_type]);
        for (const char* name : { "connection", "keep-alive", "proxy-connection" })
            response.erase(name);
        // An answer that ends when its connection does (no length, not chunked) is re-framed
        // as chunked, so the client's connection can go on — unless the client speaks
        // HTTP/1.0, which has no chunked coding (RFC 9112 §6.1): then an answer without a
        // length goes as it came, and ends with the connection.
        const bool bodyless
            = out.status < 200 || out.status == 204 || out.status == 304 || up.method() == http::verb::head;
        if (m_clientVersion < 11 && !bodyless && !response.has_content_length()) {
            response.chunked(false);
            out.closeAfter = true;
        } else if (!bodyless && !response.chunked() && !response.has_content_length()) {
            response.chunked(true);
        }
        response.keep_alive(keepAlive && !out.closeAfter);

        char chunk[16384];
        http::serializer<false, http::buffer_body> serializer { response };
        if (bodyless) {
            // Headers only: the answer to a HEAD, a 204 or a 304 has no body whatever its
            // headers say — a chunked one must not get the chunked end marker, which the client
            // would read as the start of its next answer.
            co_await http::async_write_header(m_client, serializer, into(ec));
            dog.touch();
            if (ec)
                co_return out;
            out.clientOk = true;
            out.reusable = upstreamGoesOn && parser->is_done() && buffer.size() == 0;
            co_return out;
        }
        if (!parser->is_done() && buffer.size() == 0) {
            // Only the headers are here: they go now (a status the client may act on, a stream
            // that starts with a pause); an answer whose body came with them leaves in one write.
            co_await http::async_write_header(m_client, serializer, into(ec));
            dog.touch();
            if (ec)
                co_return out;
        }
        do {
            if (!parser->is_done()) {
                response.body().data = chunk;
                response.body().size = sizeof chunk;
                co_await pump(upstream, buffer, *parser, ec);
                dog.touch();
                if (ec) {
                    // The upstream broke off mid-answer: the client must not take the part for
                    // the whole, so its connection is closed without a proper end — reset when
                    // the answer is delimited by the close (HTTP/1.0), where a plain close
                    // would be that end.
                    if (out.closeAfter) {
                        beast::error_code ignored;
                        m_client.set_option(net::socket_base::linger(true, 0), ignored);
                    }
                    co_return out;
                }
                takeBuffered(buffer, *parser);
                const std::size_t got = sizeof chunk - response.body().size;
                if (got == 0 && !parser->is_done())
                    continue; // only framing was read (a chunk header): an empty chunk would end the answer
                response.body().size = got;
                // No bytes: no buffer. An empty buffer would go out as a chunk of size 0 —
                // the chunked end marker — followed by the real end marker: bytes the client
                // would read as the start of its next answer on a kept-alive connection.
                response.body().data = got > 0 ? chunk : nullptr;
                response.body().more = !parser->is_done();
                const std::string_view piece(chunk, got);
                if (success)
                    meter.feed(piece);
                else if (out.errorBody.size() < 65536)
                    out.errorBody.append(piece.substr(0, 65536 - out.errorBody.size()));
            } else {
                response.body().data = nullptr;
                response.body().size = 0;
                response.body().more = false;
            }
            co_await http::async_write(m_client, serializer, into(ec));
            if (ec == http::error::need_buffer)
                ec = {};
            dog.touch();
            if (ec) {
                // The client hung up (how SDKs cancel a generation): the upstream is closed
                // too, so the provider stops generating; the estimate stands.
                co_return out;
            }
        } while (!parser->is_done() || !serializer.is_done());
        if (success)
            out.usage = meter.finish();
        out.clientOk = true;
        out.reusable = upstreamGoesOn && parser->is_done() && buffer.size() == 0;
        co_return out;
    }

    // Bytes already read that belong to this answer go into the same write, without another
    // read of the socket: an answer whose last event and end came in one read leaves in one
    // write (one packet, one wake-up of the client) rather than a write for the data and one
    // for the chunked end. Stops where the parser needs more bytes or the body buffer is
    // full; an error is left for the next pump to find and report.
    template <class Parser> static void takeBuffered(beast::flat_buffer& buffer, Parser& parser)
    {
        while (!parser.is_done() && buffer.size() > 0 && parser.get().body().size > 0) {
            beast::error_code ec;
            const std::size_t used = parser.put(buffer.data(), ec);
            buffer.consume(used);
            if (ec || used == 0)
                return;
        }
    }

    // Parses what is buffered and reads from the upstream only when the parser can make no
    // progress without more bytes: body bytes the parser put out are passed on before the
    // socket is read again, so a stream that pauses (a model thinking, a client that must see
    // a token first) never holds back what already came. Beast's http::read_some reads again
    // on need_more even after progress; that is safe only while the parser is not eager,
    // which this does not depend on.
    template <class Stream, class Parser>
    static net::awaitable<void> pump(
        Stream& upstream, beast::flat_buffer& buffer, Parser& parser, beast::error_code& ec)
    {
        for (;;) {
            if (buffer.size() > 0) {
                const std::size_t before = parser.get().body().size;
                const std::size_t used = parser.put(buffer.data(), ec);
                buffer.consume(used);
                const bool produced = parser.get().body().size != before;
                if (ec == http::error::need_buffer) {
                    ec = {}; // the body buffer is full: hand it over
                    co_return;
                }
                if (ec && ec != http::error::need_more)
                    co_return;
                if (!ec && (used > 0 || parser.is_done()))
                    co_return;
                if (ec == http::error::need_more && produced) {
                    ec = {};
                    co_return;
                }
                ec = {};
            }
            const std::size_t room = beast::read_size(buffer, 16384);
            if (room == 0) {
                ec = http::error::buffer_overflow; // a chunk line past the header limit
                co_return;
            }
            const std::size_t n = co_await upstream.async_read_some(buffer.prepare(room), into(ec));
            buffer.commit(n);
            if (ec == net::error::eof || ec == ssl::error::stream_truncated) {
                ec = {};
                parser.put_eof(ec); // an answer that ends with its connection; else partial
                co_return;
            }
            if (ec)
                co_return;
        }
    }

    // What the answer's headers say (QuotaExchange::readHeaders); the store is asked only when
    // they say something new (a hold, limits the store has not been told of).
    net::awaitable<void> learnFromHeaders(Outcome& out)
    {
        const QuotaExchange::HeaderLesson lesson = m_s.exchange->readHeaders(out.headers);
        out.retryAfterMs = lesson.retryAfterMs;
        if (!lesson.needsStore())
            co_return; // most answers: nothing for the store
        auto work = [&] { m_s.exchange->learnFromHeaders(m_lease->store(), lesson, m_caller); };
        co_await offload(m_s.storeExecutor(), work);
    }

    Client m_client;
    Server& m_s;
    std::shared_ptr<Server> m_keep; // the threads this session starts may outlive serve()
    const ProxyServer::Options& m_o;
    const Upstream& m_up;
    std::string m_peer; // the process at the other end, looked up once
    bool m_peerLooked = false;
    std::string m_caller; // of the request being forwarded
    unsigned m_clientVersion = 11; // of the request being served: 10 for HTTP/1.0
    beast::flat_buffer m_buffer;
    LimiterLease* m_lease = nullptr; // the current request's, while it runs
};

template <class Client> net::awaitable<void> serveConnection(Client client, std::shared_ptr<Server> server)
{
    Session<Client> session(std::move(client), std::move(server));
    try {
        co_await session.run();
    } catch (const std::exception&) {
        // Nothing in a session may take the whole proxy down (a bad_alloc, a library that
        // throws): this connection ends, the others go on.
    }
    session.close();
}

// Starts serving one accepted connection, unless MAX_CONNECTIONS are served already (then a
// 503 and a close).
template <class Client> void begin(Client socket, const std::shared_ptr<Server>& server)
{
    ::fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);
    if (server->active.load() >= ProxyServer::MAX_CONNECTIONS) {
        static const char BUSY[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                   "Connection: close\r\nRetry-After: 1\r\n\r\n";
        // A new socket's buffer takes these bytes at once: the write does not block.
        boost::system::error_code ignored;
        net::write(socket, net::buffer(BUSY, sizeof BUSY - 1), ignored);
        return;
    }
    ++server->active;
    net::co_spawn(server->io, serveConnection(std::move(socket), server),
        [server](const std::exception_ptr&) { --server->active; });
}

// Holds the server weakly: its frame may still be in the loop when the server is destroyed.
net::awaitable<void> acceptLoop(Server& s, std::weak_ptr<Server> weak)
{
    Server* server = &s;
    for (;;) {
        beast::error_code ec;
        if (server->tcpAcceptor) {
            tcp::socket socket = co_await server->tcpAcceptor->async_accept(into(ec));
            if (!ec) {
                // An answer goes out in pieces (headers and body, then the chunked end): with
                // Nagle's algorithm the last small piece waits for the client's delayed ACK
                // (~40 ms on Linux) before it is sent.
                beast::error_code ignored;
                socket.set_option(tcp::no_delay(true), ignored);
                if (auto strong = weak.lock())
                    begin(std::move(socket), strong);
            }
        } else {
            local::socket socket = co_await server->unixAcceptor->async_accept(into(ec));
            if (!ec) {
                if (auto strong = weak.lock())
                    begin(std::move(socket), strong);
            }
        }
        if (ec == net::error::operation_aborted || ec == net::error::bad_descriptor)
            co_return; // serving stops
        if (ec) {
            // Out of descriptors (EMFILE) or memory: the connection stays in the backlog and
            // the listener is ready again at once; wait a little instead of spinning.
            net::steady_timer pause(server->io, std::chrono::milliseconds(100));
            co_await pause.async_wait(into(ec));
        }
    }
}

// Gives back the slots the proxy owes (OwedSlots), on a store thread with a store connection
// of its own: taken back, gone already, or of a provider no longer known is done; a store
// failure keeps it owed, and the rest untried (each try could wait a store's whole timeout).
void giveBackOwed(Server& s)
{
    if (!s.exchange->owesSlots())
        return;
    LimiterLease lease(s.limiters);
    std::string why;
    s.exchange->giveBackOwed(lease.open(why) ? &lease.store() : nullptr);
}

// Tries the slots owed every OWED_RETRY while the proxy serves (the last try is watchStop's).
net::awaitable<void> returnOwedSlots(Server& s)
{
    Server* server = &s;
    net::steady_timer timer(server->io);
    beast::error_code ec;
    for (;;) {
        timer.expires_after(OwedSlots::OWED_RETRY);
        co_await timer.async_wait(into(ec));
        if (!server->exchange->owesSlots())
            continue;
        auto work = [server] { giveBackOwed(*server); };
        co_await offload(server->storeExecutor(), work);
    }
}

// Looks at `stop` every STOP_POLL; once it is set, stops accepting, ends idle connections and
// lets the requests in flight finish for at most STOP_GRACE, then stops the loop.
net::awaitable<void> watchStop(Server& s, const std::atomic<bool>& stop,
    std::optional<net::executor_work_guard<net::io_context::executor_type>>& work)
{
    Server* server = &s;
    static constexpr std::chrono::milliseconds STOP_POLL { 200 };
    static constexpr std::chrono::seconds STOP_GRACE { 30 };
    net::steady_timer timer(server->io);
    beast::error_code ec;
    while (!stop.load()) {
        timer.expires_after(STOP_POLL);
        co_await timer.async_wait(into(ec));
    }
    if (server->tcpAcceptor)
        server->tcpAcceptor->close(ec);
    if (server->unixAcceptor)
        server->unixAcceptor->close(ec);
    // Idle connections end now (their waits race this timer); requests in flight may finish.
    server->stopping.expires_at(Steady::time_point::min());
    const auto until = Steady::now() + STOP_GRACE;
    while (server->active.load() > 0 && Steady::now() < until) {
        timer.expires_after(std::chrono::milliseconds(50));
        co_await timer.async_wait(into(ec));
    }
    work.reset();
    server->io.stop();
}

} // namespace

ProxyServer::ProxyServer(std::shared_ptr<Impl> impl)
    : m_impl(std::move(impl))
{
}

ProxyServer::~ProxyServer()
{
    struct stat st
    {
    };
    if (m_impl && m_impl->listenAt.isUnix && ::lstat(m_impl->listenAt.path.c_str(), &st) == 0
        && S_ISSOCK(st.st_mode) && st.st_dev == m_impl->listenAt.boundDev
        && st.st_ino == m_impl->listenAt.boundIno)
        ::unlink(m_impl->listenAt.path.c_str());
    // A connection still being served (past the grace of serve(), or never served) keeps the
    // server alive from its coroutine frame, which only the event loop can end: what is left
    // of it is left to the process's exit rather than destroyed under a thread still in it.
}
Result<std::unique_ptr<ProxyServer>> ProxyServer::start(const Options& options)
{
    auto impl = std::make_shared<Impl>();
    impl->options = options;
    impl->limiters.setHome(options.home);
    impl->exchange = std::make_unique<QuotaExchange>(options.provider, options.queueTimeout, impl->clock);
    impl->bodies.setLimit(options.maxBufferedBytes);
    impl->stalls
        = std::make_unique<StallMonitor>(std::max(std::chrono::milliseconds(1), options.stallTimeout));
    if (options.provider.empty())
        return Error::make(ErrorKind::Usage, {}, "proxy needs the PROVIDER whose quota its requests use");
    auto up = Upstream::parse(options.upstream);
    if (!up)
        return up.error();
    impl->upstream = *up;
    if (!options.tokenFile.empty()) {
        auto token = readToken(options.tokenFile);
        if (!token)
            return token.error();
        impl->token = std::move(token).value();
    }
    auto at = ListenAt::parse(options.listen, !impl->token.empty());
    if (!at)
        return at.error();
    impl->listenAt = *at;
    boost::system::error_code ec;
    // Certificates are always verified, against the system's CA store; no option turns it off.
    impl->tls.set_default_verify_paths(ec);
    if (ec)
        return Error::make(ErrorKind::Io, {}, "cannot load the system's CA certificates: " + ec.message());
    impl->tls.set_verify_mode(ssl::verify_peer);
    if (!options.upstreamCa.empty()) {
        // Usage errors are printed by their message alone: it names the file itself.
        const std::string ca = "--upstream-ca " + TextSanitizer::clean(options.upstreamCa, 1024);
        if (!up->tls)
            return Error::make(ErrorKind::Usage, {},
                ca + ": only for an https:// upstream; " + TextSanitizer::clean(options.upstream, 1024)
                    + " is plain http");
        // Read as any file a user names: not a FIFO that blocks, not a directory, bounded;
        // a link is followed (CA files are links more often than not).
        auto fd = Fd::openRegularFollowing(options.upstreamCa);
        if (!fd)
            return Error::make(ErrorKind::Usage, {}, ca + ": cannot read it: " + fd.error().message);
        auto pem = fd->readAll(4 << 20);
        if (!pem)
            return Error::make(ErrorKind::Usage, {}, ca + ": cannot read it: " + pem.error().message);
        if (pem->find("-----BEGIN CERTIFICATE-----") == std::string::npos)
            return Error::make(
                ErrorKind::Usage, {}, ca + ": holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
        impl->tls.add_certificate_authority(net::buffer(*pem), ec);
        if (ec)
            return Error::make(ErrorKind::Usage, {}, ca + ": not a usable CA certificate: " + ec.message());
    }
    if (at->isUnix) {
        struct stat st
        {
        };
        if (::lstat(at->path.c_str(), &st) == 0) {
            if (!S_ISSOCK(st.st_mode))
                return Error::make(ErrorKind::Usage, at->path, "exists and is not a socket: not replaced");
            // A socket nobody listens on any more (a proxy that died): replaced.
            local::socket probe(impl->io);
            probe.connect(local::endpoint(at->path), ec);
            if (!ec)
                return Error::make(ErrorKind::Busy, at->path, "another process listens on this socket");
            ::unlink(at->path.c_str());
        }
        impl->unixAcceptor = std::make_unique<local::acceptor>(impl->io);
        local::endpoint ep(at->path);
        impl->unixAcceptor->open(ep.protocol(), ec);
        const mode_t old = ::umask(0177); // the socket is 0600: only its owner may spend the quota
        if (!ec)
            impl->unixAcceptor->bind(ep, ec);
        ::umask(old);
        if (!ec)
            impl->unixAcceptor->listen(net::socket_base::max_listen_connections, ec);
        if (ec)
            return Error::make(ErrorKind::Io, at->path, "cannot listen: " + ec.message());
        if (::lstat(at->path.c_str(), &st) == 0) {
            impl->listenAt.boundDev = st.st_dev;
            impl->listenAt.boundIno = st.st_ino;
        }
    } else {
        tcp::endpoint ep(net::ip::make_address(at->host), at->port);
        impl->tcpAcceptor = std::make_unique<tcp::acceptor>(impl->io);
        impl->tcpAcceptor->open(ep.protocol(), ec);
        if (!ec)
            impl->tcpAcceptor->set_option(net::socket_base::reuse_address(true), ec);
        if (!ec)
            impl->tcpAcceptor->bind(ep, ec);
        if (!ec)
            impl->tcpAcceptor->listen(net::socket_base::max_listen_connections, ec);
        if (ec)
            return Error::make(ErrorKind::Io, {}, "cannot listen on " + options.listen + ": " + ec.message());
    }
    ::fcntl(impl->listenFd(), F_SETFD, FD_CLOEXEC);
    return std::unique_ptr<ProxyServer>(new ProxyServer(std::move(impl)));
}

std::string ProxyServer::address() const
{
    if (m_impl->listenAt.isUnix)
        return "unix:" + m_impl->listenAt.path;
    const auto ep = m_impl->tcpAcceptor->local_endpoint();
    const std::string host
        = ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string();
    return "http://" + host + ":" + std::to_string(ep.port());
}

void ProxyServer::serve(const std::atomic<bool>& stop)
{
    Server& d = *m_impl;
    std::optional<net::executor_work_guard<net::io_context::executor_type>> work(d.io.get_executor());
    net::co_spawn(d.io, acceptLoop(d, m_impl), net::detached);
    net::co_spawn(d.io, watchStop(d, stop, work), net::detached);
    net::co_spawn(d.io, returnOwedSlots(d), net::detached);
    d.io.run();
    // What the store threads still have (slots being given back as the last requests ended)
    // is done before the last try below: each job is bounded by its store's timeout.
    d.storeThreads.join();
    // Exiting would give back the slots owed to readers that judge the proxy by its pid, but
    // not to those that go by their lease (another pid namespace, another host): one last try.
    giveBackOwed(d);
}

} // namespace tollgate::proxy
