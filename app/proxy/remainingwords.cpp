#include "proxy/remainingwords.h"

#include <utility>

namespace tollgate::proxy {

bool RemainingWords::offer(Word word)
{
    std::lock_guard lock(m_mutex);
    m_pending = std::move(word);
    if (m_queued)
        return false;
    m_queued = true;
    return true;
}

void RemainingWords::withdraw()
{
    std::lock_guard lock(m_mutex);
    m_pending.reset();
    m_queued = false;
}

std::optional<RemainingWords::Word> RemainingWords::take()
{
    std::lock_guard lock(m_mutex);
    m_queued = false;
    return std::exchange(m_pending, std::nullopt);
}

} // namespace tollgate::proxy
