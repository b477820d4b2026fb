#include "lockfile.h"

#include "fd.h"
#include "flockguard.h"
#include "pathpolicy.h"

#include <cerrno>
#include <cstdio>
#include <dirent.h>
#include <functional>
#include <memory>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace tollgate {

namespace {

// Bounded retries of the link/inspect/remove cycle inside one tryAcquire: each retry means
// another process changed the file under us, which cannot go on for long.
constexpr int MAX_ATTEMPTS = 16;

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
class TempName {
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
            std::string candidate = lockPath + "." + std::to_string(::getpid()) + "." + randomHex16() + ".tmp";
            auto fd = Fd::open(candidate, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
            if (!fd) {
                if (fd.error().sysErrno == EEXIST)
                    continue;
                auto err = fd.error();
                err.message = "cannot create the temporary lock file beside the lock";
                return err;
            }
            m_path = std::move(candidate);
            // umask may only have removed bits; make the mode exact regardless.
            ::fchmod(fd->get(), 0600);
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

Result<LockStatus> readStatusFrom(const Fd& fd, const std::function<LockStatus(Result<LockInfo>, std::int64_t)>& judge)
{
    auto st = fd.stat();
    if (!st)
        return st.error();
    if (!S_ISREG(st->st_mode))
        return Error::make(ErrorKind::Usage, fd.path(), "is not a regular file; refusing to treat it as a lock");
    auto content = fd.readAll(LockInfo::MAX_FILE_BYTES);
    if (!content) {
        if (content.error().kind != ErrorKind::Corrupt)
            return content.error();
        return judge(Error::make(ErrorKind::Corrupt, "", content.error().message), st->st_mtim.tv_sec);
    }
    return judge(LockInfo::parse(*content), st->st_mtim.tv_sec);
}

} // namespace

Result<LockFile> LockFile::open(std::string_view path, const Clock& clock, const ProcessProbe& probe)
{
    auto valid = PathPolicy::validate(path);
    if (!valid)
        return valid.error();
    return LockFile(std::move(valid).value(), clock, probe);
}

LockStatus LockFile::judge(Result<LockInfo> parsed, std::int64_t mtime, std::int64_t staleSeconds) const
{
    LockStatus s;
    s.exists = true;
    const std::int64_t now = m_clock->unixSeconds();
    if (!parsed) {
        s.corrupt = true;
        s.corruptReason = parsed.error().message;
        s.ageSeconds = now - mtime;
        // A corrupt lock has no holder to ask; only its age can make it reclaimable.
        s.stale = staleSeconds > 0 && s.ageSeconds > staleSeconds;
        return s;
    }
    s.info = std::move(parsed).value();
    s.ageSeconds = now - s.info.timestamp;
    s.holderAlive = m_probe->liveness(s.info.pid, s.info.timestamp) == Liveness::Alive;
    s.stale = staleSeconds > 0 && s.ageSeconds > staleSeconds && !s.holderAlive;
    return s;
}

Result<LockStatus> LockFile::inspect(std::int64_t staleSeconds) const
{
    auto fd = Fd::open(m_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (!fd) {
        if (fd.error().kind == ErrorKind::NotFound && fd.error().sysErrno == ENOENT)
            return LockStatus {};
        return fd.error();
    }
    return readStatusFrom(*fd, [&](Result<LockInfo> p, std::int64_t mtime) {
        return judge(std::move(p), mtime, staleSeconds);
    });
}

Result<LockStatus> LockFile::status(std::int64_t staleSeconds) const
{
    return inspect(staleSeconds);
}

template <typename Predicate>
Result<LockFile::Removal> LockFile::removeIf(std::int64_t staleSeconds, Predicate removeWhen, LockStatus& seen) const
{
    auto fd = Fd::open(m_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (!fd) {
        if (fd.error().sysErrno == ENOENT)
            return Removal::Gone;
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
    struct stat now {};
    if (::lstat(m_path.c_str(), &now) != 0) {
        if (errno == ENOENT)
            return Removal::Gone;
        return Error::fromErrno(errno, m_path, "cannot stat");
    }
    if (!sameFile(*mine, now))
        return Removal::Changed;
    auto status = readStatusFrom(*fd, [&](Result<LockInfo> p, std::int64_t mtime) {
        return judge(std::move(p), mtime, staleSeconds);
    });
    if (!status)
        return status.error();
    seen = *status;
    if (!removeWhen(seen))
        return Removal::Kept;
    if (::unlink(m_path.c_str()) != 0) {
        if (errno == ENOENT)
            return Removal::Gone;
        return Error::fromErrno(errno, m_path, "cannot remove the lock file");
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
                return Error::fromErrno(err, m_path,
                    "the filesystem does not support hard links, which the lock protocol needs");
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
        auto removed = removeIf(options.staleSeconds, [](const LockStatus& s) { return s.stale; }, underLock);
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
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
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
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
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
            0, [&](const LockStatus& s) { return force || (!s.corrupt && s.info.pid == ownerPid); }, out.before);
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
                return Error::make(ErrorKind::Busy, m_path, "another process is removing this lock right now");
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
        auto removed = removeIf(staleSeconds, [](const LockStatus& s) { return s.stale; }, seen);
        if (!removed)
            return removed.error();
        report.removedLock = *removed == Removal::Removed;
    }

    // Orphaned temp files: "<base>.<writer pid>.<16 hex>.tmp" whose writer is gone. A live
    // writer's temp file is its in-flight acquire and must be left alone.
    const std::string dir = PathPolicy::dirName(m_path);
    const std::string prefix = PathPolicy::baseName(m_path) + ".";
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
    if (!d)
        return Error::fromErrno(errno, dir, "cannot list the lock's directory");
    while (const dirent* e = ::readdir(d.get())) {
        const std::string_view name(e->d_name);
        if (name.size() <= prefix.size() + 21 || name.substr(0, prefix.size()) != prefix || !name.ends_with(".tmp"))
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
        const std::string full = (dir == "/" ? "" : dir) + "/" + std::string(name);
        if (::unlink(full.c_str()) == 0)
            report.removedTemps.push_back(full);
    }
    return report;
}

} // namespace tollgate
