#include "proxy/bodystreaming.h"

#include "proxy/clientconnection.h"
#include "proxy/offload.h"
#include "proxy/server.h"

#include <cerrno>
#include <cstring>
#include <future>
#include <istream>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>

namespace tollgate::proxy {

namespace {

// true: `fd` has something to read (or hung up); false: the timeout passed. For the body's
// thread, which blocks; the event loop never calls it.
bool waitReadable(int fd, std::chrono::milliseconds timeout)
{
    pollfd p { fd, POLLIN, 0 };
    return ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, timeout.count()))) > 0;
}

} // namespace

template <class Client>
BodyStreaming<Client>::Streamed::Streamed(Server& server)
    : share(server.bodies)
    , store(server.limiters, *server.exchange, server.storeExecutor())
    , stall(*server.stalls)
{
}

template <class Client>
BodyStreaming<Client>::BodyStreaming(ClientConnection<Client>& connection, Parser& parser,
    std::optional<std::uint64_t> length, const http::request<http::string_body>& head, Streamed& streamed)
    : m_connection(connection)
    , m_server(connection.server())
    , m_parser(parser)
    , m_length(length)
    , m_chunked(!length)
    , m_head(head)
    , m_streamed(streamed)
    , m_fd(connection.client().native_handle())
    , m_started(Steady::now())
{
}

template <class Client>
net::awaitable<bool> BodyStreaming<Client>::serve(
    ClientConnection<Client>& connection, Parser& parser, std::optional<std::uint64_t> length)
{
    Server& server = connection.server();
    http::request<http::string_body> head = parser.get(); // its headers; no body read yet
    const bool keepAlive = head.keep_alive();
    Streamed s(server);
    // What may be held, until this request is answered: the whole Content-Length from the
    // start (at most MAX_BODY_BYTES: no more is ever held), as for a short body (first come,
    // first served: a later request cannot take the room a body already announced), given
    // back once the body streams. A body larger than all the proxy may hold takes its share
    // as it is held, and is refused only if its members come too late for it to stream.
    const std::size_t mayHold
        = static_cast<std::size_t>(std::min<std::uint64_t>(length.value_or(0), ProxyServer::MAX_BODY_BYTES));
    if (mayHold <= server.bodies.limit() && !s.share.hold(mayHold)) {
        co_await connection.finishWith(net::error::no_buffer_space);
        co_return false;
    }
    co_await connection.continueIfAsked(head);
    typename ClientConnection<Client>::LeaseScope scope(connection, s.store.lease());
    auto body = [&] { BodyStreaming(connection, parser, length, head, s).run(); };
    co_await offload({}, body);
    if (s.end == Streamed::End::Closed) {
        s.stall.watch(-1, -1);
        if (s.reply)
            co_await connection.send(*s.reply);
        co_return false;
    }
    if (s.end == Streamed::End::Held) {
        s.stall.watch(-1, -1);
        head.body() = std::move(s.held);
        co_return co_await connection.handle(head, &s.estimate);
    }
    co_return co_await relayAnswer(connection, s, keepAlive);
}

// The body went upstream as it came: the answer is relayed here, then the request settled.
template <class Client>
net::awaitable<bool> BodyStreaming<Client>::relayAnswer(
    ClientConnection<Client>& connection, Streamed& s, bool keepAlive)
{
    const ExchangeOutcome outcome
        = co_await connection.upstream().exchangeOn(*s.link, s.up, keepAlive, s.stall, false, true);
    s.stall.watch(connection.client().native_handle(), -1); // disarmed before the link is kept or closed
    if (outcome.reusable && !s.stall.fired())
        connection.server().pool.give(std::move(s.link));
    co_await connection.settle(*s.store.permit(), outcome, s.ask.caller, s.promptTokens);
    co_return keepAlive&& outcome.clientOk && !outcome.closeAfter;
}

template <class Client> void BodyStreaming<Client>::run()
{
    std::function<std::size_t(std::uint64_t, std::string_view, beast::error_code&)> onChunk
        = [this](std::uint64_t, std::string_view bytes, beast::error_code&) {
              m_decoded.append(bytes.data(), bytes.size());
              return bytes.size();
          };
    if (m_chunked)
        m_parser.on_chunk_body(onChunk);
    m_body.emplace(
        m_length, [this](char* into, std::size_t max) { return pull(into, max); },
        [this](std::string_view bytes) { return piece(bytes); }, [this] { return before(); });
    // What may be held (the whole body, up to MAX_BODY_BYTES), reserved at once: the string
    // then never grows by copying itself (its old and new buffers at once), and untouched
    // pages take no memory (a body that streams holds only its first bytes).
    m_streamed.held.reserve(
        static_cast<std::size_t>(std::min<std::uint64_t>(m_length.value_or(0), ProxyServer::MAX_BODY_BYTES)));
    bool parsed = true;
    {
        std::istream in(&*m_body);
        parsed = nlohmann::json::sax_parse(in, &m_fields);
    }
    // Not a JSON object (an upload, say), or one broken before its members, or a top-level
    // number too long to read: the rest of it cannot tell more, so it is admitted by its size
    // (as a short one is) and streams too; the provider answers what it makes of it. (A JSON
    // object with a number too long to read is refused: conclude().)
    const bool unreadable = (!parsed || m_body->gaveUp()) && !tooLongInObject();
    if (unreadable && !m_streamed.link && !m_answered && !m_body->failed() && m_fields.repeated().empty()) {
        m_byItsSize = true;
        (void)admitAndSend();
    }
    conclude();
}

// How the body ended, for the event loop (Streamed::end, Streamed::reply).
template <class Client> void BodyStreaming<Client>::conclude()
{
    if (!m_fields.repeated().empty()) {
        giveBack();
        answer(Reply { 400, ClientConnection<Client>::repeatedMessage(m_fields.repeated()) });
        return;
    }
    if (m_answered) {
        giveBack(); // the reply says why (none: the client hung up while queued)
        return;
    }
    if (tooLongInObject()) {
        // Its members past that number cannot be read, so neither checked for repeats nor
        // (before admission) taken: the upstream, if it has some of it, is cut off.
        giveBack();
        answer(Reply { 400,
            "the request body has a number longer than " + std::to_string(JsonSkim::MAX_BARE)
                + " bytes where the proxy reads its members: it cannot be read, so it is not forwarded" });
        return;
    }
    if (!m_streamed.link)
        endHeld();
    else
        endForwarded();
}

// Never admitted: a JSON object whose members came late (or never). Held whole after all,
// then handled as a short body.
template <class Client> void BodyStreaming<Client>::endHeld()
{
    if (!m_body->failed())
        (void)m_body->finish();
    if (m_body->failed()) {
        m_streamed.share.release();
        m_streamed.reply
            = Reply::forFailedRead(m_readError ? m_readError : beast::error_code(http::error::end_of_stream),
                m_server.bodies.limit());
        return;
    }
    // The parse above read all of it: the estimate is made from its members as
    // RequestEstimate::of makes it, without parsing up to MAX_BODY_BYTES once more.
    m_streamed.estimate = m_fields.wholeObject()
        ? RequestEstimate::fromFields(m_fields, m_streamed.held.size())
        : RequestEstimate::ofSize(m_streamed.held.size());
    m_streamed.end = Streamed::End::Held;
}

// Forwarding: what the parser did not ask for (it stopped at a syntax error the provider will
// answer, or at the whitespace after the value) goes too, then a chunked body's end.
template <class Client> void BodyStreaming<Client>::endForwarded()
{
    UpstreamLink& link = *m_streamed.link;
    if (!m_body->failed() && m_body->finish() && m_chunked) {
        if (link.tls)
            net::write(*link.tls, http::make_chunk_last(), m_upstreamError);
        else
            net::write(*link.plain, http::make_chunk_last(), m_upstreamError);
    }
    if (m_body->failed() || m_upstreamError) {
        // The client went away or stalled mid-body, or the upstream stopped taking it: the
        // upstream connection is dropped, so the provider never gets a whole request.
        giveBack();
        if (m_upstreamError)
            m_streamed.reply = Reply { 502,
                "the upstream " + m_server.upstream.hostHeader
                    + " stopped taking the request: " + m_upstreamError.message() };
        else
            m_streamed.reply = Reply::forFailedRead(m_readError, m_server.bodies.limit());
        return;
    }
    m_streamed.end = Streamed::End::Forwarded;
}

// Waits until the client's socket has bytes and appends them to the connection's buffer;
// false (with m_readError) when it is gone, or too slow for the rate a body must keep.
template <class Client> bool BodyStreaming<Client>::receive()
{
    beast::flat_buffer& buffer = m_connection.buffer();
    const auto deadline = m_started + m_server.options.bodyTimeout
        + std::chrono::milliseconds(m_received * 1000 / ProxyServer::MIN_BODY_RATE);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Steady::now());
        if (left.count() <= 0 || !waitReadable(m_fd, left)) {
            m_readError = beast::error::timeout;
            return false;
        }
        auto space = buffer.prepare(ClientConnection<Client>::RECEIVE_BYTES);
        ssize_t got = 0;
        do {
            got = ::recv(m_fd, space.data(), space.size(), 0);
        } while (got < 0 && errno == EINTR);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue; // the event loop made the socket non-blocking: poll again
        if (got <= 0) {
            m_readError = got == 0 ? beast::error_code(http::error::end_of_stream)
                                   : beast::error_code(errno, boost::system::system_category());
            return false;
        }
        buffer.commit(static_cast<std::size_t>(got));
        m_received += static_cast<std::size_t>(got);
        if (m_streamed.link)
            m_streamed.stall.touch();
        return true;
    }
}

// BodyStreamBuf's Pull: the body's next bytes.
template <class Client> std::ptrdiff_t BodyStreaming<Client>::pull(char* into, std::size_t max)
{
    if (m_chunked)
        return pullChunked(into, max);
    beast::flat_buffer& buffer = m_connection.buffer();
    if (buffer.size() == 0 && !receive())
        return BodyStreamBuf::FAILED;
    const std::size_t n = net::buffer_copy(net::buffer(into, max), buffer.data());
    buffer.consume(n);
    return static_cast<std::ptrdiff_t>(n);
}

// Chunked: what the parser decoded, fed from the connection's buffer (which then keeps
// whatever follows the body: a pipelined request).
template <class Client> std::ptrdiff_t BodyStreaming<Client>::pullChunked(char* into, std::size_t max)
{
    beast::flat_buffer& buffer = m_connection.buffer();
    while (m_decodedAt == m_decoded.size()) {
        m_decoded.clear();
        m_decodedAt = 0;
        if (m_parser.is_done())
            return BodyStreamBuf::END;
        if (buffer.size() > 0) {
            beast::error_code ec;
            const std::size_t used = m_parser.put(buffer.data(), ec);
            buffer.consume(used);
            if (ec == http::error::need_more)
                ec = {};
            if (ec) {
                m_readError = ec;
                return BodyStreamBuf::FAILED;
            }
            if (used > 0)
                continue;
        }
        // Chunk lines and trailers the parser has not taken yet are bounded here, as for a
        // body read whole (readUntil).
        if (buffer.size() > ProxyServer::MAX_HEADER_BYTES) {
            m_readError = http::error::bad_chunk;
            return BodyStreamBuf::FAILED;
        }
        if (!receive())
            return BodyStreamBuf::FAILED;
    }
    const std::size_t n = std::min(max, m_decoded.size() - m_decodedAt);
    std::memcpy(into, m_decoded.data() + m_decodedAt, n);
    m_decodedAt += n;
    return static_cast<std::ptrdiff_t>(n);
}

// Bytes of the body to the upstream: as they are, or for a chunked body as one chunk (Beast
// frames it; an empty one would end the body, so none is sent).
template <class Client> beast::error_code BodyStreaming<Client>::sendUp(std::string_view bytes)
{
    beast::error_code ec;
    if (bytes.empty())
        return ec;
    UpstreamLink& link = *m_streamed.link;
    const net::const_buffer data(bytes.data(), bytes.size());
    if (m_chunked && link.tls)
        net::write(*link.tls, http::make_chunk(data), ec);
    else if (m_chunked)
        net::write(*link.plain, http::make_chunk(data), ec);
    else if (link.tls)
        net::write(*link.tls, data, ec);
    else
        net::write(*link.plain, data, ec);
    m_streamed.stall.touch();
    return ec;
}

// BodyStreamBuf's Piece: held until admission (bounded), then forwarded.
template <class Client> bool BodyStreaming<Client>::piece(std::string_view bytes)
{
    if (!m_streamed.link) {
        std::string& held = m_streamed.held;
        held.append(bytes);
        if (held.size() > ProxyServer::MAX_BODY_BYTES) {
            m_readError = http::error::body_limit;
            return false;
        }
        if (!m_streamed.share.hold(held.size())) {
            m_readError = held.size() > m_server.bodies.limit() ? net::error::message_size
                                                                : net::error::no_buffer_space;
            return false;
        }
        return true;
    }
    m_upstreamError = sendUp(bytes);
    return !m_upstreamError;
}

// BodyStreamBuf's hook before every read: admission once the members it needs were parsed.
// (A chunked body is admitted by its members only once it is whole: held, as a short one.)
template <class Client> bool BodyStreaming<Client>::before()
{
    if (m_streamed.link || m_chunked || !m_fields.known() || !m_fields.repeated().empty())
        return true;
    return admitAndSend();
}

// Admission, then the head and what was held go upstream.
template <class Client> bool BodyStreaming<Client>::admitAndSend()
{
    if (!admit())
        return false;
    m_streamed.up = m_connection.upstream().upstreamRequest(m_head);
    if (m_chunked)
        m_streamed.up.chunked(true);
    else
        m_streamed.up.content_length(*m_length);
    return sendHead();
}

// Admission through the shared quota, on this thread (it may wait in the queue).
template <class Client> bool BodyStreaming<Client>::admit()
{
    std::string why;
    LimiterLease& lease = m_streamed.store.lease();
    if (!lease.open(why)) {
        answer(Reply { 502, "the shared quota cannot be reached: " + why });
        return false;
    }
    // One that is not a JSON object is admitted by what arrived of it so far.
    QuotaExchange& exchange = *m_server.exchange;
    const RequestEstimate estimate = m_byItsSize
        ? RequestEstimate::ofSize(m_length.value_or(m_body->received()))
        : RequestEstimate::fromFields(m_fields, *m_length);
    m_streamed.ask = exchange.askFor(estimate, m_connection.callerOf(m_head));
    // An upload's size says nothing of a conversation's prompt: nothing to learn from it.
    m_streamed.promptTokens = m_byItsSize ? 0 : estimate.inputTokens;
    // Off the store strand: a remaining-requests word an answer gave before this is in the
    // store first (RemainingWords), as it is for a first try the strand runs after it.
    m_server.words.noteNow([&](const QuotaExchange::RemainingWord& word) {
        exchange.noteRemaining(lease.store(), word);
    });
    QuotaExchange::Admission admission = exchange.firstTry(lease.store(), m_streamed.ask);
    if (admission.mustWait)
        admission = m_connection.waitTurn(m_streamed.ask);
    if (!admission.permit) {
        m_answered = true;
        if (!admission.hungUp)
            answer(Reply::refusal(*admission.refusal, false));
        return false;
    }
    m_streamed.store.permit() = std::move(admission.permit);
    m_connection.setCaller(m_streamed.ask.caller);
    m_connection.setFence(m_streamed.store.permit()->fence());
    return true;
}

// The head and what was held go upstream: on a kept connection, or once more on a new one if
// that one was closed (nothing was read from the client past what is held).
template <class Client> bool BodyStreaming<Client>::sendHead()
{
    auto& link = m_streamed.link;
    StallMonitor::Watch& stall = m_streamed.stall;
    for (int attempt = 0; attempt < 2; ++attempt) {
        link = attempt == 0 ? m_server.pool.take() : nullptr;
        const bool reused = link != nullptr;
        if (!link) {
            std::optional<Reply> failure;
            link = connectOnTheLoop(failure);
            if (!link) {
                if (failure)
                    answer(std::move(*failure));
                return false;
            }
        }
        stall.watch(m_fd, link->fd());
        stall.touch();
        http::request_serializer<http::string_body> serializer { m_streamed.up };
        beast::error_code ec;
        if (link->tls)
            http::write_header(*link->tls, serializer, ec);
        else
            http::write_header(*link->plain, serializer, ec);
        if (!ec)
            ec = sendUp(m_streamed.held);
        if (!ec) {
            m_streamed.held = std::string(); // sent: nothing more is held for this request
            m_streamed.share.release();
            return true;
        }
        stall.watch(-1, -1);
        link.reset();
        if (!reused || stall.fired()) {
            answer(Reply { 502,
                "the upstream " + m_server.upstream.hostHeader
                    + " did not take the request: " + ec.message() });
            return false;
        }
    }
    m_answered = true; // not reached: a new connection is not retried
    return false;
}

// A new upstream connection, made asynchronously on the event loop while this thread waits for
// it — unless the loop stops meanwhile (the proxy is stopping, past its grace): then nullptr
// without a failure, and nobody is answered.
template <class Client>
std::unique_ptr<UpstreamLink> BodyStreaming<Client>::connectOnTheLoop(std::optional<Reply>& failure)
{
    auto connecting = net::co_spawn(m_connection.client().get_executor(),
        m_connection.upstream().connect(m_streamed.stall, failure), net::use_future);
    while (connecting.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
        if (m_server.io.stopped()) {
            m_answered = true;
            return nullptr;
        }
    }
    return connecting.get();
}

// An answer that ends the connection while the client may still be sending.
template <class Client> void BodyStreaming<Client>::answer(Reply reply)
{
    reply.keepAlive = false;
    reply.linger = true;
    m_streamed.reply = std::move(reply);
    m_answered = true;
}

// The request ends before its answer: what was held and the slot go back, and the upstream
// connection (mid-request) is dropped, never kept.
template <class Client> void BodyStreaming<Client>::giveBack()
{
    m_streamed.share.release();
    m_streamed.stall.watch(-1, -1);
    m_streamed.link.reset();
    if (auto& permit = m_streamed.store.permit())
        m_server.exchange->abandon(m_streamed.store.lease().store(), *permit);
}

template class BodyStreaming<tcp::socket>;
template class BodyStreaming<local::socket>;

} // namespace tollgate::proxy
