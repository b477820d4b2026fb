#include "history/historylog.h"

#include "system/flockguard.h"
#include "system/homedir.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>

namespace tollgate {

Result<void> HistoryLog::openCurrent()
{
    auto fd = HomeDir::openFile(*m_home, CURRENT, O_RDWR | O_APPEND | O_CREAT, 0600);
    if (!fd)
        return fd.error();
    m_fd = std::move(fd).value();
    m_cleanEnd = -1;
    return {};
}

Result<bool> HistoryLog::endsInPartialLine(off_t size) const
{
    if (size <= 0)
        return false;
    char last = '\n';
    auto n = m_fd.preadSome(&last, 1, size - 1);
    if (!n)
        return n.error();
    return *n == 1 && last != '\n';
}

namespace {

// An appender holds the shared lock for an fstat and a write, a rotation the exclusive one
// for a rename: neither waits long, but neither may wait for ever (a stopped process can
// hold one). A rotation that cannot get in soon is tried again by the next append.
constexpr auto SHARED_WAIT = std::chrono::seconds(1);
constexpr auto ROTATE_WAIT = std::chrono::milliseconds(10);
// Each retry follows a rotation or a file deleted by hand; more in one append is a hostile
// loop, not a history.
constexpr int MAX_REOPENS = 8;

std::uint32_t current(const std::atomic<std::uint32_t>* generation)
{
    return generation ? generation->load() : 0;
}

} // namespace

Result<bool> HistoryLog::rotate(std::atomic<std::uint32_t>* generation)
{
    auto exclusive = FlockGuard::lock(m_fd, true, std::chrono::steady_clock::now() + ROTATE_WAIT);
    if (!exclusive)
        return exclusive.error().kind == ErrorKind::Timeout ? Result<bool>(false) : exclusive.error();
    if (current(generation) != m_generation)
        return false; // rotated by someone else meanwhile
    // Our descriptor must still be the file named history.jsonl (not one replaced by hand).
    struct stat named
    {
    };
    auto mine = m_fd.stat();
    if (!mine)
        return mine.error();
    if (::fstatat(m_home->get(), CURRENT, &named, AT_SYMLINK_NOFOLLOW) != 0 || named.st_ino != mine->st_ino
        || named.st_dev != mine->st_dev)
        return false;
    if (::renameat(m_home->get(), CURRENT, m_home->get(), PREVIOUS) != 0)
        return Error::fromErrno(errno, currentPath(), "cannot rotate the history to " + previousPath());
    if (generation)
        generation->fetch_add(1);
    return true;
}

Result<bool> HistoryLog::append(
    const std::vector<HistoryEvent>& events, std::atomic<std::uint32_t>* generation)
{
    if (events.empty())
        return false;
    std::string lines;
    for (const auto& e : events)
        lines += e.toJsonLine();
    const auto deadline = std::chrono::steady_clock::now() + SHARED_WAIT;
    bool rotated = false;
    bool mayRotate = true;
    for (int reopens = 0;; ++reopens) {
        if (reopens > MAX_REOPENS)
            return Error::make(ErrorKind::Busy, currentPath(), "the history file kept being replaced");
        const std::uint32_t seen = current(generation);
        if (!m_fd.valid() || seen != m_generation) {
            if (auto r = openCurrent(); !r)
                return r.error();
            m_generation = seen;
        }
        auto shared = FlockGuard::lock(m_fd, false, deadline);
        if (!shared)
            return shared.error();
        if (current(generation) != m_generation) {
            shared->unlock();
            m_fd.reset(); // rotated between our look and our lock: append to the new file
            continue;
        }
        auto st = m_fd.stat();
        if (!st)
            return st.error();
        if (st->st_nlink == 0) {
            shared->unlock();
            m_fd.reset(); // deleted by hand: start history.jsonl again
            continue;
        }
        if (st->st_size >= m_maxBytes && mayRotate) {
            mayRotate = false;
            shared->unlock();
            auto r = rotate(generation);
            if (!r)
                return r.error();
            rotated = *r;
            m_fd.reset(); // the new file if it rotated, else the same one again
            continue;
        }
        // When the file ends exactly where our own last append left it, it ends in '\n'.
        auto partial = st->st_size == m_cleanEnd ? Result<bool>(false) : endsInPartialLine(st->st_size);
        if (!partial)
            return partial.error();
        if (*partial)
            lines.insert(lines.begin(), '\n');
        if (auto w = m_fd.writeAll(lines); !w) {
            shared->unlock();
            m_fd.reset(); // reopen next time
            m_cleanEnd = -1;
            return w.error();
        }
        // Right after our write the file ends where we think only if nobody else appended.
        m_cleanEnd = st->st_size + static_cast<off_t>(lines.size());
        return rotated;
    }
}

} // namespace tollgate
