#pragma once

// QuotaPeek: a read-only look at a home, for observers such as the dashboard. Unlike a
// QuotaStore transaction it never creates, moves or writes anything: a corrupt file is
// reported (named, with the reason) and left exactly as it is. state.bin is read under a
// *shared* flock of state.lock, so a writer's transaction is never seen half-done.
// The home is opened once and its files are read relative to that descriptor; each must be a
// regular file of ours (HomeDir::openFile), so nothing planted there can block or redirect
// the read. A limits.json that is missing while a backup exists (or the state still tracks
// providers) is reported as corrupt, naming the backup to restore.

#include "base/result.h"
#include "store/quotaview.h"
#include "system/fd.h"

#include <chrono>
#include <optional>
#include <string>

namespace tollgate {

class QuotaPeek
{
public:
    // The home must exist (check it with HomeDir::check first). Errors: I/O, or the shared
    // lock not granted within lockTimeout (a writer stopped inside its transaction).
    // Opens the home by its path (HomeDir::open, never creating it).
    // While a writer holds state.lock the reader re-tries after pauses growing up to
    // longestPause: a reader that looks a few times a second (the dashboard while 100
    // admissions/s flow, each holding the lock for a while) passes a few milliseconds and
    // wakes a few times per look instead of every 200 microseconds.
    static constexpr std::chrono::microseconds SHORT_PAUSE { 200 };
    [[nodiscard]] static Result<QuotaView> read(const std::string& homeDir,
        std::chrono::milliseconds lockTimeout, std::chrono::microseconds longestPause = SHORT_PAUSE);
    [[nodiscard]] static Result<QuotaView> read(const Fd& home, std::chrono::milliseconds lockTimeout,
        std::chrono::microseconds longestPause = SHORT_PAUSE);
};

} // namespace tollgate
