#pragma once

// FlockGuard: holds a flock(2) on an open file description until destroyed.
// flock (not fcntl record locks) because a flock belongs to the open file description:
// closing some other descriptor of the same file in this process does not drop it.
// Waiting always has a deadline: the lock is polled with LOCK_NB and a short growing pause,
// because holders keep it for microseconds and a stopped holder must not wedge us forever.

#include "system/fd.h"

#include <chrono>

namespace tollgate {

class FlockGuard
{
public:
    FlockGuard() = default;
    ~FlockGuard();
    FlockGuard(FlockGuard&& other) noexcept;
    FlockGuard& operator=(FlockGuard&& other) noexcept;
    FlockGuard(const FlockGuard&) = delete;
    FlockGuard& operator=(const FlockGuard&) = delete;

    // ErrorKind::Busy when another description holds it.
    static Result<FlockGuard> tryLock(const Fd& fd, bool exclusive);
    // ErrorKind::Timeout when the deadline passes first.
    static Result<FlockGuard> lock(
        const Fd& fd, bool exclusive, std::chrono::steady_clock::time_point deadline);

    [[nodiscard]] bool locked() const { return m_fd >= 0; }
    void unlock();

private:
    explicit FlockGuard(int fd)
        : m_fd(fd)
    {
    }
    int m_fd = -1; // not owned: the Fd outlives the guard
};

} // namespace tollgate
