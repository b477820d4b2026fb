#pragma once

// Server: everything the connections of one `tollgate proxy` share. Threads: one runs the event loop (every
// socket, timer and coroutine below); store operations run on storeThreads (a directory
// home's one at a time, on storeTurn, as its lock would have them anyway); an admission that
// must wait in the quota's queue, and a long request body, get a thread of their own for that
// part (blocking calls: the queue's wait, nlohmann's parser pulling the body); StallMonitor
// has its own. A coroutine that handed work to another thread is suspended until it returns,
// so the two never touch the connection at once.
//
// Invariants: made and configured by ProxyServer::start before the loop runs; afterwards only
// the atomics, the pools (under their own locks) and QuotaExchange (thread-safe) change. Shared
// (std::shared_ptr) by the connections, whose threads may outlive serve().

#include "base/systemclock.h"
#include "exchange/quotaexchange.h"
#include "proxy/bodybudget.h"
#include "proxy/connectionplaces.h"
#include "proxy/limiterpool.h"
#include "proxy/listenat.h"
#include "proxy/netcommon.h"
#include "proxy/proxyserver.h"
#include "proxy/remainingwords.h"
#include "proxy/stallmonitor.h"
#include "proxy/upstream.h"
#include "proxy/upstreampool.h"

#include <atomic>
#include <memory>
#include <string>

namespace tollgate::proxy {

struct Server
{
    static constexpr int STORE_THREADS = 4;

    ProxyServer::Options options;
    Upstream upstream;
    ListenAt listenAt;
    // First, so destroyed last: every socket and timer below belongs to it.
    net::io_context io { 1 };
    // Cancelled, then already expired, once serving stops: idle connections end at once.
    net::steady_timer stopping { io, Steady::time_point::max() };
    ssl::context tls { ssl::context::tls_client };
    std::unique_ptr<tcp::acceptor> tcpAcceptor;
    std::unique_ptr<local::acceptor> unixAcceptor;
    std::atomic<std::size_t> active { 0 }; // connections being served or refused
    // The places of the connections served (the event loop's alone): past MAX_CONNECTIONS a new
    // one takes the oldest idle connection's place, or is refused when all are busy.
    ConnectionPlaces places { ProxyServer::MAX_CONNECTIONS };
    std::size_t refusing = 0; // connections being refused (the event loop's alone)
    std::unique_ptr<StallMonitor> stalls; // made by start(); outlives every connection
    UpstreamPool pool;
    SystemClock clock;
    // The quota's side of every exchange (admission, settling, what answers say, slots owed):
    // made by start(), once the provider and the queue timeout are known.
    std::unique_ptr<QuotaExchange> exchange;
    BodyBudget bodies;
    LimiterPool limiters;
    // The remaining-requests words of a directory home's answers, noted on the store strand
    // without the answer waiting (noteRemainingSoon in upstreamexchange.cpp).
    RemainingWords words;
    // After what their operations use: destroyed (joined) first.
    net::thread_pool storeThreads { STORE_THREADS };
    net::strand<net::thread_pool::executor_type> storeTurn { storeThreads.get_executor() };
    // Both, type-erased once: every request takes one (a copy is a reference count, where
    // erasing the strand anew would allocate).
    const net::any_io_executor storeOneAtATime { storeTurn };
    const net::any_io_executor storeSideBySide { storeThreads.get_executor() };
    std::string token; // --token-file's; empty: none asked

    int listenFd() const
    {
        return tcpAcceptor ? tcpAcceptor->native_handle() : unixAcceptor->native_handle();
    }
    // Where a store operation runs: one at a time for a directory home, side by side for a
    // Redis home (its round trips go in parallel).
    net::any_io_executor storeExecutor() { return limiters.directory() ? storeOneAtATime : storeSideBySide; }
};

} // namespace tollgate::proxy
