#pragma once

// ClientConnection: one client connection of `tollgate proxy` — the client's side of it, the
// way Boost.Beast's examples split a server: requests read one after another (keep-alive),
// each checked, admitted through the shared quota (QuotaExchange), handed to the upstream
// exchange (UpstreamExchange; a long body to BodyStreaming) and settled; ends when the client
// or a deadline ends the connection.
//
// Invariants:
// - Runs on the event loop; what blocks (store operations, a queued admission, a long body)
//   runs elsewhere (offload) while the connection's coroutine is suspended, so the two never
//   touch the connection at once. The socket is never read by the loop while a long body's
//   thread reads it.
// - Every read has a deadline: the first byte of a request CLIENT_IDLE (none once serving
//   stops, none once a new connection took its place: ConnectionPlaces), the headers
//   --header-timeout, the body --body-timeout, in total, however the bytes trickle in (the
//   bytes are read here and handed to Beast's parser).
// - Idle (ConnectionPlaces::Place::Idle) only while it waits for a request's first byte.
// - lease() is the current request's store connection, set for as long as the request runs
//   (LeaseScope); the request's permit refers to it.
// - Keeps the Server alive (m_keep): the threads it starts may outlive serve().
// (No co_await in an operand of ?:, && or || anywhere in the proxy: GCC 12 evaluates both
// sides of such an expression, or destroys their temporaries twice.)

#include "proxy/connectionplaces.h"
#include "proxy/limiterlease.h"
#include "proxy/netcommon.h"
#include "proxy/reply.h"
#include "proxy/requeststore.h"
#include "proxy/server.h"
#include "proxy/upstreamexchange.h"

#include <memory>
#include <optional>
#include <string>

namespace tollgate::proxy {

template <class Client> class ClientConnection
{
public:
    static constexpr std::size_t RECEIVE_BYTES = 16384;

    // `place`: the connection's place among the served ones (nullptr: it is only refused).
    ClientConnection(Client client, std::shared_ptr<Server> server,
        std::unique_ptr<ConnectionPlaces::Place> place = nullptr);
    ClientConnection(const ClientConnection&) = delete;
    ClientConnection& operator=(const ClientConnection&) = delete;

    void close();
    net::awaitable<void> run();
    // Every place is busy: the request's head is read (so that the client is reading when the
    // answer comes — closing before would reset the connection, and the client would see a
    // broken pipe, not why), then 503 with Retry-After in the provider's format, and the close.
    net::awaitable<void> refuse();

    // What the upstream exchange and a streamed body use of the connection.
    Client& client() { return m_client; }
    Server& server() { return m_server; }
    beast::flat_buffer& buffer() { return m_buffer; }
    UpstreamExchange<Client>& upstream() { return m_upstream; }
    [[nodiscard]] unsigned clientVersion() const { return m_clientVersion; }
    [[nodiscard]] const std::string& caller() const { return m_caller; }
    [[nodiscard]] const std::string& model() const { return m_model; }
    void setCaller(std::string caller) { m_caller = std::move(caller); }
    // The fence of the request's admission (0: none yet): what the provider's word in its answer
    // may not have counted is what was admitted after it (QuotaBackend::noteRemaining).
    [[nodiscard]] std::uint64_t fence() const { return m_fence; }
    void setFence(std::uint64_t fence) { m_fence = fence; }
    LimiterLease& lease() { return *m_lease; }

    // Points lease() at a request's lease for as long as it runs.
    class LeaseScope
    {
    public:
        LeaseScope(ClientConnection& connection, LimiterLease& lease)
            : m_connection(connection)
        {
            m_connection.m_lease = &lease;
        }
        ~LeaseScope() { m_connection.m_lease = nullptr; }
        LeaseScope(const LeaseScope&) = delete;
        LeaseScope& operator=(const LeaseScope&) = delete;

    private:
        ClientConnection& m_connection;
    };

    net::awaitable<void> send(const Reply& reply);
    // A read that failed: say why when the client can still hear it, then close.
    net::awaitable<void> finishWith(const beast::error_code& ec);
    net::awaitable<void> continueIfAsked(const http::request<http::string_body>& request);
    // The name a request's calls are counted under: its X-Tollgate-Caller, else --caller, else
    // the process at the other end (looked up once per connection), else the default.
    std::string callerOf(const http::request<http::string_body>& request);
    // Waits in the quota's queue, on a thread of its own (blocking).
    QuotaExchange::Admission waitTurn(const AdmitRequest& request);
    // A request whose body is here: admitted, forwarded, answered, settled. false: the
    // connection ends. `known`: the body's estimate, made already off the event loop.
    net::awaitable<bool> handle(
        http::request<http::string_body>& request, const RequestEstimate* known = nullptr);
    // `promptTokens`: the request's whole prompt as estimated (QuotaExchange::settle).
    net::awaitable<void> settle(
        Permit& permit, const ExchangeOutcome& outcome, const std::string& caller, std::int64_t promptTokens);
    [[nodiscard]] static std::string repeatedMessage(const std::string& member);

private:
    using Parser = http::request_parser<http::string_body>;

    net::awaitable<bool> readHead(Parser& parser);
    net::awaitable<bool> serveWhole(Parser& parser);
    net::awaitable<bool> receive(Steady::time_point deadline, bool stoppable, beast::error_code& ec);
    net::awaitable<bool> readUntil(
        Parser& parser, bool headerOnly, Steady::time_point deadline, beast::error_code& ec);
    bool tokenGiven(http::request<http::string_body>& request) const;
    net::awaitable<void> lingerClose();
    static std::optional<std::string> namedCaller(const http::request<http::string_body>& request);
    bool wantsPeer(const http::request<http::string_body>& request) const;
    void lookUpPeer();
    net::awaitable<std::optional<bool>> admit(http::request<http::string_body>& request,
        const RequestEstimate& estimate, RequestStore& store, AdmitRequest& ask);

    Client m_client;
    Server& m_server;
    std::shared_ptr<Server> m_keep; // the threads this connection starts may outlive serve()
    const ProxyServer::Options& m_options;
    UpstreamExchange<Client> m_upstream { *this };
    std::string m_peer; // the process at the other end, looked up once
    bool m_peerLooked = false;
    std::string m_caller; // of the request being forwarded
    std::string m_model; // of the request being forwarded (as admitted: sanitised)
    std::uint64_t m_fence = 0; // of the request being forwarded, once admitted
    unsigned m_clientVersion = 11; // of the request being served: 10 for HTTP/1.0
    beast::flat_buffer m_buffer;
    LimiterLease* m_lease = nullptr; // the current request's, while it runs (LeaseScope)
    std::unique_ptr<ConnectionPlaces::Place> m_place; // nullptr for a connection only refused
};

} // namespace tollgate::proxy
