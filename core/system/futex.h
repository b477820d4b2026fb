#pragma once

// Process-shared futex operations on a 32-bit word of a shared file mapping (futex(2) works
// across processes there). Shared, not FUTEX_PRIVATE, ops for exactly that reason. A wait
// returns on a wake, a signal, a changed word or the timeout; the caller always re-checks.

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace tollgate::futex {

inline void wait(std::atomic<std::uint32_t>* word, std::uint32_t seen, std::chrono::nanoseconds timeout)
{
    if (timeout <= std::chrono::nanoseconds::zero())
        return;
    struct timespec ts
    {
    };
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
    ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

inline void wake(std::atomic<std::uint32_t>* word, int count = INT_MAX)
{
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
}

} // namespace tollgate::futex
