#include "proxy/bodystreambuf.h"

#include <algorithm>

namespace tollgate {

BodyStreamBuf::BodyStreamBuf(std::optional<std::uint64_t> length, Pull pull, Piece piece, Hook beforeRead)
    : m_length(length)
    , m_pull(std::move(pull))
    , m_piece(std::move(piece))
    , m_beforeRead(std::move(beforeRead))
{
    setg(m_skimmed, m_skimmed, m_skimmed);
}

bool BodyStreamBuf::readSome(bool withHook)
{
    if (m_failed || ended())
        return false;
    if (withHook && m_beforeRead && !m_beforeRead()) {
        m_failed = true;
        return false;
    }
    const std::size_t want = m_length
        ? static_cast<std::size_t>(std::min<std::uint64_t>(*m_length - m_received, sizeof m_buf))
        : sizeof m_buf;
    const std::ptrdiff_t got = m_pull(m_buf, want);
    if (got == END && !m_length) {
        m_ended = true;
        return false;
    }
    if (got <= 0 || static_cast<std::size_t>(got) > want) { // a known length cannot end early
        m_failed = true;
        return false;
    }
    m_received += static_cast<std::uint64_t>(got);
    m_got = static_cast<std::size_t>(got);
    m_pending = true;
    return true;
}

bool BodyStreamBuf::passPending()
{
    if (!m_pending)
        return true;
    m_pending = false;
    if (!m_piece(std::string_view(m_buf, m_got))) {
        m_failed = true;
        return false;
    }
    return true;
}

BodyStreamBuf::int_type BodyStreamBuf::underflow()
{
    if (gptr() < egptr())
        return traits_type::to_int_type(*gptr());
    // A piece of which nothing is passed on (inside `messages`, say) goes on at once.
    for (;;) {
        if (m_skim.gaveUp() || !passPending() || !readSome(true))
            return traits_type::eof();
        const std::size_t skimmed = m_skim.skim(m_buf, m_got, m_skimmed);
        setg(m_skimmed, m_skimmed, m_skimmed + skimmed);
        if (skimmed > 0)
            return traits_type::to_int_type(*gptr());
    }
}

bool BodyStreamBuf::finish()
{
    if (!passPending())
        return false;
    while (!ended()) {
        if (!readSome(false))
            return !m_failed && ended();
        if (!passPending())
            return false;
    }
    setg(m_skimmed, m_skimmed, m_skimmed);
    return !m_failed;
}

} // namespace tollgate
