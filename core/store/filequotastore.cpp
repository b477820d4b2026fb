#include "store/filequotastore.h"

#include "quota/quotapolicy.h"
#include "store/lockqueue.h"
#include "system/flockguard.h"
#include "system/homedir.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <limits>
#include <memory>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

namespace tollgate {

namespace {

constexpr const char* LOCK_NAME = "state.lock";
constexpr const char* STATE_NAME = "state.bin";
constexpr const char* LIMITS_NAME = "limits.json";

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
    return c.unixMs();
}

template <typename Names> std::string nameList(const Names& names)
{
    std::string out;
    std::size_t n = 0;
    for (const auto& name : names) {
        if (n == 5) {
            out += ", ...";
            break;
        }
        out += (n++ ? ", " : "") + name;
    }
    return out;
}

std::string providers(std::size_t n)
{
    return std::to_string(n) + (n == 1 ? " provider" : " providers");
}

void unlinkName(const Fd& home, const std::string& name)
{
    if (!name.empty())
        (void)::unlinkat(home.get(), name.c_str(), 0);
}

// Temp files of limit changes ("limits.json.<pid>.tmp", "limits.json.bak.<pid>.tmp") whose
// writer was killed before it renamed or removed them: removed by the next limit change, or
// they would pile up, one per kill. Only a regular file whose writer pid is gone (ESRCH) and
// that has not been touched for TEMP_GRACE: a home shared by several pid namespaces may hold a
// live writer that kill() cannot see, and a writer renames its file within seconds of
// writing it. Best effort: what cannot be listed or judged is left for later.
constexpr std::chrono::minutes TEMP_GRACE { 10 };

void sweepDeadLimitsTemps(const Fd& home, const Clock& clock)
{
    const int listFd = ::openat(home.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (listFd < 0)
        return;
    std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(listFd), &::closedir);
    if (!d) {
        ::close(listFd);
        return;
    }
    const std::string_view prefixes[] = { "limits.json.bak.", "limits.json." };
    const std::int64_t now = clock.unixSeconds();
    const std::int64_t grace = std::chrono::seconds(TEMP_GRACE).count();
    while (const dirent* e = ::readdir(d.get())) {
        const std::string_view name(e->d_name);
        if (!name.ends_with(".tmp"))
            continue;
        std::string_view pidText;
        for (const std::string_view prefix : prefixes) {
            if (name.size() > prefix.size() + 4 && name.substr(0, prefix.size()) == prefix) {
                pidText = name.substr(prefix.size(), name.size() - prefix.size() - 4);
                break;
            }
        }
        if (pidText.empty() || pidText.size() > 10
            || pidText.find_first_not_of("0123456789") != std::string_view::npos)
            continue;
        const long long writer = std::stoll(std::string(pidText));
        if (writer <= 0 || writer > std::numeric_limits<pid_t>::max() || writer == ::getpid())
            continue;
        if (::kill(static_cast<pid_t>(writer), 0) == 0 || errno != ESRCH)
            continue;
        const std::string entry(name);
        struct stat st
        {
        };
        if (::fstatat(home.get(), entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (now - static_cast<std::int64_t>(st.st_mtim.tv_sec) < grace)
            continue;
        (void)::unlinkat(home.get(), entry.c_str(), 0);
    }
}

} // namespace

Result<std::unique_ptr<FileQuotaStore>> FileQuotaStore::open(
    const std::string& homeDir, const Clock& clock, HomeDir::Create create)
{
    auto home = HomeDir::open(homeDir, create);
    if (!home)
        return home.error();
    // Every file of the home is looked at once up front, without opening it (nothing can
    // block): a FIFO, directory, socket or foreign file planted at any of them fails the
    // command before it changes anything, never half-way through a committed transaction.
    for (const char* name :
        { LOCK_NAME, STATE_NAME, LIMITS_NAME, HistoryLog::CURRENT, HistoryLog::PREVIOUS, "doorbell" }) {
        if (auto r = HomeDir::checkEntry(*home, name); !r)
            return r.error();
    }
    // The backups too: a FIFO or directory there would otherwise be rotated down the
    // generations like a backup (and a limit change committed) instead of refused.
    for (int g = 0; g < LIMITS_BACKUPS; ++g) {
        if (auto r = HomeDir::checkEntry(*home, backupName(g)); !r)
            return r.error();
    }
    auto lockFd = HomeDir::openFile(*home, LOCK_NAME, O_RDWR | O_CREAT, 0600);
    if (!lockFd)
        return lockFd.error();
    auto bell = Doorbell::open(*home);
    if (!bell)
        return bell.error();
    return std::unique_ptr<FileQuotaStore>(new FileQuotaStore(
        std::move(home).value(), clock, std::move(lockFd).value(), std::move(bell).value()));
}

std::vector<Error> FileQuotaStore::takeWarnings()
{
    return std::exchange(m_warnings, {});
}

void FileQuotaStore::waitForChange(std::uint32_t mark, std::chrono::nanoseconds timeout) const
{
    m_doorbell.wait(mark, timeout);
}

void FileQuotaStore::reopenBrokenDoorbell()
{
    if (!m_doorbell.broken())
        return;
    auto bell = Doorbell::open(m_home);
    if (!bell) {
        // The private words still work for this process alone: carry on (the flock is the
        // lock), waking others late, and try again at the next operation.
        if (!m_doorbellWarned) {
            Error w = bell.error();
            w.message += " (the doorbell was truncated under this process, which now wakes "
                         "waiters of other processes late; it will try again)";
            m_warnings.push_back(std::move(w));
            m_doorbellWarned = true;
        }
        return;
    }
    m_doorbell = std::move(bell).value();
    m_doorbellWarned = false;
    // Its counters started over (or are someone else's by now): what was cached on them is
    // looked at again by name.
    m_state.reset();
    m_limitsLoaded = false;
    m_history = HistoryLog(m_home);
}

std::string FileQuotaStore::backupName(int generation)
{
    return std::string(LIMITS_NAME) + ".bak" + (generation ? "." + std::to_string(generation) : "");
}

std::optional<Error> FileQuotaStore::lostLimits(const Fd& home, const QuotaState* state)
{
    const std::string limits = home.path() + "/" + LIMITS_NAME;
    std::string unreadable;
    for (int g = 0; g < LIMITS_BACKUPS; ++g) {
        const std::string name = backupName(g);
        const std::string path = home.path() + "/" + name;
        auto fd = HomeDir::openIfThere(home, name, O_RDONLY);
        Result<std::string> text = !fd ? Result<std::string>(fd.error())
            : *fd                      ? (*fd)->readAll(FileQuotaStore::MAX_LIMITS_BYTES)
                                       : Result<std::string>(std::string());
        if (fd && !*fd)
            continue;
        auto parsed = text ? QuotaLimits::fromJson(*text) : Result<QuotaLimits>(text.error());
        if (!parsed) {
            if (unreadable.empty())
                unreadable = name + " exists but cannot be used (" + parsed.error().describe() + ")";
            continue;
        }
        if (parsed->providers().empty() && unreadable.empty())
            break; // the newest limits were "none": nothing was lost
        std::vector<std::string> names;
        for (const auto& [n, l] : parsed->providers())
            names.push_back(n);
        return Error::make(ErrorKind::Corrupt, limits,
            "the limits file is missing, but " + name + " holds " + providers(names.size()) + " ("
                + nameList(names) + "): restore it with `cp " + path + " " + limits
                + "`, or remove the backups (" + home.path() + "/" + LIMITS_NAME + ".bak*) to start over");
    }
    if (!unreadable.empty()) {
        return Error::make(ErrorKind::Corrupt, limits,
            "the limits file is missing, and " + unreadable
                + ": restore limits.json by hand, or remove the backups (" + home.path() + "/" + LIMITS_NAME
                + ".bak*) to start over");
    }
    if (state && !state->providers.empty()) {
        std::vector<std::string> names;
        for (const auto& p : state->providers)
            names.push_back(p.name);
        return Error::make(ErrorKind::Corrupt, limits,
            "the limits file is missing, but the state still tracks " + providers(names.size()) + " ("
                + nameList(names) + "): the limits were lost. Restore limits.json from a copy, or remove "
                + home.path() + "/" + STATE_NAME + " to start over");
    }
    return std::nullopt;
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
    auto fd = HomeDir::openIfThere(m_home, LIMITS_NAME, O_RDONLY);
    if (!fd)
        return fd.error();
    if (!*fd) {
        m_limits = QuotaLimits {};
        m_limitsFd.reset();
        m_limitsLoaded = true;
        m_limitsMissing = true;
        return {};
    }
    auto st = (*fd)->stat();
    if (!st)
        return st.error();
    auto text = (*fd)->readAll(FileQuotaStore::MAX_LIMITS_BYTES);
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
    m_limitsFd = std::move(**fd);
    m_limitsStat = *st;
    m_limitsLoaded = true;
    m_limitsMissing = false;
    return {};
}

Result<void> FileQuotaStore::writeTemp(const std::string& name, const std::string& content) const
{
    unlinkName(m_home, name); // left by a killed process with our pid
    auto fd = HomeDir::openFile(m_home, name, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (!fd)
        return fd.error();
    auto w = fd->writeAll(content);
    if (w)
        w = fd->syncData();
    if (!w) {
        unlinkName(m_home, name);
        return w.error();
    }
    return {};
}

Result<void> FileQuotaStore::commitLimits(const PreparedLimits& prepared)
{
    // The commit: limits.json is replaced atomically.
    if (::renameat(m_home.get(), prepared.tmpName.c_str(), m_home.get(), LIMITS_NAME) != 0)
        return Error::fromErrno(errno, limitsPath(), "cannot save the limits");
    // Then the backups rotate (bak.1 -> bak.2, bak -> bak.1, new -> bak), each a rename, so a
    // kill at any point leaves every generation whole. Under the lock, so that two limit
    // changes never interleave their rotations. A failure here is a warning: the limits
    // themselves are saved.
    for (int g = LIMITS_BACKUPS - 1; g > 0; --g) {
        const std::string from = backupName(g - 1);
        const std::string to = backupName(g);
        if (::renameat(m_home.get(), from.c_str(), m_home.get(), to.c_str()) != 0 && errno != ENOENT) {
            m_warnings.push_back(Error::fromErrno(errno, m_dir + "/" + from,
                "the limits were saved, but the backups could not be rotated to " + to));
            return {};
        }
    }
    if (!prepared.backupTmpName.empty()) {
        const std::string bak = backupName(0);
        if (::renameat(m_home.get(), prepared.backupTmpName.c_str(), m_home.get(), bak.c_str()) != 0) {
            m_warnings.push_back(Error::fromErrno(
                errno, m_dir + "/" + bak, "the limits were saved, but their backup was not"));
        }
    }
    return {};
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
    auto fd = HomeDir::openFile(m_home, STATE_NAME, O_RDWR | O_CREAT | O_NOATIME, 0600);
    if (!fd && fd.error().sysErrno == EPERM)
        fd = HomeDir::openFile(m_home, STATE_NAME, O_RDWR | O_CREAT, 0600);
    if (!fd)
        return fd.error();
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
        aside = std::string(STATE_NAME) + ".corrupt-" + stamp + (i ? "-" + std::to_string(i) : "");
        if (::linkat(m_home.get(), STATE_NAME, m_home.get(), aside.c_str(), 0) == 0)
            break;
        if (errno != EEXIST) {
            return Error::make(ErrorKind::Corrupt, path,
                "the state file is corrupt (" + why.message
                    + ") and could not be moved aside: " + std::strerror(errno));
        }
    }
    ::unlinkat(m_home.get(), STATE_NAME, 0);
    m_state.reset();
    m_doorbell.bump(Doorbell::Counter::Config);
    return Error::make(ErrorKind::Corrupt, path,
        "the state file is corrupt (" + why.message + "); moved it aside to " + m_dir + "/" + aside
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
        // Tickets too: a waiter still alive keeps its old ticket, and a new one must never be
        // given it (a slot handed to the new one would be found by the old: QuotaPolicy::handOff).
        fresh.nextTicket = static_cast<std::uint64_t>(now) * 1000;
        for (const auto& [name, l] : m_limits.providers())
            QuotaPolicy::fillConservatively(fresh.ensureProvider(name), l, now);
        HistoryEvent e;
        e.timeMs = now;
        e.type = EventType::Reset;
        e.reason = "no state found while limits exist: started conservatively (windows full for one window)";
        events.push_back(std::move(e));
    }
    changed = true;
    return fresh;
}

void FileQuotaStore::appendHistory(std::vector<HistoryEvent> events)
{
    if (events.empty())
        return;
    const std::size_t ours = events.size();
    const std::int64_t firstMs = events.front().timeMs;
    const Doorbell::HistoryGap gap = m_doorbell.takeHistoryGap();
    if (gap.lost != 0) {
        HistoryEvent e;
        e.timeMs = firstMs;
        e.type = EventType::Gap;
        e.lost = gap.lost;
        e.sinceMs = gap.sinceMs;
        e.reason = std::to_string(gap.lost) + " event(s) could not be written"
            + (gap.sysErrno ? std::string(" (") + std::strerror(gap.sysErrno) + ")" : std::string());
        events.insert(events.begin(), std::move(e));
    }
    auto appended = m_history.append(events, m_doorbell.counterWord(Doorbell::Counter::History));
    if (!appended) {
        // After the commit: the deed is done, so this is a warning, and the loss (with the
        // gap we took, if any) is counted where the next appender (any process) will find it
        // and write the gap marker.
        if (gap.lost != 0)
            m_doorbell.addHistoryGap(gap.lost, gap.sinceMs, gap.sysErrno);
        m_doorbell.addHistoryGap(static_cast<std::uint32_t>(ours), firstMs, appended.error().sysErrno);
        Error w = appended.error();
        w.message += "; the change itself was saved, but " + std::to_string(ours)
            + " history event(s) were not (the history will record the gap)";
        m_warnings.push_back(std::move(w));
    }
}

Result<void> FileQuotaStore::run(const LimitsFunction* limitsFn, const TxFunction* fn,
    const PreparedLimits* prepared, const StoreWait& wait)
{
    auto guard = lockState(wait);
    if (!guard)
        return guard.error();
    // Every way out of the transaction (errors included) hands the lock over.
    struct HandOver
    {
        FlockGuard& guard;
        Doorbell& bell;
        ~HandOver()
        {
            if (guard.locked()) {
                guard.unlock();
                bell.lockReleased();
            }
        }
    } handOver { *guard, m_doorbell };
    const std::uint32_t config = m_doorbell.counter(Doorbell::Counter::Config);
    if (config != m_configSeen)
        m_state.reset(); // set aside by someone: reopen by name
    if (auto r = loadLimits(); !r)
        return r.error();
    m_configSeen = config;
    if (m_limitsMissing) {
        // Lost limits are not "no limits": refuse before reading (and perhaps setting aside)
        // the state, and before any limits change could overwrite the last copy.
        if (auto lost = lostLimits(m_home, nullptr))
            return *lost;
    }
    std::vector<HistoryEvent> events;
    bool changed = false;
    auto state = readState(events, changed);
    if (!state)
        return state.error();
    if (m_limitsMissing) {
        if (auto lost = lostLimits(m_home, &*state))
            return *lost;
    }
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
            if (auto r = commitLimits(*prepared); !r)
                return r;
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
    // The state (and limits.json) are the commit. The history comes after it, best effort:
    // a full disk or a broken history file must not make a caller believe that an admission,
    // a backoff or a limit change did not happen (see appendHistory). It is appended after
    // the unlock (see HistoryLog), so the next transaction runs meanwhile.
    guard->unlock();
    m_doorbell.lockReleased();
    if (tx.ring)
        m_doorbell.ring();
    appendHistory(std::move(tx.events));
    return {};
}

Result<FlockGuard> FileQuotaStore::lockState(const StoreWait& wait)
{
    const auto now = std::chrono::steady_clock::now();
    auto deadline = now + LOCK_TIMEOUT;
    if (wait.deadline < deadline)
        deadline = std::max(wait.deadline, now + MIN_LOCK_WAIT);
    // Holders keep state.lock for microseconds. Waiters that poll wake far too often or far
    // too late; waiters that all sleep on one word wake, fail and sleep again. The queue hands
    // the flock to the longest waiter while it is already running (see LockQueue).
    FlockGuard held;
    auto tryLock = [this, &held]() -> Result<bool> {
        auto r = FlockGuard::tryLock(m_lockFd, true);
        if (r) {
            held = std::move(*r);
            return true;
        }
        if (r.error().kind == ErrorKind::Busy)
            return false;
        return r.error();
    };
    LockQueue queue(m_doorbell.mapped());
    auto got = queue.acquire(tryLock, deadline, wait.cancel);
    if (!got)
        return got.error();
    if (!*got) {
        if (wait.cancel && wait.cancel->load()) {
            // EINTR tells the caller that its own cancel ended the wait, not the store.
            Error e = Error::make(
                ErrorKind::Timeout, m_lockFd.path(), "interrupted while waiting for the file lock");
            e.sysErrno = EINTR;
            return e;
        }
        return Error::make(ErrorKind::Timeout, m_lockFd.path(), "timed out waiting for the file lock");
    }
    return held;
}

Result<void> FileQuotaStore::transact(const StoreWait& wait, const TxFunction& fn)
{
    reopenBrokenDoorbell();
    return run(nullptr, &fn, nullptr, wait);
}

Result<void> FileQuotaStore::updateLimits(const LimitsFunction& fn)
{
    // fsync can take seconds on a busy disk, so the new limits.json (and its backup) are
    // written and synced *before* taking state.lock, and only renamed into place under it
    // (if the limits did not change meanwhile; otherwise prepare again). Every caller keeps
    // moving meanwhile.
    reopenBrokenDoorbell();
    sweepDeadLimitsTemps(m_home, *m_clock);
    const std::string suffix = "." + std::to_string(::getpid()) + ".tmp";
    for (int attempt = 0; attempt < 8; ++attempt) {
        if (auto r = loadLimits(); !r)
            return r;
        PreparedLimits prepared { m_limits, m_limits, {}, {} };
        QuotaState scratch;
        QuotaTransaction dryRun { scratch, prepared.base, {}, false, false };
        if (auto r = fn(prepared.edited, dryRun); !r)
            return r;
        if (!(prepared.edited == prepared.base)) {
            const std::string content = prepared.edited.toJson();
            prepared.tmpName = std::string(LIMITS_NAME) + suffix;
            if (auto w = writeTemp(prepared.tmpName, content); !w)
                return w;
            prepared.backupTmpName = backupName(0) + suffix;
            if (auto w = writeTemp(prepared.backupTmpName, content); !w) {
                unlinkName(m_home, prepared.tmpName);
                return w;
            }
        }
        auto r = run(&fn, nullptr, &prepared, StoreWait {});
        // Still there only if not renamed.
        unlinkName(m_home, prepared.tmpName);
        unlinkName(m_home, prepared.backupTmpName);
        if (!r && r.error().kind == ErrorKind::Busy && r.error().path == limitsPath())
            continue;
        if (r && !prepared.tmpName.empty()) {
            if (auto synced = HomeDir::sync(m_home); !synced)
                m_warnings.push_back(synced.error());
        }
        return r;
    }
    return Error::make(ErrorKind::Busy, limitsPath(), "the limits kept changing under us; try again");
}

} // namespace tollgate
