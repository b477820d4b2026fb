#include "historylog.h"

#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>

namespace tollgate {

Result<bool> HistoryLog::append(const std::vector<HistoryEvent>& events, std::uint32_t generation)
{
    if (events.empty())
        return false;
    const std::string path = currentPath();
    if (!m_fd.valid() || generation != m_generation) {
        auto fd = Fd::open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0600);
        if (!fd)
            return fd.error();
        m_fd = std::move(fd).value();
        m_generation = generation;
    }
    auto st = m_fd.stat();
    if (!st)
        return st.error();
    bool rotated = false;
    if (st->st_size >= m_maxBytes) {
        if (::rename(path.c_str(), previousPath().c_str()) != 0)
            return Error::fromErrno(errno, path, "cannot rotate the history");
        auto fd = Fd::open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0600);
        if (!fd)
            return fd.error();
        m_fd = std::move(fd).value();
        rotated = true;
    }
    std::string buf;
    for (const auto& e : events)
        buf += e.toJsonLine();
    if (auto w = m_fd.writeAll(buf); !w)
        return w.error();
    return rotated;
}

} // namespace tollgate
