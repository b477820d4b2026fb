#include "system/flockguard.h"

#include <cerrno>
#include <sys/file.h>
#include <thread>

namespace tollgate {

FlockGuard::~FlockGuard()
{
    unlock();
}

FlockGuard::FlockGuard(FlockGuard&& other) noexcept
    : m_fd(other.m_fd)
{
    other.m_fd = -1;
}

FlockGuard& FlockGuard::operator=(FlockGuard&& other) noexcept
{
    if (this != &other) {
        unlock();
        m_fd = other.m_fd;
        other.m_fd = -1;
    }
    return *this;
}

void FlockGuard::unlock()
{
    if (m_fd >= 0) {
        ::flock(m_fd, LOCK_UN);
        m_fd = -1;
    }
}

Result<FlockGuard> FlockGuard::tryLock(const Fd& fd, bool exclusive)
{
    int rc;
    do {
        rc = ::flock(fd.get(), (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        if (errno == EWOULDBLOCK)
            return Error::make(ErrorKind::Busy, fd.path(), "locked by another process");
        return Error::fromErrno(errno, fd.path(), "cannot lock");
    }
    return FlockGuard(fd.get());
}

Result<FlockGuard> FlockGuard::lock(
    const Fd& fd, bool exclusive, std::chrono::steady_clock::time_point deadline)
{
    // Short pauses keep the hand-over fair and the tail low: holders keep the lock for
    // microseconds, so a waiter that sleeps for milliseconds loses its turn again and again.
    auto pause = std::chrono::microseconds(10);
    for (;;) {
        auto r = tryLock(fd, exclusive);
        if (r || r.error().kind != ErrorKind::Busy)
            return r;
        if (std::chrono::steady_clock::now() >= deadline)
            return Error::make(ErrorKind::Timeout, fd.path(), "timed out waiting for the file lock");
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(200));
    }
}

} // namespace tollgate
