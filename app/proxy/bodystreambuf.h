#pragma once

// BodyStreamBuf: the body of one request (exactly its Content-Length) as a std::streambuf,
// read from the client only as nlohmann's SAX parser asks for more. Each piece goes to `piece`
// (the proxy holds it until admission, then forwards it upstream) only once the parser has
// taken all of it, so a piece in which the parser stops (a member named twice) never goes on.
// `beforeRead` runs before every read from the client (where the proxy admits the request
// once the members it needs were parsed). `pull` reads from the client within the request's
// deadline. When any of them fails, the body ends early for the parser (EOF) and failed() says
// so; nothing is read after that.

#include <cstdint>
#include <functional>
#include <streambuf>
#include <string_view>

namespace tollgate {

class BodyStreamBuf final : public std::streambuf
{
public:
    // Reads at most `max` bytes into `into`; 0: the client is gone or too slow (failure).
    using Pull = std::function<std::size_t(char* into, std::size_t max)>;
    using Piece = std::function<bool(std::string_view)>;
    using Hook = std::function<bool()>;

    BodyStreamBuf(std::uint64_t length, Pull pull, Piece piece, Hook beforeRead);

    [[nodiscard]] bool failed() const { return m_failed; }
    // Bytes of the body not read from the client yet.
    [[nodiscard]] std::uint64_t left() const { return m_left; }
    // After the parse: passes on the last piece the parser read, then reads what it did not
    // ask for (it stopped at a syntax error, or before whitespace after the value) through
    // `piece`, without `beforeRead`. False when that failed.
    bool finish();

protected:
    int_type underflow() override;

private:
    bool readSome(bool withHook);
    bool passPending();

    std::uint64_t m_left;
    Pull m_pull;
    Piece m_piece;
    Hook m_beforeRead;
    bool m_failed = false;
    bool m_pending = false; // the get area has not gone to `piece` yet
    char m_buf[16384];
};

} // namespace tollgate
