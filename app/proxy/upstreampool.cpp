#include "proxy/upstreampool.h"

#include <poll.h>

namespace tollgate::proxy {

std::unique_ptr<UpstreamLink> UpstreamPool::take()
{
    std::lock_guard lock(m_mutex);
    while (!m_idle.empty()) {
        std::unique_ptr<UpstreamLink> link = std::move(m_idle.back());
        m_idle.pop_back();
        pollfd p { link->fd(), POLLIN | POLLRDHUP, 0 };
        if (Steady::now() - link->idleSince < IDLE_LIMIT && ::poll(&p, 1, 0) == 0)
            return link;
    }
    return nullptr;
}

void UpstreamPool::give(std::unique_ptr<UpstreamLink> link)
{
    link->idleSince = Steady::now();
    std::lock_guard lock(m_mutex);
    if (m_idle.size() < MAX_IDLE)
        m_idle.push_back(std::move(link));
}

} // namespace tollgate::proxy
