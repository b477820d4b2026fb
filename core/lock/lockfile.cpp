#include "lock/lockfile.h"

#include "base/intmath.h"
#include "system/fd.h"
#include "system/flockguard.h"
#include "system/pathpolicy.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <sys/random.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace tollgate {

namespace {

// Bounded retries of the link/inspect/remove cycle inside one tryAcquire: each retry means
// another process changed the file under us, which cannot go on for long.
constexpr int MAX_ATTEMPTS = 16;

// Everyone who can see the directory may read who holds a lock (as with sema); only the owner
// may write. The content is a pid, a time and a tag: nothing secret.
constexpr mode_t LOCK_FILE_MODE = 0644;

// Saturating arithmetic: timestamps and file times come from files anyone may have written
// (a timestamp of 2^63-1, an mtime in 1901), and must not overflow anything.
// Seconds from `since` to `now`; 0 when `since` is not in the past.
std::int64_t secondsSince(std::int64_t now, std::int64_t since)
{
    if (since >= now)
        return 0;
    std::int64_t r = 0;
    if (__builtin_sub_overflow(now, since, &r))
        return INT64_MAX;
    return r;
}

std::string randomHex16()
{
    unsigned char bytes[8] = {};
    std::size_t got = 0;
    while (got < sizeof bytes) {
        const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break; // fall back below: uniqueness also comes from O_EXCL and the pid
        }
        got += static_cast<std::size_t>(n);
    }
    if (got < sizeof bytes) {
        const auto t = std::chrono::steady_clock::now().time_since_epoch().count();
        for (std::size_t i = 0; i < sizeof bytes; ++i)
            bytes[i] = static_cast<unsigned char>(t >> (i * 8));
    }
    char out[17];
    for (std::size_t i = 0; i < sizeof bytes; ++i)
        std::snprintf(out + 2 * i, 3, "%02x", bytes[i]);
    return std::string(out, 16);
}

// A temp file that is unlinked when it goes out of scope (after link() it is just a second
// name of the lock's inode, so unlinking it leaves the lock in place).
class TempName
{
public:
    ~TempName()
    {
        if (!m_path.empty())
            ::unlink(m_path.c_str());
    }
    TempName() = default;
    TempName(const TempName&) = delete;
    TempName& operator=(const TempName&) = delete;

    Result<void> create(const std::string& lockPath, const std::string& content)
    {
        for (int attempt = 0; attempt < 4; ++attempt) {
            std::string candidate
                = lockPath + "." + std::to_string(::getpid()) + "." + randomHex16() + ".tmp";
            auto fd = Fd::openRegular(candidate, O_WRONLY | O_CREAT | O_EXCL, LOCK_FILE_MODE);
            if (!fd) {
                if (fd.error().sysErrno == EEXIST)
                    continue;
                auto err = fd.error();
                err.message = "cannot create the temporary lock file beside the lock";
                return err;
            }
            m_path = std::move(candidate);
            // umask may have removed bits; make the mode exact regardless.
            ::fchmod(fd->get(), LOCK_FILE_MODE);
            if (auto w = fd->writeAll(content); !w)
                return w.error();
            return {};
        }
        return Error::make(ErrorKind::Io, lockPath, "cannot find a free temporary file name");
    }

    [[nodiscard]] const std::string& path() const { return m_path; }

private:
    std::string m_path;
};

bool sameFile(const struct stat& a, const struct stat& b)
{
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void pause(std::chrono::milliseconds& step)
{
    std::this_thread::sleep_for(step);
    step = std::min(step * 2, std::chrono::milliseconds(64));
}

} // namespace

Result<LockFile> LockFile::open(std::string_view path, const Clock& clock, const ProcessProbe& probe)
{
    auto valid = PathPolicy::validate(path);
    if (!valid)
        return valid.error();
    return LockFile(std::move(valid).value(), clock, probe);
}

LockStatus LockFile::judge(Result<LockInfo> parsed, const FileFacts& file, std::int64_t staleSeconds) const
{
    LockStatus s;
    s.exists = true;
    s.ownerUid = file.uid;
    const std::int64_t now = m_clock->unixSeconds();
    const std::int64_t latestBelievable = IntMath::plusSaturated(now, FUTURE_TOLERANCE_SECONDS);
    std::vector<std::string> doubts;

    // A file time to judge the age by when the content cannot be: the mtime, or, when even
    // that is in the future (utimensat lets the owner set anything), the inode change time,
    // which only the kernel sets. If the clock was set back past that too, the age is 0 until
    // the clock catches up: nothing more trustworthy is left.
    const auto fileTime = [&]() {
        if (file.mtime <= latestBelievable)
            return file.mtime;
        doubts.emplace_back("modification time in the future");
        return file.ctime;
    };

    if (!parsed) {
        s.corrupt = true;
        s.corruptReason = parsed.error().message;
        s.ageSeconds = secondsSince(now, fileTime());
        // A corrupt lock has no holder to ask; only its age can make it reclaimable.
        s.stale = staleSeconds > 0 && s.ageSeconds > staleSeconds;
    } else {
        s.info = std::move(parsed).value();
        std::int64_t since = s.info.timestamp;
        if (since > latestBelievable) {
            // Not infinitely young: untrustworthy. Without this a dead holder's lock stamped in
            // the future would never become stale.
            doubts.emplace_back("timestamp in the future (" + std::to_string(secondsSince(since, now))
                + "s ahead of this clock)");
            since = fileTime();
        }
        since = std::min(since, now); // within the tolerance: a fast clock elsewhere, age 0
        s.ageSeconds = secondsSince(now, since);
        s.holderAlive = m_probe->liveness(s.info.pid, since) == Liveness::Alive;

        // A lock file is created by the user its holder runs as (the CLI records its parent or
        // itself). A live pid of another user is not proof of anything: anyone can write any pid
        // into a file in a shared directory, and a victim's long-lived process (or pid 1) would
        // then hold the lock for ever. Such a lock ages like a dead holder's. Root's files are
        // exempt: only root can make them, and root may name any holder (`sudo ... --pid $$`).
        bool forged = false;
        if (s.holderAlive && file.uid > 0) {
            if (const auto runsAs = m_probe->userOf(s.info.pid); runsAs && *runsAs != file.uid) {
                forged = true;
                doubts.push_back("holder pid " + std::to_string(s.info.pid) + " runs as uid "
                    + std::to_string(*runsAs) + " but the lock file belongs to uid "
                    + std::to_string(file.uid));
            }
        }
        s.stale = staleSeconds > 0 && s.ageSeconds > staleSeconds && (!s.holderAlive || forged);
    }
    for (const auto& d : doubts)
        s.suspicion += (s.suspicion.empty() ? "" : "; ") + d;
    return s;
}

Result<LockStatus> LockFile::readStatus(const Fd& fd, std::int64_t staleSeconds) const
{
    auto st = fd.stat();
    if (!st)
        return st.error();
    if (!S_ISREG(st->st_mode)) // openRegular checked it; this keeps the function safe alone
        return Error::make(
            ErrorKind::Permission, fd.path(), "is not a regular file; refusing to treat it as a lock");
    FileFacts facts;
    facts.mtime = st->st_mtim.tv_sec;
    facts.ctime = st->st_ctim.tv_sec;
    facts.uid = st->st_uid;
    LockIdentity identity;
    identity.device = static_cast<std::uint64_t>(st->st_dev);
    identity.inode = static_cast<std::uint64_t>(st->st_ino);
    identity.mtime = st->st_mtim.tv_sec;
    auto content = fd.readAll(LockInfo::MAX_FILE_BYTES);
    LockStatus status;
    if (!content) {
        if (content.error().kind != ErrorKind::Corrupt)
            return content.error();
        identity.content = "(oversized)"; // too big to be a lock: named by inode and mtime
        status = judge(Error::make(ErrorKind::Corrupt, "", content.error().message), facts, staleSeconds);
    } else {
        identity.content = *content;
        status = judge(LockInfo::parse(*content), facts, staleSeconds);
    }
    status.identity = std::move(identity);
    return status;
}

Result<LockStatus> LockFile::unreadableStatus(const Error& failure) const
{
    // lstat, never stat: a symbolic link at the lock path is not followed here either. Only a
    // regular file we can see makes "held"; anything else keeps the open's refusal.
    struct stat st
    {
    };
    if (::lstat(m_path.c_str(), &st) != 0) {
        if (errno == ENOENT)
            return LockStatus {}; // removed between the open and this look
        return failure;
    }
    if (!S_ISREG(st.st_mode)) {
        return Error::make(ErrorKind::Permission, m_path,
            std::string("is ") + Fd::fileTypeName(st.st_mode)
                + ", not a regular file; refusing to treat it as a lock");
    }
    LockStatus s;
    s.exists = true;
    s.unreadable = true;
    s.ownerUid = st.st_uid;
    const std::int64_t now = m_clock->unixSeconds();
    const bool mtimeBelievable = st.st_mtim.tv_sec <= IntMath::plusSaturated(now, FUTURE_TOLERANCE_SECONDS);
    if (!mtimeBelievable)
        s.suspicion = "modification time in the future";
    s.ageSeconds = secondsSince(now, mtimeBelievable ? st.st_mtim.tv_sec : st.st_ctim.tv_sec);
    s.identity.device = static_cast<std::uint64_t>(st.st_dev);
    s.identity.inode = static_cast<std::uint64_t>(st.st_ino);
    s.identity.mtime = st.st_mtim.tv_sec;
    s.identity.content = "(unreadable)";
    return s;
}

Result<LockStatus> LockFile::inspect(std::int64_t staleSeconds) const
{
    // Non-blocking and no-follow: a FIFO planted at the lock path must not hang us.
    auto fd = Fd::openRegular(m_path, O_RDONLY);
    if (!fd) {
        if (fd.error().kind == ErrorKind::NotFound && fd.error().sysErrno == ENOENT)
            return LockStatus {};
        // The lock protocol is the file's existence: one we may not read is still held.
        if (fd.error().sysErrno == EACCES)
            return unreadableStatus(fd.error());
        return fd.error();
    }
    return readStatus(*fd, staleSeconds);
}

Result<LockStatus> LockFile::status(std::int64_t staleSeconds) const
{
    return inspect(staleSeconds);
}

template <typename Predicate>
Result<LockFile::Removal> LockFile::removeIf(
    std::int64_t staleSeconds, Predicate removeWhen, LockStatus& seen) const
{
    // Read-only is enough for flock, so a user who may remove the file (its owner, or anyone
    // in a non-sticky directory they can write) needs no write access to it.
    auto fd = Fd::openRegular(m_path, O_RDONLY);
    if (!fd) {
        if (fd.error().sysErrno == ENOENT)
            return Removal::Gone;
        if (fd.error().sysErrno == EACCES) {
            // Without a descriptor there is no flock to take and no content to judge: an
            // unreadable lock is kept, whatever removeWhen would say (it is never stale).
            auto status = unreadableStatus(fd.error());
            if (!status)
                return status.error();
            if (!status->exists)
                return Removal::Gone;
            seen = *status;
            return Removal::Kept;
        }
        return fd.error();
    }
    auto guard = FlockGuard::tryLock(*fd, true);
    if (!guard) {
        if (guard.error().kind == ErrorKind::Busy)
            return Removal::Busy;
        return guard.error();
    }
    auto mine = fd->stat();
    if (!mine)
        return mine.error();
    struct stat now
    {
    };
    if (::lstat(m_path.c_str(), &now) != 0) {
        if (errno == ENOENT)
            return Removal::Gone;
        return Error::fromErrno(errno, m_path, "cannot stat");
    }
    if (!sameFile(*mine, now))
        return Removal::Changed;
    auto status = readStatus(*fd, staleSeconds);
    if (!status)
        return status.error();
    seen = *status;
    if (!removeWhen(seen))
        return Removal::Kept;
    if (::unlink(m_path.c_str()) != 0) {
        const int err = errno;
        if (err == ENOENT)
            return Removal::Gone;
        if ((err == EPERM || err == EACCES)
            && static_cast<std::int64_t>(mine->st_uid) != static_cast<std::int64_t>(::geteuid()))
            return Error::fromErrno(err, m_path,
                "cannot remove the lock file of uid " + std::to_string(mine->st_uid)
                    + " (in a sticky or unwritable directory only its owner or root can)");
        return Error::fromErrno(err, m_path, "cannot remove the lock file");
    }
    return Removal::Removed;
}

Result<AcquireOutcome> LockFile::tryAcquire(const LockOptions& options) const
{
    AcquireOutcome out;
    auto current = inspect(options.staleSeconds);
    if (!current)
        return current.error();
    if (current->exists && !current->stale) {
        out.holder = *current;
        return out;
    }

    LockInfo info;
    info.pid = options.holderPid > 0 ? options.holderPid : ProcessProbe::selfPid();
    info.timestamp = m_clock->unixSeconds();
    info.tag = LockInfo::sanitizeTag(options.tag);
    TempName temp;
    if (auto made = temp.create(m_path, info.serialize()); !made)
        return made.error();

    for (int attempt = 0; attempt < MAX_ATTEMPTS; ++attempt) {
        if (::link(temp.path().c_str(), m_path.c_str()) == 0) {
            out.acquired = true;
            out.written = info;
            return out;
        }
        if (errno != EEXIST) {
            const int err = errno;
            if (err == EPERM || err == EOPNOTSUPP || err == ENOSYS)
                return Error::fromErrno(
                    err, m_path, "the filesystem does not support hard links, which the lock protocol needs");
            return Error::fromErrno(err, m_path, "cannot create the lock file");
        }
        auto seen = inspect(options.staleSeconds);
        if (!seen)
            return seen.error();
        if (!seen->exists)
            continue; // released between our link and our look
        if (!seen->stale) {
            out.holder = *seen;
            return out;
        }
        LockStatus underLock;
        auto removed = removeIf(
            options.staleSeconds, [](const LockStatus& s) { return s.stale; }, underLock);
        if (!removed)
            return removed.error();
        switch (*removed) {
        case Removal::Removed:
            out.tookOverStale = true;
            break;
        case Removal::Gone:
        case Removal::Changed:
            break;
        case Removal::Kept:
            out.holder = underLock;
            return out;
        case Removal::Busy:
            out.holder = *seen; // another process is taking it over right now
            return out;
        }
    }
    auto last = inspect(options.staleSeconds);
    if (!last)
        return last.error();
    out.holder = *last;
    return out;
}

Result<AcquireOutcome> LockFile::acquire(const LockOptions& options, Deadline deadline) const
{
    auto step = std::chrono::milliseconds(1);
    for (;;) {
        auto r = tryAcquire(options);
        if (!r || r->acquired || std::chrono::steady_clock::now() >= deadline)
            return r;
        // Polling, with a cap of 64 ms: peers that do not use Tollgate create and remove lock
        // files without telling anyone, so there is no signal to wait for.
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        auto wait = std::min(step, std::max(left, std::chrono::milliseconds(0)));
        pause(wait);
        step = std::min(step * 2, std::chrono::milliseconds(64));
    }
}

Result<LockStatus> LockFile::waitUntilFree(std::int64_t staleSeconds, Deadline deadline) const
{
    auto step = std::chrono::milliseconds(1);
    for (;;) {
        auto s = inspect(staleSeconds);
        if (!s || !s->exists || s->stale || std::chrono::steady_clock::now() >= deadline)
            return s;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        auto wait = std::min(step, std::max(left, std::chrono::milliseconds(0)));
        pause(wait);
        step = std::min(step * 2, std::chrono::milliseconds(64));
    }
}

Result<ReleaseOutcome> LockFile::release(std::int64_t ownerPid, bool force) const
{
    ReleaseOutcome out;
    // A concurrent remover holds the inode's flock for microseconds; give it a second.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    auto step = std::chrono::milliseconds(1);
    for (;;) {
        auto removed = removeIf(
            0, [&](const LockStatus& s) { return force || (!s.corrupt && s.info.pid == ownerPid); },
            out.before);
        if (!removed)
            return removed.error();
        switch (*removed) {
        case Removal::Removed:
            out.state = ReleaseState::Released;
            return out;
        case Removal::Gone:
            out.state = ReleaseState::NotLocked;
            return out;
        case Removal::Kept:
            out.state = ReleaseState::NotOwner;
            return out;
        case Removal::Changed:
            continue;
        case Removal::Busy:
            if (std::chrono::steady_clock::now() >= deadline)
                return Error::make(
                    ErrorKind::Busy, m_path, "another process is removing this lock right now");
            pause(step);
            continue;
        }
    }
}

Result<SameReleaseOutcome> LockFile::releaseIfSame(const LockIdentity& expected, std::int64_t staleSeconds,
    const std::function<bool(const LockStatus&)>& removeWhen) const
{
    SameReleaseOutcome out;
    // Other removers hold a lock file's flock for microseconds; one that keeps it longer is
    // stopped or hostile, and the action is refused rather than waited on.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    auto step = std::chrono::milliseconds(1);
    for (;;) {
        bool other = false;
        out.found = LockStatus {};
        auto removed = removeIf(
            staleSeconds,
            [&](const LockStatus& s) {
                other = !(s.identity == expected);
                return !other && (!removeWhen || removeWhen(s));
            },
            out.found);
        if (!removed)
            return removed.error();
        switch (*removed) {
        case Removal::Removed:
            out.state = SameReleaseState::Released;
            return out;
        case Removal::Gone:
            out.state = SameReleaseState::Gone;
            return out;
        case Removal::Kept:
            out.state = other ? SameReleaseState::Changed : SameReleaseState::Kept;
            return out;
        case Removal::Changed: {
            // The path was replaced between our open and our flock: nothing is removed, and the
            // caller is told what is there now.
            auto now = inspect(staleSeconds);
            if (!now)
                return now.error();
            out.found = *now;
            out.state = now->exists ? SameReleaseState::Changed : SameReleaseState::Gone;
            return out;
        }
        case Removal::Busy:
            if (std::chrono::steady_clock::now() >= deadline)
                return Error::make(ErrorKind::Busy, m_path, "another process holds the lock file's flock");
            pause(step);
            continue;
        }
    }
}

Result<CleanReport> LockFile::clean(std::int64_t staleSeconds) const
{
    CleanReport report;
    auto found = inspect(staleSeconds);
    if (!found)
        return found.error();
    report.lock = *found;
    if (found->exists && found->stale) {
        LockStatus seen;
        auto removed = removeIf(
            staleSeconds, [](const LockStatus& s) { return s.stale; }, seen);
        if (!removed)
            return removed.error();
        report.removedLock = *removed == Removal::Removed;
        if (*removed == Removal::Removed || *removed == Removal::Kept)
            report.lock = seen; // what the decision was made on, under the flock
    }

    // Orphaned temp files: "<base>.<writer pid>.<16 hex>.tmp" whose writer is gone. A live
    // writer's temp file is its in-flight acquire and must be left alone.
    const std::string dir = PathPolicy::dirName(m_path);
    const std::string prefix = PathPolicy::baseName(m_path) + ".";
    // Non-blocking and O_DIRECTORY: whatever sits at the directory's path cannot hang the
    // scan. Entries are then judged and removed relative to this very directory.
    auto dirFd = Fd::open(dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
    if (!dirFd)
        return Error::fromErrno(dirFd.error().sysErrno, dir, "cannot list the lock's directory");
    const int listFd = ::fcntl(dirFd->get(), F_DUPFD_CLOEXEC, 0);
    if (listFd < 0)
        return Error::fromErrno(errno, dir, "cannot list the lock's directory");
    std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(listFd), &::closedir);
    if (!d) {
        const int err = errno;
        ::close(listFd);
        return Error::fromErrno(err, dir, "cannot list the lock's directory");
    }
    while (const dirent* e = ::readdir(d.get())) {
        const std::string_view name(e->d_name);
        if (name.size() <= prefix.size() + 21 || name.substr(0, prefix.size()) != prefix
            || !name.ends_with(".tmp"))
            continue;
        const auto rest = name.substr(prefix.size(), name.size() - prefix.size() - 4); // "<pid>.<hex>"
        const auto dot = rest.find('.');
        if (dot == std::string_view::npos || dot == 0 || rest.size() - dot - 1 != 16)
            continue;
        const auto pidText = rest.substr(0, dot);
        const auto hex = rest.substr(dot + 1);
        if (pidText.find_first_not_of("0123456789") != std::string_view::npos
            || hex.find_first_not_of("0123456789abcdef") != std::string_view::npos || pidText.size() > 10)
            continue;
        const std::int64_t writer = std::stoll(std::string(pidText));
        if (m_probe->liveness(writer, std::nullopt) != Liveness::Dead)
            continue;
        // Only what we could have written: a FIFO, directory or link with a temp file's name
        // is someone else's business (and is never opened).
        const std::string entry(name);
        struct stat st
        {
        };
        if (::fstatat(dirFd->get(), entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (::unlinkat(dirFd->get(), entry.c_str(), 0) == 0)
            report.removedTemps.push_back((dir == "/" ? "" : dir) + "/" + entry);
    }
    return report;
}

} // namespace tollgate
