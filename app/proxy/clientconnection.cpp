#include "proxy/clientconnection.h"

#include "backend/quotalimiter.h"
#include "base/textsanitizer.h"
#include "provider/requestestimate.h"
#include "proxy/bodyshare.h"
#include "proxy/bodystreaming.h"
#include "proxy/offload.h"
#include "proxy/peerprocess.h"
#include "proxy/requestrules.h"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <cerrno>
#include <openssl/crypto.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <thread>
#include <unistd.h>

namespace tollgate::proxy {

template <class Client>
ClientConnection<Client>::ClientConnection(
    Client client, std::shared_ptr<Server> server, std::unique_ptr<ConnectionPlaces::Place> place)
    : m_client(std::move(client))
    , m_server(*server)
    , m_keep(std::move(server))
    , m_options(m_server.options)
    , m_place(std::move(place))
{
}

template <class Client> void ClientConnection<Client>::close()
{
    beast::error_code ec;
    m_client.shutdown(net::socket_base::shutdown_both, ec);
    m_client.close(ec);
}

template <class Client> net::awaitable<void> ClientConnection<Client>::run()
{
    for (;;) {
        Parser parser;
        parser.header_limit(ProxyServer::MAX_HEADER_BYTES);
        // A Content-Length is judged against this with the headers; a body read whole
        // (serveWhole) against MAX_BODY_BYTES.
        parser.body_limit(ProxyServer::MAX_STREAMED_BODY_BYTES);
        if (!co_await readHead(parser))
            co_return;
        if (const auto length = parser.content_length();
            parser.chunked() || (length && *length > ProxyServer::STREAM_BODY_AFTER)) {
            std::optional<std::uint64_t> announced;
            if (length)
                announced = *length;
            if (!co_await BodyStreaming<Client>::serve(*this, parser, announced))
                co_return;
            continue;
        }
        if (!co_await serveWhole(parser))
            co_return;
    }
}

// The next request's headers, checked. The first byte of the next request may be a while in
// coming (an idle keep-alive connection: at most CLIENT_IDLE, and not once serving stops);
// once it came, the headers have --header-timeout. false: the connection ends (answered
// when the client can still hear why).
template <class Client> net::awaitable<bool> ClientConnection<Client>::readHead(Parser& parser)
{
    beast::error_code ec;
    if (m_buffer.size() == 0) {
        // Idle meanwhile: a new connection past the cap may take this one's place.
        ConnectionPlaces::Place::Idle idle(*m_place);
        if (!co_await receive(Steady::now() + ProxyServer::CLIENT_IDLE, true, ec))
            co_return false;
    }
    if (!co_await readUntil(parser, true, Steady::now() + m_options.headerTimeout, ec)) {
        co_await finishWith(ec);
        co_return false;
    }
    RequestRules::dropFragment(parser.get());
    if (!m_server.token.empty() && !tokenGiven(parser.get())) {
        co_await send(Reply { 401,
            "this proxy needs its token: put it in the base URL (http://HOST:PORT/t/TOKEN) or in an "
            "X-Tollgate-Token header",
            false, std::nullopt, true });
        co_return false;
    }
    m_clientVersion = parser.get().version();
    if (const auto why = RequestRules::unforwardable(parser.get())) {
        co_await send(Reply { why->first, why->second, false, std::nullopt, true });
        co_return false;
    }
    co_return true;
}

template <class Client> net::awaitable<void> ClientConnection<Client>::refuse()
{
    // A client with a request sends it at once; one that sends nothing is not waited for long.
    static constexpr std::chrono::seconds REFUSAL_READ { 2 };
    const auto deadline = Steady::now()
        + std::min<Steady::duration>(REFUSAL_READ, std::chrono::milliseconds(m_options.headerTimeout));
    Parser parser;
    parser.header_limit(ProxyServer::MAX_HEADER_BYTES);
    beast::error_code ec;
    if (!co_await readUntil(parser, true, deadline, ec) && ec != beast::error::timeout) {
        co_await finishWith(ec); // closed (nothing to say), or not HTTP (400, 431)
        co_return;
    }
    co_await send(Reply { 503,
        "all " + std::to_string(ProxyServer::MAX_CONNECTIONS)
            + " connections this proxy serves are busy with requests; try again shortly",
        false, 1, true });
}

// A request whose body (at most STREAM_BODY_AFTER, with a Content-Length, or none) is read
// whole within --body-timeout, its share of the BodyBudget held until it is answered.
template <class Client> net::awaitable<bool> ClientConnection<Client>::serveWhole(Parser& parser)
{
    BodyShare body(m_server.bodies); // until this request is answered
    if (const auto length = parser.content_length(); length && !body.hold(*length)) {
        beast::error_code refused = net::error::no_buffer_space;
        if (*length > m_server.bodies.limit())
            refused = net::error::message_size;
        co_await finishWith(refused);
        co_return false;
    }
    co_await continueIfAsked(parser.get());
    beast::error_code ec;
    if (!co_await readUntil(parser, false, Steady::now() + m_options.bodyTimeout, ec)) {
        body.release();
        co_await finishWith(ec);
        co_return false;
    }
    http::request<http::string_body> request = parser.release();
    co_return co_await handle(request);
}

template <class Client>
net::awaitable<bool> ClientConnection<Client>::handle(
    http::request<http::string_body>& request, const RequestEstimate* known)
{
    const bool keepAlive = request.keep_alive();
    // The store connection this request uses, from first to last (its permit refers to it).
    RequestStore store(m_server.limiters, *m_server.exchange, m_server.storeExecutor());
    LeaseScope scope(*this, store.lease());
    RequestEstimate estimate;
    if (known)
        estimate = *known;
    else
        estimate = RequestEstimate::of(request.body());
    if (!estimate.repeated.empty()) {
        co_await send(Reply { 400, repeatedMessage(estimate.repeated), keepAlive });
        co_return keepAlive;
    }
    AdmitRequest ask;
    if (const std::optional<bool> refused = co_await admit(request, estimate, store, ask))
        co_return *refused;
    m_caller = ask.caller;
    m_model = ask.model;
    const ExchangeOutcome outcome = co_await m_upstream.forward(request, keepAlive);
    co_await settle(*store.permit(), outcome, ask.caller, estimate.inputTokens);
    co_return keepAlive&& outcome.clientOk && !outcome.closeAfter;
}

// Admission through the shared quota: a first try on a store thread, then (when it must wait)
// the queue on a thread of its own. nullopt: admitted (the permit is in `store`); else what
// handle() returns (the client was answered, or hung up while queued).
template <class Client>
net::awaitable<std::optional<bool>> ClientConnection<Client>::admit(http::request<http::string_body>& request,
    const RequestEstimate& estimate, RequestStore& store, AdmitRequest& ask)
{
    const bool keepAlive = request.keep_alive();
    if (wantsPeer(request)) {
        auto look = [this] { lookUpPeer(); };
        co_await offload(m_server.storeSideBySide, look);
    }
    LimiterLease& lease = store.lease();
    QuotaExchange::Admission admission;
    std::string why;
    bool opened = false;
    auto first = [&] {
        opened = lease.open(why);
        if (!opened)
            return;
        ask = m_server.exchange->askFor(estimate, callerOf(request));
        admission = m_server.exchange->firstTry(lease.store(), ask);
    };
    co_await offload(m_server.storeExecutor(), first);
    if (!opened) {
        co_await send(Reply { 502, "the shared quota cannot be reached: " + why });
        co_return std::optional<bool>(false);
    }
    if (admission.mustWait) {
        auto wait = [&] { admission = waitTurn(ask); };
        co_await offload({}, wait);
    }
    if (!admission.permit) {
        if (admission.hungUp)
            co_return std::optional<bool>(false); // nobody to answer; the wait left the queue
        co_await send(Reply::refusal(*admission.refusal, keepAlive));
        co_return std::optional<bool>(keepAlive);
    }
    store.permit() = std::move(admission.permit);
    m_fence = store.permit()->fence();
    co_return std::nullopt;
}

// Appends what the client sent to m_buffer, waiting until `deadline` at most (and, when
// `stoppable`, not once serving stops); false with `ec` (timeout, closed, an error).
template <class Client>
net::awaitable<bool> ClientConnection<Client>::receive(
    Steady::time_point deadline, bool stoppable, beast::error_code& ec)
{
    using namespace net::experimental::awaitable_operators;
    beast::error_code readError, timerError, stopError;
    net::steady_timer timer(m_client.get_executor(), deadline);
    std::size_t got = 0;
    bool inTime = false;
    auto space = m_buffer.prepare(RECEIVE_BYTES);
    if (stoppable) {
        // (Only a connection with a place waits for a next request: its place may be taken.)
        beast::error_code evictError;
        auto r = co_await (m_client.async_read_some(space, into(readError))
            || timer.async_wait(into(timerError)) || m_server.stopping.async_wait(into(stopError))
            || m_place->evicted().async_wait(into(evictError)));
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
template <class Client>
net::awaitable<bool> ClientConnection<Client>::readUntil(
    Parser& parser, bool headerOnly, Steady::time_point deadline, beast::error_code& ec)
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
template <class Client>
net::awaitable<void> ClientConnection<Client>::continueIfAsked(
    const http::request<http::string_body>& request)
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
template <class Client>
bool ClientConnection<Client>::tokenGiven(http::request<http::string_body>& request) const
{
    const std::string& token = m_server.token;
    auto same = [&token](std::string_view given) {
        return given.size() == token.size() && CRYPTO_memcmp(given.data(), token.data(), token.size()) == 0;
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

template <class Client> net::awaitable<void> ClientConnection<Client>::finishWith(const beast::error_code& ec)
{
    if (auto reply = Reply::forFailedRead(ec, m_server.bodies.limit()))
        co_await send(*reply);
}

template <class Client> net::awaitable<void> ClientConnection<Client>::send(const Reply& reply)
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
template <class Client> net::awaitable<void> ClientConnection<Client>::lingerClose()
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
template <class Client>
std::optional<std::string> ClientConnection<Client>::namedCaller(
    const http::request<http::string_body>& request)
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
template <class Client>
bool ClientConnection<Client>::wantsPeer(const http::request<http::string_body>& request) const
{
    return !m_peerLooked && !m_options.callerGiven && !namedCaller(request);
}

template <class Client> void ClientConnection<Client>::lookUpPeer()
{
    if (m_peerLooked)
        return;
    m_peerLooked = true;
    if constexpr (std::is_same_v<Client, tcp::socket>)
        m_peer = PeerProcess::ofLoopbackTcp(m_client.native_handle());
    else
        m_peer = PeerProcess::ofUnixSocket(m_client.native_handle());
}

template <class Client>
std::string ClientConnection<Client>::callerOf(const http::request<http::string_body>& request)
{
    if (auto named = namedCaller(request))
        return *named;
    if (m_options.callerGiven)
        return m_options.defaultCaller;
    lookUpPeer(); // done already when this runs on a store thread (see wantsPeer)
    return m_peer.empty() ? m_options.defaultCaller : QuotaLimiter::sanitizeCaller(m_peer);
}

// Waits in the quota's FIFO queue, on a thread of its own; a client that hangs up
// meanwhile cancels the wait (a second thread sleeps in poll() until it does, or until
// the admission is decided and `decided` wakes it: no admission waits for a polling
// interval).
template <class Client>
QuotaExchange::Admission ClientConnection<Client>::waitTurn(const AdmitRequest& request)
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
            return m_server.exchange->conclude(
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
        permit.emplace(m_server.exchange->waitInQueue(m_lease->store(), request, cancel));
    }
    return m_server.exchange->conclude(m_lease->store(), std::move(*permit), cancel.load());
}

// The slot was held for the whole upstream exchange, no longer. With it go, in the same
// store operation, the answer's real usage (it replaces the estimate in the window) and,
// for a success, the reset of the 429 count; then what the answer says is learnt.
template <class Client>
net::awaitable<void> ClientConnection<Client>::settle(
    Permit& permit, const ExchangeOutcome& outcome, const std::string& caller, std::int64_t promptTokens)
{
    QuotaExchange::Answer answer;
    answer.answered = outcome.answered;
    answer.status = outcome.status;
    answer.retryAfterMs = outcome.retryAfterMs;
    answer.planRejected = outcome.planRejected;
    answer.brokenOff = outcome.brokenOff;
    answer.errorBody = outcome.errorBody;
    answer.usage = outcome.usage;
    auto work = [&] { m_server.exchange->settle(m_lease->store(), permit, answer, caller, promptTokens); };
    co_await offload(m_server.storeExecutor(), work);
}

template <class Client> std::string ClientConnection<Client>::repeatedMessage(const std::string& member)
{
    return "the request body names '" + TextSanitizer::clean(member, 64)
        + "' twice (or both output bounds after the first); which one the provider would take is not "
          "known, so it is not forwarded";
}

template class ClientConnection<tcp::socket>;
template class ClientConnection<local::socket>;

} // namespace tollgate::proxy
