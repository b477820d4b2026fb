#pragma once

// ProxyServer: `tollgate proxy` — an HTTP/1.1 proxy in front of one provider's API that makes
// every program pointed at it (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, ...) a member of the
// shared quota without a code change. Boost.Beast/Asio does the HTTP and TLS; nothing here
// parses HTTP by hand.
//
// The code, split by job as Boost.Beast's examples split a server: this file and its .cpp
// (options, listening, accepting, stopping, the slots owed), ClientConnection (a client's
// requests), UpstreamExchange (the exchange with the upstream, the answer relayed),
// BodyStreaming (long and chunked request bodies), and what they share (Server). What a request
// means for the shared quota is core's QuotaExchange (core/exchange/).
//
// Per request: the body is read until its model and max_tokens are known (a short or chunked
// body whole, bounded; a long one only that far, then forwarded as it arrives), admitted
// through the shared quota like `acquire --slot` (requests, estimated tokens, the
// body's model, a parallel slot held for the whole upstream exchange), then forwarded; the
// answer streams back to the client as it arrives (server-sent events pass chunk by chunk)
// while the proxy reads its rate-limit headers and its real usage. After the answer: a 429 is
// reported for everyone (backoff with the provider's retry-after), a spend cap pauses the
// provider, a 2xx resets the 429 streak.
//
// Invariants:
// - One thread runs the event loop (one io_context, Beast's asynchronous calls, one C++20
//   coroutine per client connection; at most MAX_CONNECTIONS, past it the oldest idle one
//   makes room, or when all are busy the new one gets a 503 after its request head): every
//   socket is read and written there, so a stream's events from many connections are relayed
//   by one thread that takes them as they come, not by a thread woken per event. Nothing on it
//   blocks: store operations run on a few store threads (a directory home's one at a time, as
//   its lock would have them anyway), an admission that must wait in the quota's FIFO queue
//   and a long request body (nlohmann's parser pulls it) get a thread of their own for that
//   part; the connection's coroutine is suspended meanwhile, so the two never touch it at once.
// - A request leases a QuotaLimiter and its backend from a pool for its whole life
//   (LimiterPool, limiterpool.h: opening the home per connection cost more than a short
//   exchange); a limiter serves one request at a time. Upstream connections are pooled
//   (UpstreamPool): a link serves one exchange at a time and is kept only after a complete
//   answer.
// - Every wait has a deadline: headers --header-timeout (HEADER_DEADLINE), bodies
//   --body-timeout (BODY_DEADLINE; a streamed one then MIN_BODY_RATE), the queue
//   --queue-timeout, an idle client CLIENT_IDLE (and none once serving stops), an exchange
//   where nothing moves --stall-timeout (STALL_LIMIT; one monitor thread shuts its sockets
//   down, which ends the reads and writes waiting on them).
// - A client that disconnects while queued leaves the queue (the wait is cancelled).
// - Slots are held by this process: if the proxy dies, its slots are reclaimed like any dead
//   holder's. Bodies, API keys and auth headers are never logged; auth headers pass untouched.

#include "base/result.h"
#include "provider/countingrule.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace tollgate::proxy {

class ProxyServer
{
public:
    // Client connections served at once. Past it a new connection takes the place of the
    // oldest idle one (kept alive, waiting for a next request), which is closed; only when
    // every one is busy with a request is it refused (503), by at most MAX_REFUSING at once.
    static constexpr std::size_t MAX_CONNECTIONS = 256;
    static constexpr std::size_t MAX_REFUSING = 32;
    static constexpr std::size_t MAX_HEADER_BYTES = 64 * 1024;
    static constexpr std::size_t MAX_BODY_BYTES = 32u << 20;
    // Request bodies are held whole until admission (docs/PROXY.md): all connections together
    // hold at most this many bytes of them by default (--max-buffered); past it a request is
    // answered 503 with Retry-After, before its body is read when its Content-Length says so.
    static constexpr std::size_t MAX_BUFFERED_BYTES = 256u << 20;
    // A request body longer than this, with a Content-Length, is forwarded as it arrives once
    // the members admission needs were parsed; a shorter one (most API calls) is read whole.
    static constexpr std::uint64_t STREAM_BODY_AFTER = 64 * 1024;
    // A body that streams is not held, so it may be longer than MAX_BODY_BYTES, up to this
    // (the providers' own upload limits are lower); one that has to be held after all (its
    // members come late) is still refused past MAX_BODY_BYTES.
    static constexpr std::uint64_t MAX_STREAMED_BODY_BYTES = 1ULL << 30;
    // A streamed body's bytes must come at least this fast, after --body-timeout for a start.
    static constexpr std::uint64_t MIN_BODY_RATE = 256 * 1024;
    // A shared token's length bounds (--token-file).
    static constexpr std::size_t MIN_TOKEN = 16;
    static constexpr std::size_t MAX_TOKEN = 256;
    static constexpr std::chrono::seconds HEADER_DEADLINE { 10 };
    static constexpr std::chrono::seconds BODY_DEADLINE { 60 };
    // A keep-alive (or new) client connection that sends nothing for this long is closed.
    static constexpr std::chrono::seconds CLIENT_IDLE { 30 };
    // An exchange in which nothing moves (no byte from the upstream, none taken by the
    // client) for this long is ended: the upstream may think for minutes before its first
    // byte (a long answer that is not streamed), never for this long.
    static constexpr std::chrono::seconds STALL_LIMIT { 600 };
    // --queue-timeout and --header-timeout are at most this.
    static constexpr std::chrono::hours MAX_OPTION_TIME { 24 };

    struct Options
    {
        std::string provider;
        std::string home; // as given (HomeSpec::resolve resolves it per connection)
        std::string upstream; // http://host[:port][/base] or https://...
        // A PEM file of CA certificates trusted for the upstream *besides* the system's (a
        // company gateway with a private CA). Verification itself can never be turned off.
        std::string upstreamCa;
        std::string listen; // HOST:PORT (port 0: any free one) or unix:PATH
        std::string defaultCaller = "proxy";
        // How the provider counts its answers' usage (--counting); none: by the provider's name
        // (CountingRule::forProvider).
        std::optional<CountingRule> counting;
        // The user named the caller (--caller): requests that name none are counted under it
        // without looking up the process at the other end (a /proc scan per connection).
        bool callerGiven = false;
        std::chrono::milliseconds queueTimeout { 60000 };
        // How long a client may take to send a request's headers once it started (slowloris).
        std::chrono::milliseconds headerTimeout { HEADER_DEADLINE };
        std::chrono::milliseconds bodyTimeout { BODY_DEADLINE };
        // An exchange in which nothing moves for this long is ended (STALL_LIMIT by default).
        std::chrono::milliseconds stallTimeout { STALL_LIMIT };
        std::size_t maxBufferedBytes = MAX_BUFFERED_BYTES;
        // A 0600 file holding a shared token: every request must carry it (in its path, /t/TOKEN,
        // or an X-Tollgate-Token header), and only then may `listen` be an address others reach.
        std::string tokenFile;
    };

    ~ProxyServer();
    // Checks the options, binds the listener. Errors name what is wrong.
    [[nodiscard]] static Result<std::unique_ptr<ProxyServer>> start(const Options& options);
    // Where it listens, as clients should be told: "http://127.0.0.1:8787" or "unix:/path".
    [[nodiscard]] std::string address() const;
    // Serves until `stop` becomes true (checked at least every 200 ms); then stops accepting
    // and waits (bounded) for the requests in flight.
    void serve(const std::atomic<bool>& stop);

private:
    struct Impl;
    explicit ProxyServer(std::shared_ptr<Impl> impl);
    std::shared_ptr<Impl> m_impl; // shared with the connections, whose threads may outlive serve()
};

} // namespace tollgate::proxy
