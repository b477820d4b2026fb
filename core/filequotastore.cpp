#include "filequotastore.h"

#include "flockguard.h"
#include "homedir.h"
#include "quotapolicy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <unistd.h>

namespace tollgate {

namespace {

bool sameStat(const struct stat& a, const struct stat& b)
{
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size
        && a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

std::string utcStamp(std::int64_t unixSeconds)
{
    const std::time_t t = static_cast<std::time_t>(unixSeconds);
    std::tm tm {};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
    return buf;
}

std::int64_t nowMs(const Clock& c)
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(c.now().time_since_epoch()).count();
}

Result<void> checkRegular(const Fd& fd)
{
    auto st = fd.stat();
    if (!st)
        return st.error();
    if (!S_ISREG(st->st_mode))
        return Error::make(ErrorKind::Permission, fd.path(), "is not a regular file; refusing it");
    return {};
}

} // namespace

Result<std::unique_ptr<FileQuotaStore>> FileQuotaStore::open(const std::string& homeDir, const Clock& clock)
{
    if (auto r = HomeDir::ensure(homeDir); !r)
        return r.error();
    auto lockFd = Fd::open(homeDir + "/state.lock", O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
    if (!lockFd)
        return lockFd.error();
    if (auto r = checkRegular(*lockFd); !r)
        return r.error();
    auto bell = Doorbell::open(homeDir + "/doorbell");
    if (!bell)
        return bell.error();
    return std::unique_ptr<FileQuotaStore>(
        new FileQuotaStore(homeDir, clock, std::move(lockFd).value(), std::move(bell).value()));
}

void FileQuotaStore::waitForChange(std::uint32_t mark, std::chrono::nanoseconds timeout) const
{
    m_doorbell.wait(mark, timeout);
}

Result<void> FileQuotaStore::loadLimits()
{
    const std::uint32_t config = m_doorbell.counter(Doorbell::Counter::Config);
    if (m_limitsLoaded && config == m_configSeen) {
        if (!m_limitsFd.valid()) {
            // No limits file when we last looked: a process that saves one bumps the counter.
            return {};
        }
        auto st = m_limitsFd.stat();
        if (st && st->st_nlink > 0 && sameStat(*st, m_limitsStat))
            return {};
    }
    auto fd = Fd::open(limitsPath(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (!fd) {
        if (fd.error().sysErrno != ENOENT)
            return fd.error();
        m_limits = QuotaLimits {};
        m_limitsFd.reset();
        m_limitsLoaded = true;
        return {};
    }
    if (auto r = checkRegular(*fd); !r)
        return r.error();
    auto st = fd->stat();
    if (!st)
        return st.error();
    auto text = fd->readAll(4 * 1024 * 1024);
    if (!text)
        return text.error();
    auto parsed = QuotaLimits::fromJson(*text);
    if (!parsed) {
        m_limitsLoaded = false;
        return Error::make(ErrorKind::Corrupt, limitsPath(),
            "the limits file is invalid: " + parsed.error().message
                + "; it was left untouched (fix it, or restore limits.json.bak)");
    }
    m_limits = std::move(parsed).value();
    m_limitsFd = std::move(fd).value();
    m_limitsStat = *st;
    m_limitsLoaded = true;
    return {};
}

namespace {

// temp + fsync + rename: readers see the old or the new file, never a partial one.
Result<void> writeAtomically(const std::string& path, const std::string& content)
{
    const std::string tmp = path + "." + std::to_string(::getpid()) + ".tmp";
    ::unlink(tmp.c_str());
    {
        auto fd = Fd::open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
        if (!fd)
            return fd.error();
        auto w = fd->writeAll(content);
        if (w)
            w = fd->syncData();
        if (!w) {
            ::unlink(tmp.c_str());
            return w.error();
        }
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return Error::fromErrno(err, path, "cannot save");
    }
    return {};
}

} // namespace

Result<std::string> FileQuotaStore::prepareLimitsFile(const QuotaLimits& limits) const
{
    const std::string tmp = limitsPath() + "." + std::to_string(::getpid()) + ".tmp";
    ::unlink(tmp.c_str());
    auto fd = Fd::open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (!fd)
        return fd.error();
    auto w = fd->writeAll(limits.toJson());
    if (w)
        w = fd->syncData();
    if (!w) {
        ::unlink(tmp.c_str());
        return w.error();
    }
    return tmp;
}

Result<void> FileQuotaStore::openState()
{
    if (m_state) {
        auto st = m_state->fd().stat();
        if (st && st->st_nlink > 0)
            return {};
    }
    // O_NOATIME: every transaction reads right after a write, which would otherwise update
    // the access time each time. Only the owner may ask for it; fall back without it.
    auto fd = Fd::open(statePath(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOATIME, 0600);
    if (!fd && fd.error().sysErrno == EPERM)
        fd = Fd::open(statePath(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (!fd)
        return fd.error();
    if (auto r = checkRegular(*fd); !r)
        return r.error();
    m_state.emplace(std::move(fd).value());
    return {};
}

Error FileQuotaStore::moveAside(const Error& why)
{
    const std::string path = statePath();
    const std::string stamp = utcStamp(m_clock->unixSeconds());
    std::string aside;
    // link + unlink, not rename: an earlier corrupt file with the same name is never replaced.
    for (int i = 0; i < 100; ++i) {
        aside = path + ".corrupt-" + stamp + (i ? "-" + std::to_string(i) : "");
        if (::link(path.c_str(), aside.c_str()) == 0)
            break;
        if (errno != EEXIST) {
            return Error::make(ErrorKind::Corrupt, path,
                "the state file is corrupt (" + why.message + ") and could not be moved aside: "
                    + std::strerror(errno));
        }
    }
    ::unlink(path.c_str());
    m_state.reset();
    m_doorbell.bump(Doorbell::Counter::Config);
    return Error::make(ErrorKind::Corrupt, path,
        "the state file is corrupt (" + why.message + "); moved it aside to " + aside
            + " (kept for inspection). The next command starts from a fresh, conservative state; "
              "your limits in limits.json are kept");
}

Result<QuotaState> FileQuotaStore::readState(std::vector<HistoryEvent>& events, bool& changed)
{
    if (auto r = openState(); !r)
        return r.error();
    auto read = m_state->read();
    if (!read) {
        if (read.error().kind == ErrorKind::Corrupt)
            return moveAside(read.error());
        return read.error();
    }
    if (*read)
        return std::move(**read);
    // No state yet. With limits in place this is a lost state (deleted, or moved aside):
    // start conservatively so the lost window cannot be spent twice.
    QuotaState fresh;
    const std::int64_t now = nowMs(*m_clock);
    if (!m_limits.providers().empty()) {
        // Fencing tokens must keep growing across a reset: start above any earlier count
        // (good unless more than 1000 admissions per millisecond were ever made).
        fresh.nextFence = static_cast<std::uint64_t>(now) * 1000;
        for (const auto& [name, l] : m_limits.providers())
            QuotaPolicy::fillConservatively(fresh.ensureProvider(name), l, now);
        HistoryEvent e;
        e.timeMs = now;
        e.type = "reset";
        e.reason = "no state found while limits exist: started conservatively (windows full for one window)";
        events.push_back(std::move(e));
    }
    changed = true;
    return fresh;
}

Result<void> FileQuotaStore::run(const LimitsFunction* limitsFn, const TxFunction* fn, const PreparedLimits* prepared)
{
    auto guard = FlockGuard::lock(m_lockFd, true, std::chrono::steady_clock::now() + LOCK_TIMEOUT);
    if (!guard)
        return guard.error();
    const std::uint32_t config = m_doorbell.counter(Doorbell::Counter::Config);
    if (config != m_configSeen)
        m_state.reset(); // set aside by someone: reopen by name
    if (auto r = loadLimits(); !r)
        return r.error();
    m_configSeen = config;
    std::vector<HistoryEvent> events;
    bool changed = false;
    auto state = readState(events, changed);
    if (!state)
        return state.error();
    QuotaTransaction tx { *state, m_limits, std::move(events), changed, false };
    if (limitsFn) {
        QuotaLimits edited = m_limits;
        if (auto r = (*limitsFn)(edited, tx); !r)
            return r;
        if (!(edited == m_limits)) {
            // The durable file was written before we took the lock; it is only valid if
            // nobody changed the limits in between (then the caller prepares again).
            if (!prepared || !(prepared->base == m_limits) || !(prepared->edited == edited))
                return Error::make(ErrorKind::Busy, limitsPath(), "the limits changed meanwhile");
            if (::rename(prepared->tmpPath.c_str(), limitsPath().c_str()) != 0)
                return Error::fromErrno(errno, limitsPath(), "cannot save the limits");
            m_doorbell.bump(Doorbell::Counter::Config);
            m_limitsLoaded = false;
            if (auto r = loadLimits(); !r)
                return r;
        }
        tx.changed = true;
        tx.ring = true;
    }
    if (fn) {
        if (auto r = (*fn)(tx); !r)
            return r;
    }
    if (tx.changed) {
        if (auto w = m_state->write(tx.state); !w)
            return w.error();
    }
    // The history is best effort next to the state: a full disk must not stop admissions
    // that the state already recorded, so its error is returned only when nothing else failed.
    Result<void> history;
    auto appended = m_history.append(tx.events, m_doorbell.counter(Doorbell::Counter::History));
    if (!appended)
        history = appended.error();
    else if (*appended)
        m_doorbell.bump(Doorbell::Counter::History);
    guard->unlock();
    if (tx.ring)
        m_doorbell.ring();
    return history;
}

Result<void> FileQuotaStore::transact(const TxFunction& fn)
{
    return run(nullptr, &fn, nullptr);
}

Result<void> FileQuotaStore::updateLimits(const LimitsFunction& fn)
{
    // fsync can take seconds on a busy disk, so the new limits.json is written and synced
    // *before* taking state.lock, and only renamed into place under it (if the limits did
    // not change meanwhile; otherwise prepare again). Every caller keeps moving meanwhile.
    for (int attempt = 0; attempt < 8; ++attempt) {
        if (auto r = loadLimits(); !r)
            return r;
        PreparedLimits prepared { m_limits, m_limits, {} };
        QuotaState scratch;
        QuotaTransaction dryRun { scratch, prepared.base, {}, false, false };
        if (auto r = fn(prepared.edited, dryRun); !r)
            return r;
        if (!(prepared.edited == prepared.base)) {
            auto tmp = prepareLimitsFile(prepared.edited);
            if (!tmp)
                return tmp.error();
            prepared.tmpPath = *tmp;
        }
        auto r = run(&fn, nullptr, &prepared);
        if (!prepared.tmpPath.empty())
            ::unlink(prepared.tmpPath.c_str()); // still there only if not renamed
        if (!r && r.error().kind == ErrorKind::Busy && r.error().path == limitsPath())
            continue;
        if (r && !prepared.tmpPath.empty()) {
            if (auto dirFd = Fd::open(m_dir, O_RDONLY | O_DIRECTORY); dirFd)
                ::fsync(dirFd->get());
            // limits.json.bak: the last limits Tollgate wrote, to restore from if limits.json
            // is later broken by hand. Best effort: the limits themselves are already safe.
            (void)writeAtomically(limitsPath() + ".bak", prepared.edited.toJson());
        }
        return r;
    }
    return Error::make(ErrorKind::Busy, limitsPath(), "the limits kept changing under us; try again");
}

} // namespace tollgate
