#pragma once

// StallMonitor: ends stalled exchanges. A read from a silent upstream, or a write to a client
// that stopped reading, would wait forever (on the event loop, or on a long body's thread,
// whose Asio writes ignore SO_SNDTIMEO); shutting the exchange's sockets down once nothing
// moved for `limit` ends them with an error. One thread watches every exchange of the server
// (progress is an atomic store per event, where a timer would be re-armed per event); it
// sleeps until the earliest moment one could be overdue.
//
// Invariants: a Watch registers an exchange; touch() records progress; its descriptors are
// only ever shut down while it is registered, under the monitor's lock, so they must stay
// open until watch(-1, -1) or the Watch's end.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace tollgate::proxy {

class StallMonitor
{
public:
    using Steady = std::chrono::steady_clock;

    explicit StallMonitor(std::chrono::milliseconds limit);
    ~StallMonitor();
    StallMonitor(const StallMonitor&) = delete;
    StallMonitor& operator=(const StallMonitor&) = delete;

    class Watch
    {
    public:
        explicit Watch(StallMonitor& monitor);
        ~Watch();
        Watch(const Watch&) = delete;
        Watch& operator=(const Watch&) = delete;

        // The descriptors to shut down when the exchange stalls (-1: none).
        void watch(int clientFd, int upstreamFd);
        void touch() { m_last.store(Steady::now().time_since_epoch().count(), std::memory_order_relaxed); }
        [[nodiscard]] bool fired() const { return m_fired.load(); }

    private:
        friend class StallMonitor;
        StallMonitor& m_monitor;
        std::atomic<Steady::rep> m_last { 0 };
        std::atomic<bool> m_fired { false };
        int m_fds[2] = { -1, -1 }; // under the monitor's mutex
    };

private:
    void loop();

    const std::chrono::milliseconds m_limit;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_done = false;
    std::vector<Watch*> m_watches;
    std::thread m_thread; // last: starts once the rest is ready
};

} // namespace tollgate::proxy
