#include "proxy/stallmonitor.h"

#include <sys/socket.h>

namespace tollgate::proxy {

StallMonitor::StallMonitor(std::chrono::milliseconds limit)
    : m_limit(limit)
    , m_thread([this] { loop(); })
{
}

StallMonitor::~StallMonitor()
{
    {
        std::lock_guard lock(m_mutex);
        m_done = true;
    }
    m_wake.notify_all();
    m_thread.join();
}

StallMonitor::Watch::Watch(StallMonitor& monitor)
    : m_monitor(monitor)
{
    touch();
    std::lock_guard lock(m_monitor.m_mutex);
    // No wake-up: a new watch is due a whole limit from now, never before the moment the
    // monitor already sleeps until (at most a limit after it last looked).
    m_monitor.m_watches.push_back(this);
}

StallMonitor::Watch::~Watch()
{
    std::lock_guard lock(m_monitor.m_mutex);
    std::erase(m_monitor.m_watches, this);
}

void StallMonitor::Watch::watch(int clientFd, int upstreamFd)
{
    std::lock_guard lock(m_monitor.m_mutex);
    m_fds[0] = clientFd;
    m_fds[1] = upstreamFd;
}

void StallMonitor::loop()
{
    std::unique_lock lock(m_mutex);
    while (!m_done) {
        const auto now = Steady::now();
        auto next = now + m_limit;
        for (Watch* w : m_watches) {
            if (w->m_fired.load())
                continue;
            const auto due
                = Steady::time_point(Steady::duration(w->m_last.load(std::memory_order_relaxed))) + m_limit;
            if (now >= due) {
                w->m_fired = true;
                for (int fd : w->m_fds) {
                    if (fd >= 0)
                        ::shutdown(fd, SHUT_RDWR);
                }
            } else {
                next = std::min(next, due);
            }
        }
        m_wake.wait_until(lock, next);
    }
}

} // namespace tollgate::proxy
