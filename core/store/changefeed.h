#pragma once

// ChangeFeed: the read side's change subscription. Its descriptor becomes readable when the
// home may have changed, so a front-end waits in poll() (or a QSocketNotifier) instead of
// re-reading on a timer, and reacts within one wake-up. It is a hint, never the data: after
// a wake-up the front-end takes a fresh snapshot (which carries every check); a burst of
// changes may come as one wake-up, and a spurious wake-up costs one read.
//
// File homes: inotify on the home directory (the directory that was opened and checked, by
// its descriptor through /proc/self/fd, so a path swapped afterwards is not what is watched).
// Memory: an eventfd written at every commit. Redis: the socket of a pub/sub subscription to
// the home's "changed" channel (RedisQuotaReader).

#include <memory>

namespace tollgate {

class ChangeFeed
{
public:
    virtual ~ChangeFeed() = default;
    // Readable (POLLIN) when something may have changed. Owned by the feed; close-on-exec.
    [[nodiscard]] virtual int fd() const = 0;
    // Consumes what arrived without blocking; true when something relevant changed (a file of
    // the quota, or the home itself went away).
    [[nodiscard]] virtual bool drain() = 0;
    // True once the feed can never fire again (the watched home was removed or moved away; a
    // new home at the same path is another directory): subscribe again to follow it.
    [[nodiscard]] virtual bool lost() const { return false; }
};

} // namespace tollgate
