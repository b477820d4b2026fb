#pragma once

// UpstreamExchange: a request's exchange with the upstream — the connection (a kept one from
// UpstreamPool, else a new one, TLS verified), the request, and the answer relayed to the
// client as it arrives (docs/PROXY.md, "Forward" and "Stream back"), with what the quota must
// know of it (status, headers, real usage, the first bytes of an error) in ExchangeOutcome.
//
// Invariants:
// - Runs on the event loop, for one ClientConnection, one exchange at a time.
// - Nothing is buffered whole: each piece the upstream sends is written to the client before
//   the upstream is read again (pump).
// - What the answer's headers say is acted on before its body streams (learnFromHeaders): a
//   hold is in place before the exchange's slot is given back. On a directory home the
//   remaining-requests word is posted to the store strand, ahead of the rest, and not waited
//   for (RemainingWords): the strand's order, not the wait, puts it before later admissions.
// - A link goes back to the pool only after an answer that ended properly and that both sides
//   let go on; the stall watch lets go of its descriptor before the link is kept or closed.
// - A request the upstream may have received is sent again only when that is harmless
//   (mayRepeat): a POST is never billed twice under one admission.

#include "provider/ratelimitheaders.h"
#include "provider/usagemeter.h"
#include "proxy/netcommon.h"
#include "proxy/reply.h"
#include "proxy/stallmonitor.h"
#include "proxy/upstreampool.h"

#include <memory>
#include <optional>
#include <string>

namespace tollgate::proxy {

template <class Client> class ClientConnection;
struct Server;
struct Upstream;

// How an exchange with the upstream went.
struct ExchangeOutcome
{
    bool clientOk = false; // the answer reached the client whole: the connection may go on
    bool answered = false; // the upstream answered (status is meaningful)
    unsigned status = 0;
    HttpHeaders headers;
    std::optional<std::int64_t> retryAfterMs; // the answer's Retry-After (or -ms)
    bool planRejected = false; // its headers said the subscription plan's window is used up
    std::string errorBody; // the first bytes of a non-2xx body
    std::optional<TokenUsage> usage;
    bool reusable = false; // the upstream connection may serve the next request
    bool retryFresh = false; // a kept connection was found closed before any answer: retry
    bool clientLeft = false; // the client went before the answer began: nobody to answer
    bool closeAfter = false; // the answer ends with the connection (an HTTP/1.0 client's)
    bool brokenOff = false; // the upstream broke the answer off mid-way: no success, whatever its status
};

template <class Client> class UpstreamExchange
{
public:
    explicit UpstreamExchange(ClientConnection<Client>& connection);
    UpstreamExchange(const UpstreamExchange&) = delete;
    UpstreamExchange& operator=(const UpstreamExchange&) = delete;

    // The request to send upstream: the client's, less its hop-by-hop headers, for the
    // upstream's host. Its body is set by the caller.
    [[nodiscard]] http::request<http::string_body> upstreamRequest(
        const http::request<http::string_body>& request) const;
    // A new connection to the upstream (TLS verified, the host name checked); nullptr with
    // `failure` (a 502 to answer) when there is none.
    net::awaitable<std::unique_ptr<UpstreamLink>> connect(
        StallMonitor::Watch& stall, std::optional<Reply>& failure);
    // Sends a request whose body is here and relays the answer (a kept connection first).
    net::awaitable<ExchangeOutcome> forward(http::request<http::string_body>& request, bool keepAlive);
    // One exchange on `link`. `sent`: the request (a streamed body) is on its way already;
    // only the answer is read.
    net::awaitable<ExchangeOutcome> exchangeOn(UpstreamLink& link, http::request<http::string_body>& up,
        bool keepAlive, StallMonitor::Watch& stall, bool reused, bool sent);

private:
    // One answer being relayed: what its steps share.
    template <class Stream> struct Relay;

    template <class Stream>
    net::awaitable<ExchangeOutcome> exchange(Stream& upstream, http::request<http::string_body>& up,
        bool keepAlive, StallMonitor::Watch& stall, bool reused, bool sent);
    template <class Stream> net::awaitable<bool> readFinalHead(Relay<Stream>& relay);
    template <class Stream> net::awaitable<bool> headArrived(Relay<Stream>& relay);
    template <class Stream> net::awaitable<void> relayAnswer(Relay<Stream>& relay);
    template <class Stream>
    net::awaitable<bool> relayBody(Relay<Stream>& relay,
        http::serializer<false, http::buffer_body>& serializer, UsageMeter& meter, bool success);
    net::awaitable<void> clientLeaves();
    net::awaitable<void> learnFromHeaders(ExchangeOutcome& out);
    [[nodiscard]] static bool mayRepeat(const http::request<http::string_body>& up);

    ClientConnection<Client>& m_connection;
    Server& m_server;
    const Upstream& m_target; // where requests go (--upstream)
};

} // namespace tollgate::proxy
