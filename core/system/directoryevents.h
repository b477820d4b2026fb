#pragma once

// DirectoryEvents: which names in a set of watched directories changed, from inotify(7), so a
// caller that keeps facts per file (the dashboard's lock-directory cache) re-examines those
// names only instead of stat-ing a whole directory of 10,000 files on every change.
//
// Invariants:
// - take() never blocks: it drains what the kernel has queued and returns.
// - When the names cannot be trusted, the answer for a directory is "everything", never an
//   incomplete list: the first take() (the watch is added before the caller's full scan, so
//   nothing between the two is lost), the event queue overflowed, the directory was deleted,
//   moved or replaced (another inode at the path), it could not be watched (missing, the
//   watch table full, no inotify), or it is on a network or FUSE filesystem, where changes
//   made by other hosts never raise an event.
// - Memory is bounded: a directory with more than MAX_NAMES pending names becomes
//   "everything" and forgets the names.

#include "system/fd.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tollgate {

class DirectoryEvents
{
public:
    static constexpr std::size_t MAX_NAMES = 4096;

    struct Changes
    {
        bool everything = true;
        std::set<std::string> names; // created, removed, renamed from/to, written or touched
    };

    DirectoryEvents(); // without inotify every take() answers "everything"
    ~DirectoryEvents();
    DirectoryEvents(const DirectoryEvents&) = delete;
    DirectoryEvents& operator=(const DirectoryEvents&) = delete;

    // What changed in dir since the previous take(dir); starts watching dir if needed.
    [[nodiscard]] Changes take(const std::string& dir);
    // Stops watching every directory not in dirs.
    void keepOnly(const std::vector<std::string>& dirs);

private:
    struct Watch
    {
        int wd = -1; // -1: not watched (everything, every time)
        std::uint64_t device = 0;
        std::uint64_t inode = 0;
        bool everything = true;
        bool remote = false;
        std::set<std::string> names;
    };

    void drain();
    void forget(Watch& w);

    Fd m_inotify;
    std::map<std::string, Watch> m_watches; // by directory path as given
};

} // namespace tollgate
