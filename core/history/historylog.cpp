#include "history/historylog.h"

#include "system/homedir.h"

#include <cerrno>
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

Result<bool> HistoryLog::append(const std::vector<HistoryEvent>& events, std::uint32_t generation)
{
    if (events.empty())
        return false;
    if (!m_fd.valid() || generation != m_generation) {
        if (auto r = openCurrent(); !r)
            return r.error();
        m_generation = generation;
    }
    auto st = m_fd.stat();
    if (!st)
        return st.error();
    bool rotated = false;
    if (st->st_size >= m_maxBytes) {
        if (::renameat(m_home->get(), CURRENT, m_home->get(), PREVIOUS) != 0)
            return Error::fromErrno(errno, currentPath(), "cannot rotate the history to " + previousPath());
        m_fd.reset();
        if (auto r = openCurrent(); !r)
            return r.error();
        rotated = true;
    }
    // A writer killed (or failing) mid-line left a partial line: end it, so that it alone
    // is lost and not also our first line. One pread of one byte, under the lock.
    // When the file ends exactly where our own last append left it, it ends in '\n'.
    auto partial
        = (rotated || st->st_size == m_cleanEnd) ? Result<bool>(false) : endsInPartialLine(st->st_size);
    if (!partial)
        return partial.error();
    std::string buf;
    if (*partial)
        buf += '\n';
    for (const auto& e : events)
        buf += e.toJsonLine();
    if (auto w = m_fd.writeAll(buf); !w) {
        m_fd.reset(); // reopen next time
        m_cleanEnd = -1;
        return w.error();
    }
    m_cleanEnd = (rotated ? 0 : st->st_size) + static_cast<off_t>(buf.size());
    return rotated;
}

} // namespace tollgate
