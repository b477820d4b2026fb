#include "system/directoryevents.h"

#include <cerrno>
#include <cstring>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

namespace tollgate {

namespace {

// Every change to a directory entry or to a file's content or times. IN_MODIFY as well as
// IN_CLOSE_WRITE: a foreign tool may keep a file open while it writes in place.
constexpr std::uint32_t DIR_EVENTS = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY
    | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

// Filesystems where another host (or a FUSE daemon) changes files without the local kernel
// raising inotify events (statfs(2) magic numbers).
bool isRemoteFilesystem(long type)
{
    switch (static_cast<unsigned long>(type)) {
    case 0x6969: // NFS
    case 0x517B: // SMB
    case 0xFF534D42: // CIFS
    case 0xFE534D42: // SMB2
    case 0x65735546: // FUSE
    case 0x73757245: // Coda
    case 0x5346414F: // AFS
    case 0x6B414653: // kAFS
    case 0x00C36400: // Ceph
    case 0x01021997: // 9P
    case 0x01161970: // GFS2
    case 0x7461636F: // OCFS2
        return true;
    default:
        return false;
    }
}

} // namespace

DirectoryEvents::DirectoryEvents()
{
    const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd >= 0)
        m_inotify = Fd(fd, "inotify");
}

DirectoryEvents::~DirectoryEvents() = default; // closing the descriptor drops every watch

void DirectoryEvents::forget(Watch& w)
{
    if (w.wd >= 0 && m_inotify.valid())
        ::inotify_rm_watch(m_inotify.get(), w.wd);
    w.wd = -1;
    w.everything = true;
    w.names.clear();
}

void DirectoryEvents::drain()
{
    if (!m_inotify.valid())
        return;
    alignas(inotify_event) char buf[16384];
    for (;;) {
        const ssize_t n = ::read(m_inotify.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; // EAGAIN: nothing more queued
        for (ssize_t off = 0; off + ssize_t(sizeof(inotify_event)) <= n;) {
            const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
            off += ssize_t(sizeof(inotify_event)) + e->len;
            if (e->mask & IN_Q_OVERFLOW) {
                for (auto& [path, w] : m_watches) {
                    w.everything = true;
                    w.names.clear();
                }
                continue;
            }
            for (auto& [path, w] : m_watches) {
                if (w.wd != e->wd)
                    continue;
                if (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
                    // The watch is gone or follows the directory elsewhere: start again.
                    forget(w);
                } else if (!w.everything && e->len > 0) {
                    w.names.emplace(e->name); // NUL-padded by the kernel
                    if (w.names.size() > MAX_NAMES) {
                        w.everything = true;
                        w.names.clear();
                    }
                }
                break;
            }
        }
    }
}

DirectoryEvents::Changes DirectoryEvents::take(const std::string& dir)
{
    drain();
    Watch& w = m_watches[dir];
    struct stat st
    {
    };
    const bool exists = ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    if (!exists || st.st_dev != w.device || st.st_ino != w.inode) {
        forget(w); // a different directory at the path now (or none)
        w.device = exists ? st.st_dev : 0;
        w.inode = exists ? st.st_ino : 0;
    }
    if (exists && w.wd < 0 && m_inotify.valid()) {
        w.wd = ::inotify_add_watch(m_inotify.get(), dir.c_str(), DIR_EVENTS);
        struct statfs fs
        {
        };
        w.remote = ::statfs(dir.c_str(), &fs) != 0 || isRemoteFilesystem(fs.f_type);
        // Watched from now on: whatever happens after this is reported by name.
        Changes all;
        w.everything = w.wd < 0 || w.remote;
        return all;
    }
    Changes out;
    out.everything = w.wd < 0 || w.everything || w.remote;
    if (!out.everything)
        out.names = std::move(w.names);
    w.names.clear();
    w.everything = w.wd < 0 || w.remote;
    return out;
}

void DirectoryEvents::keepOnly(const std::vector<std::string>& dirs)
{
    for (auto it = m_watches.begin(); it != m_watches.end();) {
        bool keep = false;
        for (const std::string& d : dirs)
            keep = keep || d == it->first;
        if (keep) {
            ++it;
        } else {
            forget(it->second);
            it = m_watches.erase(it);
        }
    }
}

} // namespace tollgate
