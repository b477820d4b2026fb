#include "historylog.h"

#include "homedir.h"

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
    auto st = fd->stat();
    if (!st)
        return st.error();
    m_needNewline = false;
    if (st->st_size > 0) {
        char last = '\n';
        auto n = fd->preadSome(&last, 1, st->st_size - 1);
        if (!n)
            return n.error();
        m_needNewline = *n == 1 && last != '\n';
    }
    m_fd = std::move(fd).value();
    return {};
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
    std::string buf;
    if (m_needNewline)
        buf += '\n'; // end the partial line: it stays unreadable, ours does not
    for (const auto& e : events)
        buf += e.toJsonLine();
    if (auto w = m_fd.writeAll(buf); !w) {
        m_fd.reset(); // reopen next time, and look at how the file ends then
        return w.error();
    }
    m_needNewline = false;
    return rotated;
}

} // namespace tollgate
