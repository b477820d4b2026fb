#include "proxy/upstreamexchange.h"

#include "base/textsanitizer.h"
#include "proxy/clientconnection.h"
#include "proxy/limiterlease.h"
#include "proxy/offload.h"
#include "proxy/requestrules.h"
#include "proxy/server.h"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <fcntl.h>
#include <sys/socket.h>

namespace tollgate::proxy {

namespace {

// Bytes already read that belong to this answer go into the same write, without another
// read of the socket: an answer whose last event and end came in one read leaves in one
// write (one packet, one wake-up of the client) rather than a write for the data and one
// for the chunked end. Stops where the parser needs more bytes or the body buffer is
// full; an error is left for the next pump to find and report.
template <class Parser> void takeBuffered(beast::flat_buffer& buffer, Parser& parser)
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
// which this does not depend on. While it waits for the upstream, `clientLeaves` watches the
// client: an answer may fall silent for minutes (a model thinking between events), and a
// client that hangs up then must end the exchange now, not at the upstream's next byte or the
// stall timeout. `gone`: it did (the read was cancelled; the upstream is not to be used again).
template <class Stream, class Parser, class Leaves>
net::awaitable<void> pump(Stream& upstream, beast::flat_buffer& buffer, Parser& parser, beast::error_code& ec,
    Leaves clientLeaves, bool& gone)
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
        using namespace net::experimental::awaitable_operators;
        auto read = co_await (upstream.async_read_some(buffer.prepare(room), into(ec)) || clientLeaves());
        if (read.index() == 1) {
            gone = true;
            co_return;
        }
        const std::size_t n = std::get<0>(read);
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

// The reason phrase for an answer whose upstream gave none ("HTTP/1.1 529 ", as a gateway in
// front of an HTTP/2 origin writes it) for a status Beast has no phrase of its own for: it
// would write "<unknown-status>". 529 is Anthropic's overload; others are named by their class
// (RFC 9110 §15). A phrase the upstream gave is always relayed as it came.
std::string_view reasonForUnnamedStatus(unsigned status)
{
    if (status == 529)
        return "Overloaded";
    switch (status / 100) {
    case 1:
        return "Informational";
    case 2:
        return "Success";
    case 3:
        return "Redirection";
    case 4:
        return "Client Error";
    default:
        return "Server Error";
    }
}

// A remaining-requests word noted on a directory home's store strand, without the answer
// waiting for it (RemainingWords: why that is as safe as waiting). The job has a store
// connection of its own: the request's goes on with the answer. Server outlives the job:
// serve() joins the store threads (a job queued then still runs), and they are the first of
// Server's members destroyed. Nothing escapes the job into the pool's thread: a word that could
// not be noted (no store connection to be had, no memory) is dropped, as a failed
// learnFromHeaders drops it, and the next answer says it again.
void noteRemainingSoon(Server& s, const QuotaExchange::RemainingWord& word)
{
    if (!s.words.offer(word))
        return; // a queued job notes it
    Server* server = &s;
    try {
        net::post(s.storeOneAtATime, [server] {
            try {
                server->words.noteNow([server](const QuotaExchange::RemainingWord& taken) {
                    LimiterLease lease(server->limiters);
                    std::string why;
                    if (lease.open(why))
                        server->exchange->noteRemaining(lease.store(), taken);
                });
            } catch (const std::exception&) {
            }
        });
    } catch (...) {
        s.words.withdraw();
        throw;
    }
}

} // namespace

template <class Client> template <class Stream> struct UpstreamExchange<Client>::Relay
{
    Relay(Stream& upstream, http::request<http::string_body>& up, StallMonitor::Watch& stall, bool keepAlive,
        bool reused)
        : upstream(upstream)
        , up(up)
        , stall(stall)
        , keepAlive(keepAlive)
        , reused(reused)
    {
    }
    Relay(const Relay&) = delete;
    Relay& operator=(const Relay&) = delete;

    Stream& upstream;
    http::request<http::string_body>& up;
    StallMonitor::Watch& stall;
    bool keepAlive = false;
    bool reused = false;
    ExchangeOutcome out;
    beast::error_code ec;
    // Bounded: what the parser has not taken yet (headers, chunk lines) stays under 64 KiB.
    beast::flat_buffer buffer { ProxyServer::MAX_HEADER_BYTES };
    // Interim answers (1xx: 100 Continue, 103 Early Hints) are read and dropped: the client
    // gets the final answer, and the connection stays in step with its requests.
    std::optional<http::response_parser<http::buffer_body>> parser;
    int upstreamFd = -1;
};

template <class Client>
UpstreamExchange<Client>::UpstreamExchange(ClientConnection<Client>& connection)
    : m_connection(connection)
    , m_server(connection.server())
    , m_target(connection.server().upstream)
{
}

template <class Client>
http::request<http::string_body> UpstreamExchange<Client>::upstreamRequest(
    const http::request<http::string_body>& request) const
{
    http::request<http::string_body> up { request.method(), m_target.base + std::string(request.target()),
        11 };
    for (const auto& field : request) {
        if (!RequestRules::hopByHop(TextSanitizer::asciiLower(
                std::string_view(field.name_string().data(), field.name_string().size()))))
            up.insert(field.name_string(), field.value());
    }
    up.set(http::field::host, m_target.hostHeader);
    // Bodies are read on the way (usage, error kinds): not compressed, please.
    up.set(http::field::accept_encoding, "identity");
    up.keep_alive(true);
    return up;
}

// Whether a request the upstream may have received can be sent once more: an idempotent
// method, or a request that carries an Idempotency-Key (the provider answers a repeat
// with the first answer).
template <class Client> bool UpstreamExchange<Client>::mayRepeat(const http::request<http::string_body>& up)
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

template <class Client>
net::awaitable<std::unique_ptr<UpstreamLink>> UpstreamExchange<Client>::connect(
    StallMonitor::Watch& stall, std::optional<Reply>& failure)
{
    beast::error_code ec;
    tcp::resolver resolver(m_connection.client().get_executor());
    const auto endpoints = co_await resolver.async_resolve(m_target.host, m_target.port, into(ec));
    if (ec) {
        failure = Reply { 502, "cannot resolve the upstream " + m_target.host + ": " + ec.message() };
        co_return nullptr;
    }
    auto socket = std::make_unique<tcp::socket>(m_connection.client().get_executor());
    for (const auto& e : endpoints) {
        stall.watch(
            m_connection.client().native_handle(), -1); // never a closed (and maybe reused) descriptor
        socket->close(ec);
        socket->open(e.endpoint().protocol(), ec);
        if (ec)
            continue;
        ::fcntl(socket->native_handle(), F_SETFD, FD_CLOEXEC);
        stall.watch(m_connection.client().native_handle(), socket->native_handle());
        co_await socket->async_connect(e.endpoint(), into(ec));
        if (!ec) {
            beast::error_code ignored;
            socket->set_option(tcp::no_delay(true), ignored); // as for clients: no Nagle wait
            break;
        }
    }
    if (ec || !socket->is_open()) {
        stall.watch(m_connection.client().native_handle(), -1);
        failure
            = Reply { 502, "cannot connect to the upstream " + m_target.hostHeader + ": " + ec.message() };
        co_return nullptr;
    }
    stall.touch();
    auto link = std::make_unique<UpstreamLink>();
    if (!m_target.tls) {
        link->plain = std::move(socket);
        co_return link;
    }
    link->tls = std::make_unique<ssl::stream<tcp::socket>>(std::move(*socket), m_server.tls);
    if (!SSL_set_tlsext_host_name(link->tls->native_handle(), m_target.host.c_str())) {
        stall.watch(m_connection.client().native_handle(), -1);
        failure = Reply { 502, "cannot set up TLS to the upstream" };
        co_return nullptr;
    }
    link->tls->set_verify_callback(ssl::host_name_verification(m_target.host));
    co_await link->tls->async_handshake(ssl::stream_base::client, into(ec));
    stall.touch();
    if (ec) {
        stall.watch(m_connection.client().native_handle(), -1);
        failure = Reply { 502, "TLS with the upstream " + m_target.hostHeader + " failed: " + ec.message() };
        co_return nullptr;
    }
    co_return link;
}

template <class Client>
net::awaitable<ExchangeOutcome> UpstreamExchange<Client>::forward(
    http::request<http::string_body>& request, bool keepAlive)
{
    StallMonitor::Watch stall(*m_server.stalls);
    stall.watch(m_connection.client().native_handle(), -1);
    http::request<http::string_body> up = upstreamRequest(request);
    up.body() = std::move(request.body());
    up.prepare_payload();
    // A kept connection first; if the upstream had closed it meanwhile (nothing of an
    // answer came), once more on a new one.
    for (int attempt = 0; attempt < 2; ++attempt) {
        std::unique_ptr<UpstreamLink> link = attempt == 0 ? m_server.pool.take() : nullptr;
        // However this iteration ends (an exception included), the watch lets go of the
        // link's descriptor before the link can close it.
        struct Disarm
        {
            StallMonitor::Watch& stall;
            int client;
            ~Disarm() { stall.watch(client, -1); }
        } disarm { stall, m_connection.client().native_handle() };
        const bool reused = link != nullptr;
        if (!link) {
            std::optional<Reply> failure;
            link = co_await connect(stall, failure);
            if (!link) {
                co_await m_connection.send(*failure);
                co_return ExchangeOutcome {};
            }
        }
        stall.watch(m_connection.client().native_handle(), link->fd());
        stall.touch();
        ExchangeOutcome done = co_await exchangeOn(*link, up, keepAlive, stall, reused, false);
        stall.watch(m_connection.client().native_handle(), -1); // disarmed before the link is kept or closed
        if (done.retryFresh)
            continue;
        if (done.reusable && !stall.fired())
            m_server.pool.give(std::move(link));
        co_return done;
    }
    co_await m_connection.send(
        Reply { 502, "the upstream " + m_target.hostHeader + " closed the connection without an answer" });
    co_return ExchangeOutcome {};
}

// Completes when the client has gone (closed, reset, or shut its sending side: as a queued
// client's, such a request is taken as given up); never when it merely sent more bytes (a
// pipelined request, read after this answer: then there is nothing more to watch). Ended by
// cancellation when the answer comes first.
template <class Client> net::awaitable<void> UpstreamExchange<Client>::clientLeaves()
{
    for (;;) {
        beast::error_code ec;
        co_await m_connection.client().async_wait(net::socket_base::wait_read, into(ec));
        if (ec == net::error::operation_aborted)
            co_return; // cancelled: the answer came (this result is not looked at)
        char byte = 0;
        const ssize_t n
            = ec ? -1 : ::recv(m_connection.client().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && !ec && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            continue;
        if (n <= 0)
            co_return; // end of stream or an error: gone
        break;
    }
    // Bytes of a next request: the client is there. Wait for cancellation only.
    net::steady_timer never(m_connection.client().get_executor(), Steady::time_point::max());
    beast::error_code ignored;
    co_await never.async_wait(into(ignored));
}

// What the answer's headers say (QuotaExchange::readHeaders); the store is asked only when
// they say something new (a hold, limits the store has not been told of).
template <class Client> net::awaitable<void> UpstreamExchange<Client>::learnFromHeaders(ExchangeOutcome& out)
{
    QuotaExchange::HeaderLesson lesson = m_server.exchange->readHeaders(out.headers, m_connection.model());
    lesson.fence = m_connection.fence();
    out.retryAfterMs = lesson.retryAfterMs;
    out.planRejected = lesson.planRejected;
    if (lesson.requestsLeft && m_server.limiters.directory()) {
        // Posted to the strand before the rest of the lesson (a hold must come after it).
        noteRemainingSoon(m_server, *lesson.word());
        lesson.requestsLeft.reset();
    }
    if (!lesson.needsStore())
        co_return; // most answers: nothing for the store
    auto work = [&] {
        m_server.exchange->learnFromHeaders(m_connection.lease().store(), lesson, m_connection.caller());
    };
    co_await offload(m_server.storeExecutor(), work);
}

template <class Client>
net::awaitable<ExchangeOutcome> UpstreamExchange<Client>::exchangeOn(UpstreamLink& link,
    http::request<http::string_body>& up, bool keepAlive, StallMonitor::Watch& stall, bool reused, bool sent)
{
    // (No co_await inside ?:, see clientconnection.h.)
    ExchangeOutcome outcome;
    if (link.tls)
        outcome = co_await exchange(*link.tls, up, keepAlive, stall, reused, sent);
    else
        outcome = co_await exchange(*link.plain, up, keepAlive, stall, reused, sent);
    co_return outcome;
}

template <class Client>
template <class Stream>
net::awaitable<ExchangeOutcome> UpstreamExchange<Client>::exchange(Stream& upstream,
    http::request<http::string_body>& up, bool keepAlive, StallMonitor::Watch& stall, bool reused, bool sent)
{
    Relay<Stream> relay(upstream, up, stall, keepAlive, reused);
    if (!sent)
        co_await http::async_write(upstream, up, into(relay.ec));
    stall.touch();
    if (relay.ec && reused && !stall.fired()) {
        relay.out.retryFresh = true; // a kept connection the upstream had closed: nothing was sent
        co_return relay.out;
    }
    if (relay.ec) {
        co_await m_connection.send(Reply { 502,
            "the upstream " + m_target.hostHeader + " did not take the request: " + relay.ec.message() });
        co_return relay.out;
    }
    if (!co_await readFinalHead(relay))
        co_return relay.out;
    co_await relayAnswer(relay);
    co_return relay.out;
}

// Reads the answer's head, past interim answers. false: the exchange ends here (the client
// left, was told why, or the request is to be sent again: relay.out says which).
template <class Client>
template <class Stream>
net::awaitable<bool> UpstreamExchange<Client>::readFinalHead(Relay<Stream>& relay)
{
    auto& parser = relay.parser;
    // Until the answer begins only the upstream can stall (nothing is written to the
    // client): a stall then shuts the upstream alone, and the client is told (504).
    relay.upstreamFd = beast::get_lowest_layer(relay.upstream).native_handle();
    relay.stall.watch(-1, relay.upstreamFd);
    for (int interim = 0;; ++interim) {
        parser.emplace();
        parser->header_limit(ProxyServer::MAX_HEADER_BYTES);
        parser->body_limit(boost::none); // answers stream through: their size is the client's business
        parser->skip(relay.up.method() == http::verb::head); // the answer to a HEAD has no body
        bool gone = false;
        {
            using namespace net::experimental::awaitable_operators;
            // A long answer that is not streamed sends nothing until it is whole: a client
            // that gives up meanwhile (an SDK's timeout, before its retry) ends the exchange
            // now, the upstream closed (the provider stops) and the slot given back, not when
            // the provider is done or the stall timeout passes.
            auto r = co_await (http::async_read_header(relay.upstream, relay.buffer, *parser, into(relay.ec))
                || clientLeaves());
            gone = r.index() == 1;
        }
        if (gone) {
            relay.out.clientLeft = true;
            co_return false;
        }
        relay.stall.touch();
        const unsigned status = relay.ec ? 0 : parser->get().result_int();
        if (status < 100 || status >= 200 || status == 101 || interim == 16)
            break; // a final answer, an error — or a 101, or an endless run of 1xx: as it is
    }
    co_return co_await headArrived(relay);
}

// What came instead of a final answer's head, if anything: false when the exchange ends here.
template <class Client>
template <class Stream>
net::awaitable<bool> UpstreamExchange<Client>::headArrived(Relay<Stream>& relay)
{
    const beast::error_code& ec = relay.ec;
    if (ec && relay.reused && !relay.parser->got_some() && relay.buffer.size() == 0 && !relay.stall.fired()
        && mayRepeat(relay.up)) {
        // A kept connection closed by the upstream as the request arrived (its idle timeout),
        // no byte of an answer: sent again only when repeating it is harmless. A POST may
        // have been taken and worked on before the connection broke (the provider would bill
        // it twice, under one admission): the client gets a 502 and its SDK retries through
        // admission.
        relay.out.retryFresh = true;
        co_return false;
    }
    if (ec && relay.stall.fired()) {
        co_await m_connection.send(Reply { 504,
            "the upstream " + m_target.hostHeader + " sent no answer in "
                + std::to_string(m_server.options.stallTimeout.count()) + " ms (--stall-timeout)" });
        co_return false;
    }
    if (ec) {
        co_await m_connection.send(
            Reply { 502, "the upstream " + m_target.hostHeader + " sent no answer: " + ec.message() });
        co_return false;
    }
    relay.stall.watch(m_connection.client().native_handle(), relay.upstreamFd);
    if (const unsigned status = relay.parser->get().result_int(); status < 200) {
        // A 101 would make the connection another protocol; 1xx without end, an upstream that
        // never answers. Neither is relayed as if it were the answer. (The message is made
        // before the co_await: GCC 12 destroys the temporaries of a ?: in its full-expression
        // twice.)
        std::string what = "the upstream " + m_target.hostHeader;
        if (status == 101)
            what += " switched protocols (101), which this proxy does not relay";
        else
            what += " sent interim (1xx) answers and no final one";
        co_await m_connection.send(Reply { 502, std::move(what) });
        co_return false;
    }
    co_return true;
}

// The final answer to the client: its headers as soon as they are here (what they say acted
// on first), then its body as it comes.
template <class Client>
template <class Stream>
net::awaitable<void> UpstreamExchange<Client>::relayAnswer(Relay<Stream>& relay)
{
    ExchangeOutcome& out = relay.out;
    auto& parser = *relay.parser;
    auto& response = parser.get();
    out.answered = true;
    out.status = response.result_int();
    for (const auto& field : response)
        out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    // What the headers say is acted on before the body streams: a hold must be in place
    // before this exchange's slot is given back, or the next admission would not see it.
    co_await learnFromHeaders(out);
    // The connection may serve another request only after a final answer (a 1xx is followed
    // by another) that the upstream framed and lets go on.
    const bool upstreamGoesOn = out.status >= 200 && parser.keep_alive();
    const bool success = out.status >= 200 && out.status < 300;
    UsageMeter meter(response[http::field::content_type]);
    for (const char* name : { "connection", "keep-alive", "proxy-connection" })
        response.erase(name);
    if (response.reason() == http::obsolete_reason(http::status::unknown))
        response.reason(reasonForUnnamedStatus(out.status));
    // An answer that ends when its connection does (no length, not chunked) is re-framed as
    // chunked, so the client's connection can go on — unless the client speaks HTTP/1.0,
    // which has no chunked coding (RFC 9112 §6.1): then an answer without a length goes as it
    // came, and ends with the connection.
    const bool bodyless
        = out.status < 200 || out.status == 204 || out.status == 304 || relay.up.method() == http::verb::head;
    if (m_connection.clientVersion() < 11 && !bodyless && !response.has_content_length()) {
        response.chunked(false);
        out.closeAfter = true;
    } else if (!bodyless && !response.chunked() && !response.has_content_length()) {
        response.chunked(true);
    }
    response.keep_alive(relay.keepAlive && !out.closeAfter);
    http::serializer<false, http::buffer_body> serializer { response };
    // Headers only for a bodyless answer: the answer to a HEAD, a 204 or a 304 has no body
    // whatever its headers say — a chunked one must not get the chunked end marker, which the
    // client would read as the start of its next answer. Otherwise, when only the headers are
    // here, they go now (a status the client may act on, a stream that starts with a pause);
    // an answer whose body came with them leaves in one write.
    if (bodyless || (!parser.is_done() && relay.buffer.size() == 0)) {
        co_await http::async_write_header(m_connection.client(), serializer, into(relay.ec));
        relay.stall.touch();
        if (relay.ec)
            co_return;
    }
    if (!bodyless) {
        if (!co_await relayBody(relay, serializer, meter, success))
            co_return;
        if (success)
            out.usage = meter.finish();
    }
    out.clientOk = true;
    out.reusable = upstreamGoesOn && parser.is_done() && relay.buffer.size() == 0;
}

// The answer's body, piece by piece as the upstream sends it; false when it did not reach the
// client whole (the upstream broke off, or the client hung up).
template <class Client>
template <class Stream>
net::awaitable<bool> UpstreamExchange<Client>::relayBody(Relay<Stream>& relay,
    http::serializer<false, http::buffer_body>& serializer, UsageMeter& meter, bool success)
{
    auto& parser = *relay.parser;
    auto& response = parser.get();
    ExchangeOutcome& out = relay.out;
    char chunk[16384];
    do {
        if (!parser.is_done()) {
            response.body().data = chunk;
            response.body().size = sizeof chunk;
            bool gone = false;
            co_await pump(
                relay.upstream, relay.buffer, parser, relay.ec, [this] { return clientLeaves(); }, gone);
            if (gone)
                co_return false; // the client hung up in a silent stretch: as below, the upstream is closed
            relay.stall.touch();
            if (relay.ec) {
                // The upstream broke off mid-answer: the client must not take the part for the
                // whole, so its connection is closed without a proper end — reset when the
                // answer is delimited by the close (HTTP/1.0), where a plain close would be
                // that end. Not a success for the quota either (QuotaExchange::Answer::brokenOff).
                out.brokenOff = true;
                if (out.closeAfter) {
                    beast::error_code ignored;
                    m_connection.client().set_option(net::socket_base::linger(true, 0), ignored);
                }
                co_return false;
            }
            takeBuffered(relay.buffer, parser);
            const std::size_t got = sizeof chunk - response.body().size;
            if (got == 0 && !parser.is_done())
                continue; // only framing was read (a chunk header): an empty chunk would end the answer
            response.body().size = got;
            // No bytes: no buffer. An empty buffer would go out as a chunk of size 0 — the
            // chunked end marker — followed by the real end marker: bytes the client would
            // read as the start of its next answer on a kept-alive connection.
            response.body().data = got > 0 ? chunk : nullptr;
            response.body().more = !parser.is_done();
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
        co_await http::async_write(m_connection.client(), serializer, into(relay.ec));
        if (relay.ec == http::error::need_buffer)
            relay.ec = {};
        relay.stall.touch();
        if (relay.ec) {
            // The client hung up (how SDKs cancel a generation): the upstream is closed too,
            // so the provider stops generating; the estimate stands.
            co_return false;
        }
    } while (!parser.is_done() || !serializer.is_done());
    co_return true;
}

template class UpstreamExchange<tcp::socket>;
template class UpstreamExchange<local::socket>;

} // namespace tollgate::proxy
