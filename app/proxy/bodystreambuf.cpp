#include "proxy/bodystreambuf.h"

#include <algorithm>

namespace tollgate {

BodyStreamBuf::BodyStreamBuf(std::optional<std::uint64_t> length, Pull pull, Piece piece, Hook beforeRead)
    : m_length(length)
    , m_pull(std::move(pull))
    , m_piece(std::move(piece))
    , m_beforeRead(std::move(beforeRead))
{
    setg(m_buf, m_buf, m_buf);
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
    setg(m_buf, m_buf, m_buf + got);
    m_pending = true;
    return true;
}

bool BodyStreamBuf::passPending()
{
    if (!m_pending)
        return true;
    m_pending = false;
    if (!m_piece(std::string_view(eback(), static_cast<std::size_t>(egptr() - eback())))) {
        m_failed = true;
        return false;
    }
    return true;
}

BodyStreamBuf::int_type BodyStreamBuf::underflow()
{
    if (gptr() < egptr())
        return traits_type::to_int_type(*gptr());
    if (!passPending() || !readSome(true))
        return traits_type::eof();
    return traits_type::to_int_type(*gptr());
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
    setg(m_buf, m_buf, m_buf);
    return !m_failed;
}

} // namespace tollgate
