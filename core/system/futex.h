#pragma once

// Process-shared futex operations on a 32-bit word of a shared file mapping (futex(2) works
// across processes there). Shared, not FUTEX_PRIVATE, ops for exactly that reason. A wait
// returns on a wake, a signal, a changed word or the timeout; the caller always re-checks.
//
// A word on a page of a file that was truncated under us (see SharedMapping) makes futex(2)
// answer EFAULT at once instead of raising SIGBUS. A wait then still lasts a little (up to
// FAULT_PAUSE, never past its timeout) before it returns like a wake, so a caller that looks
// again and waits again polls instead of spinning hot; its next load of the word faults, and
// SharedMapping answers that. A wake on such a word wakes nobody, which costs a sleeper at
// most its own timeout.

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace tollgate::futex {

inline constexpr std::chrono::milliseconds FAULT_PAUSE { 1 };

// Returns 0 when woken (or the timeout passed, or the word differed), else the errno of the
// wait: EINTR (a signal), EFAULT (the page is gone; the pause above was taken).
inline int wait(std::atomic<std::uint32_t>* word, std::uint32_t seen, std::chrono::nanoseconds timeout)
{
    if (timeout <= std::chrono::nanoseconds::zero())
        return 0;
    struct timespec ts
    {
    };
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
    ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
    if (::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0) == 0)
        return 0;
    const int err = errno;
    if (err == ETIMEDOUT || err == EAGAIN)
        return 0;
    if (err == EFAULT) {
        const auto pause = std::min<std::chrono::nanoseconds>(timeout, FAULT_PAUSE);
        struct timespec p
        {
        };
        p.tv_sec = static_cast<time_t>(pause.count() / 1000000000);
        p.tv_nsec = static_cast<long>(pause.count() % 1000000000);
        (void)::nanosleep(&p, nullptr); // a signal may end it early, as it ends a futex wait
    }
    return err;
}

// EFAULT (the page is gone) is ignored: a wake that did not happen costs each sleeper at
// most its own timeout.
inline void wake(std::atomic<std::uint32_t>* word, int count = INT_MAX)
{
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
}

} // namespace tollgate::futex
