#include "proxy/proxyserver.h"

#include "base/textsanitizer.h"
#include "exchange/quotaexchange.h"
#include "proxy/clientconnection.h"
#include "proxy/limiterlease.h"
#include "proxy/netcommon.h"
#include "proxy/offload.h"
#include "proxy/server.h"
#include "system/fd.h"
#include "system/secretfile.h"

#include <fcntl.h>
#include <optional>
#include <sys/stat.h>

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

} // namespace

struct ProxyServer::Impl : Server
{
};

namespace {

template <class Client>
net::awaitable<void> serveConnection(
    Client client, std::shared_ptr<Server> server, std::unique_ptr<ConnectionPlaces::Place> place)
{
    ClientConnection<Client> connection(std::move(client), std::move(server), std::move(place));
    try {
        co_await connection.run();
    } catch (const std::exception&) {
        // Nothing in a connection may take the whole proxy down (a bad_alloc, a library that
        // throws): this connection ends, the others go on.
    }
    connection.close();
}

template <class Client> net::awaitable<void> refuseConnection(Client client, std::shared_ptr<Server> server)
{
    ClientConnection<Client> connection(std::move(client), std::move(server));
    try {
        co_await connection.refuse();
    } catch (const std::exception&) {
    }
    connection.close();
}

// Starts serving one accepted connection: in a free place, else in the place of the oldest
// idle connection (which ends: ConnectionPlaces). When every place is busy with a request it is
// refused — its request head read, a 503 in the provider's format — by at most MAX_REFUSING at
// once; past those it is closed at once (a flood of connections gets no answer each).
template <class Client> void begin(Client socket, const std::shared_ptr<Server>& server)
{
    ::fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);
    std::unique_ptr<ConnectionPlaces::Place> place = server->places.take(server->io.get_executor());
    if (!place) {
        if (server->refusing >= ProxyServer::MAX_REFUSING)
            return;
        ++server->refusing;
        ++server->active;
        net::co_spawn(
            server->io, refuseConnection(std::move(socket), server), [server](const std::exception_ptr&) {
                --server->refusing;
                --server->active;
            });
        return;
    }
    ++server->active;
    net::co_spawn(server->io, serveConnection(std::move(socket), server, std::move(place)),
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

// The upstream's certificates are always verified, against the system's CA store (and
// --upstream-ca's, besides); no option turns it off.
Result<void> trustUpstream(Server& server)
{
    const ProxyServer::Options& options = server.options;
    boost::system::error_code ec;
    server.tls.set_default_verify_paths(ec);
    if (ec)
        return Error::make(ErrorKind::Io, {}, "cannot load the system's CA certificates: " + ec.message());
    server.tls.set_verify_mode(ssl::verify_peer);
    if (options.upstreamCa.empty())
        return {};
    // Usage errors are printed by their message alone: it names the file itself.
    const std::string ca = "--upstream-ca " + TextSanitizer::clean(options.upstreamCa, 1024);
    if (!server.upstream.tls)
        return Error::make(ErrorKind::Usage, {},
            ca + ": only for an https:// upstream; " + TextSanitizer::clean(options.upstream, 1024)
                + " is plain http");
    // Read as any file a user names: not a FIFO that blocks, not a directory, bounded; a link
    // is followed (CA files are links more often than not).
    auto fd = Fd::openRegularFollowing(options.upstreamCa);
    if (!fd)
        return Error::make(ErrorKind::Usage, {}, ca + ": cannot read it: " + fd.error().message);
    auto pem = fd->readAll(4 << 20);
    if (!pem)
        return Error::make(ErrorKind::Usage, {}, ca + ": cannot read it: " + pem.error().message);
    if (pem->find("-----BEGIN CERTIFICATE-----") == std::string::npos)
        return Error::make(
            ErrorKind::Usage, {}, ca + ": holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
    server.tls.add_certificate_authority(net::buffer(*pem), ec);
    if (ec)
        return Error::make(ErrorKind::Usage, {}, ca + ": not a usable CA certificate: " + ec.message());
    return {};
}

// Binds and listens on unix:PATH: a socket file of mode 0600 (only its owner may spend the
// quota). A socket nobody listens on any more (a proxy that died) is replaced; anything else
// at the path is not.
Result<void> listenOnUnix(Server& server)
{
    ListenAt& at = server.listenAt;
    boost::system::error_code ec;
    struct stat st
    {
    };
    if (::lstat(at.path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return Error::make(ErrorKind::Usage, at.path, "exists and is not a socket: not replaced");
        local::socket probe(server.io);
        probe.connect(local::endpoint(at.path), ec);
        if (!ec)
            return Error::make(ErrorKind::Busy, at.path, "another process listens on this socket");
        ::unlink(at.path.c_str());
    }
    server.unixAcceptor = std::make_unique<local::acceptor>(server.io);
    local::endpoint ep(at.path);
    server.unixAcceptor->open(ep.protocol(), ec);
    const mode_t old = ::umask(0177); // the socket is 0600: only its owner may spend the quota
    if (!ec)
        server.unixAcceptor->bind(ep, ec);
    ::umask(old);
    if (!ec)
        server.unixAcceptor->listen(net::socket_base::max_listen_connections, ec);
    if (ec)
        return Error::make(ErrorKind::Io, at.path, "cannot listen: " + ec.message());
    if (::lstat(at.path.c_str(), &st) == 0) {
        at.boundDev = st.st_dev;
        at.boundIno = st.st_ino;
    }
    return {};
}

Result<void> listenOnTcp(Server& server)
{
    boost::system::error_code ec;
    tcp::endpoint ep(net::ip::make_address(server.listenAt.host), server.listenAt.port);
    server.tcpAcceptor = std::make_unique<tcp::acceptor>(server.io);
    server.tcpAcceptor->open(ep.protocol(), ec);
    if (!ec)
        server.tcpAcceptor->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec)
        server.tcpAcceptor->bind(ep, ec);
    if (!ec)
        server.tcpAcceptor->listen(net::socket_base::max_listen_connections, ec);
    if (ec)
        return Error::make(
            ErrorKind::Io, {}, "cannot listen on " + server.options.listen + ": " + ec.message());
    return {};
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
    impl->exchange = std::make_unique<QuotaExchange>(options.provider,
        options.counting.value_or(CountingRule::forProvider(options.provider)), options.queueTimeout,
        impl->clock);
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
    if (auto trusted = trustUpstream(*impl); !trusted)
        return trusted.error();
    if (auto listening = at->isUnix ? listenOnUnix(*impl) : listenOnTcp(*impl); !listening)
        return listening.error();
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
