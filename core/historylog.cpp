#include "historylog.h"

#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>

namespace tollgate {

Result<void> HistoryLog::append(const std::vector<HistoryEvent>& events)
{
    if (events.empty())
        return {};
    const std::string path = currentPath();
    // Another process may have rotated the file since we opened it: reopen by name then.
    struct stat named {};
    const bool exists = ::lstat(path.c_str(), &named) == 0;
    if (!m_fd.valid() || !exists || named.st_ino != m_ino) {
        auto fd = Fd::open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0600);
        if (!fd)
            return fd.error();
        auto st = fd->stat();
        if (!st)
            return st.error();
        m_fd = std::move(fd).value();
        m_ino = st->st_ino;
        named = *st;
    }
    if (named.st_size >= m_maxBytes) {
        if (::rename(path.c_str(), previousPath().c_str()) != 0)
            return Error::fromErrno(errno, path, "cannot rotate the history");
        auto fd = Fd::open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0600);
        if (!fd)
            return fd.error();
        auto st = fd->stat();
        if (!st)
            return st.error();
        m_fd = std::move(fd).value();
        m_ino = st->st_ino;
    }
    std::string buf;
    for (const auto& e : events)
        buf += e.toJsonLine();
    return m_fd.writeAll(buf);
}

} // namespace tollgate
