#pragma once

// BodyStreamBuf: the body of one request (exactly its Content-Length, or a chunked body until
// its last chunk) as a std::streambuf, read from the client only as nlohmann's SAX parser asks
// for more. The parser reads each piece as JsonSkim passes it on (what TopLevelFields reads,
// so that the parser's memory is bounded whatever the body); the piece itself, as the client
// sent it, goes to `piece` (the proxy holds it until admission, then forwards it upstream)
// only once the parser has taken all of what was passed on of it, so a piece in which the
// parser stops (a member named twice) never goes on. When the skim gives up (gaveUp()), the
// body ends there for the parser, and that piece has not gone on either.
// `beforeRead` runs before every read from the client (where the proxy admits the request
// once the members it needs were parsed). `pull` reads from the client within the request's
// deadline. When any of them fails, the body ends early for the parser (EOF) and failed() says
// so; nothing is read after that.

#include "provider/toplevelfields.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <streambuf>
#include <string_view>

namespace tollgate {

class BodyStreamBuf final : public std::streambuf
{
public:
    // Reads at most `max` bytes of the body into `into`: how many (at least 1), END (a body of
    // unknown length ended), or FAILED (the client is gone, too slow, or broke the framing).
    using Pull = std::function<std::ptrdiff_t(char* into, std::size_t max)>;
    using Piece = std::function<bool(std::string_view)>;
    using Hook = std::function<bool()>;
    static constexpr std::ptrdiff_t END = 0;
    static constexpr std::ptrdiff_t FAILED = -1;

    // `length`: the Content-Length; none for a chunked body (Pull says where it ends).
    BodyStreamBuf(std::optional<std::uint64_t> length, Pull pull, Piece piece, Hook beforeRead);

    [[nodiscard]] bool failed() const { return m_failed; }
    // The body has a number or literal too long to read (JsonSkim::gaveUp).
    [[nodiscard]] bool gaveUp() const { return m_skim.gaveUp(); }
    // Bytes read from the client so far.
    [[nodiscard]] std::uint64_t received() const { return m_received; }
    // After the parse: passes on the last piece the parser read, then reads what it did not
    // ask for (it stopped at a syntax error, or before whitespace after the value) through
    // `piece`, without `beforeRead`. False when that failed.
    bool finish();

protected:
    int_type underflow() override;

private:
    bool readSome(bool withHook);
    bool passPending();

    [[nodiscard]] bool ended() const { return m_length ? m_received == *m_length : m_ended; }

    std::optional<std::uint64_t> m_length;
    std::uint64_t m_received = 0;
    bool m_ended = false; // a body of unknown length: Pull said END
    Pull m_pull;
    Piece m_piece;
    Hook m_beforeRead;
    bool m_failed = false;
    bool m_pending = false; // m_buf has not gone to `piece` yet
    JsonSkim m_skim;
    std::size_t m_got = 0; // bytes in m_buf
    char m_buf[16384]; // the piece as the client sent it
    char m_skimmed[16384]; // what the parser reads of it (the get area)
};

} // namespace tollgate
