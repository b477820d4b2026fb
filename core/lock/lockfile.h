#pragma once

// LockFile: a single exclusive lock held by the existence of a file, compatible with the
// sema/semats tools (see lockinfo.h for the bytes and docs/LOCKFILE.md for the protocol).
//
// Invariants:
// - Acquire = write a 0644 temp file "<path>.<writer pid>.<16 hex>.tmp", then link() it to
//   <path>. link fails with EEXIST when the lock exists, so content and exclusivity arrive
//   together: nobody ever sees a half-written lock, and an existing lock is never replaced
//   (rename() would silently replace it). 0644 because the content is not secret and other
//   users must be able to see who holds a lock in a shared directory.
// - Every file is opened with Fd::openRegular (no-follow, non-blocking, fstat-checked): a FIFO,
//   socket, directory or device at the lock path is refused with a clear error, never waited on.
// - Removing <path> (owner release, forced release, stale takeover, clean) always happens
//   through removeIf(): open the file, take flock(LOCK_EX) on that inode, check that <path>
//   still names the same inode, re-read and re-judge it, then unlink. Tollgate processes only
//   unlink a lock file under the flock of the very inode they checked, so two processes that
//   both judged a lock stale cannot both remove something, and neither can remove a fresh lock
//   that replaced it. (Foreign tools that unlink without this flock are outside the guarantee.)
//   flock works on the read-only descriptor, so another user can take part too.
// - A lock file that exists but that we may not read (EACCES; e.g. semats' 0600 files of
//   another user) is held, never an error and never stale: see LockStatus::unreadable.
// - Nothing in the file is trusted blindly: a timestamp in the future, or a live holder pid
//   that runs as another user than the file's owner, is reported in LockStatus::suspicion and
//   never makes a lock last for ever (see judge() and docs/LOCKFILE.md).
// - A crash leaves at most: the lock file (reclaimable once stale: old and holder dead) and a
//   temp file whose embedded writer pid is dead (removed by clean()).

#include "base/clock.h"
#include "base/result.h"
#include "lock/lockinfo.h"
#include "system/processprobe.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate {

class Fd;

struct LockOptions
{
    std::int64_t holderPid = 0; // the pid recorded as holder; 0 means this process
    std::string tag; // sanitised before writing; empty = no tag line
    std::int64_t staleSeconds = 3600; // 0 disables stale takeover
};

// Which lock file exactly: an action on "the lock the user saw" (the dashboard's release and
// clean) names it by this and proceeds only while the path still names that inode with those
// bytes. A lock released and taken again is another lock, even with the same pid in it.
struct LockIdentity
{
    std::uint64_t device = 0;
    std::uint64_t inode = 0;
    std::string content; // the file's bytes; "(oversized)" for a file too big to be a lock
    std::int64_t mtime = 0; // unix seconds

    [[nodiscard]] bool valid() const { return inode != 0; }
    bool operator==(const LockIdentity& o) const
    {
        return device == o.device && inode == o.inode && content == o.content;
    }
};

struct LockStatus
{
    bool exists = false;
    bool corrupt = false;
    std::string corruptReason; // why it does not parse
    LockInfo info; // meaningful when exists && !corrupt
    // Never negative. From the timestamp; from the file's mtime when the file is corrupt or the
    // timestamp is in the future; from its change time (which no user can set) when the mtime
    // is in the future too.
    std::int64_t ageSeconds = 0;
    bool holderAlive = false; // the recorded pid is a running process that may be the holder
    // May be taken over / cleaned: older than the stale timeout and the holder dead or
    // untrustworthy (a suspicious owner); a live, trustworthy holder is never stale.
    bool stale = false;
    std::int64_t ownerUid = -1; // the lock file's owner (st_uid); -1 when unknown
    // The file exists but we may not read it (another user's 0600 lock, as semats writes).
    // Its existence is the lock, so it is held, by a holder we cannot name (info is empty,
    // holderAlive false); and it is never stale: an unknown holder cannot be judged dead, so
    // nothing (clean, takeover, release) removes it. Age and owner come from lstat().
    bool unreadable = false;
    // Something about the lock cannot be trusted: a timestamp in the future, or a holder pid
    // that runs as another user than the file's owner (a forgery). Says why; empty when none.
    std::string suspicion;
    LockIdentity identity; // when exists: the file this status was read from
};

struct AcquireOutcome
{
    bool acquired = false;
    bool tookOverStale = false; // a stale lock was removed on the way
    LockInfo written; // when acquired
    LockStatus holder; // when not acquired: who holds it
};

enum class ReleaseState { Released, NotLocked, NotOwner };

struct ReleaseOutcome
{
    ReleaseState state = ReleaseState::NotLocked;
    LockStatus before; // what was there
};

enum class SameReleaseState {
    Released, // it was the expected lock, and it is removed
    Gone, // nothing at the path any more
    Changed, // another file, or other bytes, than the expected ones: nothing done
    Kept, // the expected lock, but removeWhen said no (e.g. its holder is alive)
};

struct SameReleaseOutcome
{
    SameReleaseState state = SameReleaseState::Gone;
    // What is at the path: judged under the inode's flock (Released, Kept, Changed bytes), or
    // the new lock that replaced it (Changed inode).
    LockStatus found;
};

struct CleanReport
{
    std::vector<std::string> removedTemps;
    bool removedLock = false;
    // The lock as judged under its inode's flock when clean considered removing it (so when
    // removedLock, exactly what was removed); otherwise as found.
    LockStatus lock;
};

class LockFile
{
public:
    using Deadline = std::chrono::steady_clock::time_point;

    // A lock timestamp (or a file time) more than this far ahead of our clock cannot be
    // true: it is "suspicious", and the lock's age is judged from a file time instead.
    // Below it, a peer's slightly fast clock is forgiven (the age is 0, never negative).
    static constexpr std::int64_t FUTURE_TOLERANCE_SECONDS = 60;

    // Validates the path (no "..", no NUL). The clock and probe must outlive the LockFile.
    static Result<LockFile> open(std::string_view path, const Clock& clock, const ProcessProbe& probe);

    [[nodiscard]] const std::string& path() const { return m_path; }

    [[nodiscard]] Result<LockStatus> status(std::int64_t staleSeconds) const;
    [[nodiscard]] Result<AcquireOutcome> tryAcquire(const LockOptions& options) const;
    [[nodiscard]] Result<AcquireOutcome> acquire(const LockOptions& options, Deadline deadline) const;
    // Returns the final status: !exists or stale when it became free, otherwise the holder
    // at the deadline.
    [[nodiscard]] Result<LockStatus> waitUntilFree(std::int64_t staleSeconds, Deadline deadline) const;
    // Without force only the recorded holder ownerPid may release.
    [[nodiscard]] Result<ReleaseOutcome> release(std::int64_t ownerPid, bool force) const;
    [[nodiscard]] Result<CleanReport> clean(std::int64_t staleSeconds) const;
    // Removes the lock only if, under an exclusive flock on its inode, the path still names
    // `expected` (device, inode and exact bytes) and removeWhen (when given) agrees with the
    // status judged there. A flock held by another remover is waited on for at most a second.
    [[nodiscard]] Result<SameReleaseOutcome> releaseIfSame(const LockIdentity& expected,
        std::int64_t staleSeconds, const std::function<bool(const LockStatus&)>& removeWhen = {}) const;

private:
    LockFile(std::string path, const Clock& clock, const ProcessProbe& probe)
        : m_path(std::move(path))
        , m_clock(&clock)
        , m_probe(&probe)
    {
    }

    enum class Removal { Removed, Kept, Gone, Changed, Busy };
    template <typename Predicate>
    Result<Removal> removeIf(std::int64_t staleSeconds, Predicate keepUnless, LockStatus& seen) const;
    // What fstat says about the lock file, for judging it.
    struct FileFacts
    {
        std::int64_t mtime = 0;
        std::int64_t ctime = 0;
        std::int64_t uid = -1;
    };
    Result<LockStatus> inspect(std::int64_t staleSeconds) const;
    // After an open failed with EACCES: the status of an existing, unreadable lock file, from
    // lstat (no follow); `failure` when the path is not a regular file we can see.
    Result<LockStatus> unreadableStatus(const Error& failure) const;
    Result<LockStatus> readStatus(const Fd& fd, std::int64_t staleSeconds) const;
    LockStatus judge(Result<LockInfo> parsed, const FileFacts& file, std::int64_t staleSeconds) const;

    std::string m_path;
    const Clock* m_clock; // not owned
    const ProcessProbe* m_probe; // not owned
};

} // namespace tollgate
