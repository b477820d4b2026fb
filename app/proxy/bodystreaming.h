#pragma once

// BodyStreaming: a request body longer than STREAM_BODY_AFTER with a Content-Length, or a
// chunked one (docs/PROXY.md, "Bodies"). On a thread of its own (nlohmann's parser pulls the
// body, blocking) the body is read through TopLevelFields as it arrives and held only until
// its model and output bound were parsed (the SDKs write them first); then the request is
// admitted, the head and what was held go upstream, and the rest is forwarded as it comes.
// Then (Forwarded) the answer is relayed on the event loop, or (Held: a JSON object whose
// members came late, held whole after all) the request is handled as a short one.
//
// Invariants:
// - Nothing goes upstream before admission; a piece goes on only after the parser read all of
//   it, so a member named twice cuts the upstream off before that piece (the provider never
//   gets a whole request) and the client gets a 400.
// - While the body's thread runs, the event loop does not touch the connection (its
//   coroutine is suspended in offload): the thread reads the client's socket with poll() and
//   recv(), and leaves the answers for the loop to write (Streamed::reply).
// - The body's bytes must keep coming: --body-timeout for a start, then a further second for
//   each MIN_BODY_RATE bytes.
// - What may be held counts against the BodyBudget until the body streams (or is answered).
// - What else a body costs is bounded whatever the body: the parser reads it through JsonSkim
//   (nothing nested deeper than TopLevelFields reads, strings cut, no endless number), and a
//   body held whole is not parsed a second time for its estimate.

#include "exchange/quotaexchange.h"
#include "provider/requestestimate.h"
#include "provider/toplevelfields.h"
#include "proxy/bodyshare.h"
#include "proxy/bodystreambuf.h"
#include "proxy/netcommon.h"
#include "proxy/reply.h"
#include "proxy/requeststore.h"
#include "proxy/stallmonitor.h"
#include "proxy/upstreampool.h"

#include <memory>
#include <optional>
#include <string>

namespace tollgate::proxy {

template <class Client> class ClientConnection;
struct Server;

template <class Client> class BodyStreaming
{
public:
    using Parser = http::request_parser<http::string_body>;

    // The request whose headers `parser` read, its body (`length`: the Content-Length; none:
    // chunked) to come. false: the connection ends.
    static net::awaitable<bool> serve(
        ClientConnection<Client>& connection, Parser& parser, std::optional<std::uint64_t> length);

private:
    // What the body's thread leaves for the event loop.
    struct Streamed
    {
        explicit Streamed(Server& server);
        enum class End { Closed, Held, Forwarded };
        End end = End::Closed;
        std::optional<Reply> reply; // to answer before the end (Closed)
        BodyShare share;
        std::string held; // the body so far, until it goes upstream (all of it: Held)
        RequestEstimate estimate; // of a held body (End::Held), made on the body's thread
        RequestStore store;
        AdmitRequest ask;
        std::int64_t promptTokens = 0; // the estimate's whole prompt, learnt from at settle (0: none)
        std::unique_ptr<UpstreamLink> link;
        http::request<http::string_body> up;
        // Last, so first to go: it lets go of the link's descriptor before the link closes it.
        // Armed only while there is a link: before, the body's own deadlines hold.
        StallMonitor::Watch stall;
    };

    BodyStreaming(ClientConnection<Client>& connection, Parser& parser, std::optional<std::uint64_t> length,
        const http::request<http::string_body>& head, Streamed& streamed);

    static net::awaitable<bool> relayAnswer(
        ClientConnection<Client>& connection, Streamed& streamed, bool keepAlive);
    // The body's thread: parses it, admits and forwards it, and says how it ended.
    void run();
    void conclude();
    void endHeld();
    void endForwarded();
    bool receive();
    std::ptrdiff_t pull(char* into, std::size_t max);
    std::ptrdiff_t pullChunked(char* into, std::size_t max);
    beast::error_code sendUp(std::string_view bytes);
    bool piece(std::string_view bytes);
    bool before();
    bool admitAndSend();
    bool admit();
    bool sendHead();
    std::unique_ptr<UpstreamLink> connectOnTheLoop(std::optional<Reply>& failure);
    void answer(Reply reply);
    // A JSON object with a number too long to read (JsonSkim::gaveUp): refused.
    [[nodiscard]] bool tooLongInObject() const { return m_body->gaveUp() && m_fields.object(); }
    void giveBack();

    ClientConnection<Client>& m_connection;
    Server& m_server;
    Parser& m_parser;
    const std::optional<std::uint64_t> m_length;
    const bool m_chunked;
    const http::request<http::string_body>& m_head;
    Streamed& m_streamed;
    const int m_fd; // the client's socket
    // A chunked body's bytes as Beast's parser takes them out of their chunks.
    std::string m_decoded;
    std::size_t m_decodedAt = 0;
    const Steady::time_point m_started;
    std::uint64_t m_received = 0;
    TopLevelFields m_fields;
    beast::error_code m_readError; // the client's side (as Reply::forFailedRead takes it)
    beast::error_code m_upstreamError;
    bool m_answered = false; // the client was told why (a refusal, a 502) and is let go
    bool m_byItsSize = false; // not a JSON object: admitted by its size (RequestEstimate::ofSize)
    std::optional<BodyStreamBuf> m_body; // made by run(), once the steps it takes are
};

} // namespace tollgate::proxy
