#include "quotaobserver.h"

#include "filequotastore.h"
#include "historyreader.h"
#include "homedir.h"
#include "homewatcher.h"
#include "lockfile.h"
#include "quotalimiter.h"
#include "quotapeek.h"

#include <QDir>
#include <QFile>
#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tollgate::ui {

namespace {

// A shared flock on state.lock is held for the few microseconds of two preads; a writer that
// keeps the lock this long is stopped, and the previous snapshot stays on screen.
constexpr auto READ_LOCK_TIMEOUT = std::chrono::milliseconds(2000);
// Lock files are removed by "clean" only once older than this (LockFile's stale rule needs a
// positive age), so a lock whose holder died a moment ago is re-judged under its flock.
constexpr std::int64_t CLEAN_AGE_SECONDS = 1;

QString qs(const std::string& s)
{
    return QString::fromStdString(s);
}

std::string ss(const QString& s)
{
    return s.toStdString();
}

qint64 msNow(const Clock& clock)
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock.now().time_since_epoch()).count();
}

quint64 inodeOf(const QString& path)
{
    struct stat st
    {
    };
    const QByteArray native = QFile::encodeName(path);
    return ::lstat(native.constData(), &st) == 0 ? static_cast<quint64>(st.st_ino) : 0;
}

void readQuota(const std::string& home, DashboardSnapshot& s)
{
    auto view = QuotaPeek::read(home, READ_LOCK_TIMEOUT);
    if (!view) {
        s.problem = qs(view.error().describe());
        return;
    }
    s.limits = std::move(view->limits);
    s.corruptFile = qs(view->corruptFile);
    s.corruptReason = qs(view->corruptReason);
    if (view->state) {
        s.state = std::move(*view->state);
        s.hasState = true;
    }
}

void addSlotHolders(DashboardSnapshot& s, const ProcessProbe& probe)
{
    for (const ProviderState& p : s.state.providers) {
        const ProviderLimits* l = s.limits.find(p.name);
        for (const Slot& slot : p.slots) {
            HolderInfo h;
            h.kind = HolderKind::Slot;
            h.provider = qs(p.name);
            h.fence = slot.fence;
            h.key = QStringLiteral("slot:%1:%2").arg(h.provider).arg(slot.fence);
            h.pid = slot.pid;
            h.who = slot.pid == 0 ? QObject::tr("(placeholder after a lost state)") : qs(slot.caller);
            h.model = qs(slot.model);
            h.sinceMs = slot.acquiredMs;
            const bool alive
                = slot.pid > 0 && probe.liveness(slot.pid, slot.acquiredMs / 1000) == Liveness::Alive;
            h.health = alive ? HolderHealth::Alive : HolderHealth::Dead;
            if (alive && l && s.nowMs - slot.acquiredMs > l->maxHoldMs)
                h.health = HolderHealth::Overdue;
            if (alive)
                h.commandLine = qs(probe.commandLine(slot.pid));
            s.holders.push_back(std::move(h));
        }
    }
}

void addLockHolders(DashboardSnapshot& s, const QStringList& lockDirs, qint64 staleSeconds,
    const ProcessProbe& probe, const Clock& clock)
{
    const QString ownLock = QDir::cleanPath(s.home + QStringLiteral("/state.lock"));
    for (const QString& dirPath : lockDirs) {
        QDir dir(dirPath);
        if (!dir.exists()) {
            s.lockDirProblems.append(QObject::tr("%1: no such directory").arg(dirPath));
            continue;
        }
        const QFileInfoList entries = dir.entryInfoList(
            { QStringLiteral("*.lock") }, QDir::Files | QDir::Hidden | QDir::System, QDir::Name);
        for (const QFileInfo& fi : entries) {
            const QString path = QDir::cleanPath(fi.absoluteFilePath());
            if (path == ownLock)
                continue;
            auto lock = LockFile::open(ss(path), clock, probe);
            if (!lock)
                continue;
            auto st = lock->status(staleSeconds);
            if (!st || !st->exists)
                continue; // released between the listing and the look
            HolderInfo h;
            h.kind = HolderKind::LockFile;
            h.key = QStringLiteral("lock:") + path;
            h.path = path;
            h.sinceMs = (clock.unixSeconds() - st->ageSeconds) * 1000;
            if (st->corrupt) {
                h.health = HolderHealth::Corrupt;
                h.problem = qs(st->corruptReason);
            } else {
                h.pid = st->info.pid;
                h.who = qs(st->info.tag);
                h.sinceMs = st->info.timestamp * 1000;
                h.health = st->stale ? HolderHealth::Stale
                                     : (st->holderAlive ? HolderHealth::Alive : HolderHealth::Dead);
                if (st->holderAlive)
                    h.commandLine = qs(probe.commandLine(h.pid));
            }
            s.holders.push_back(std::move(h));
        }
    }
}

} // namespace

QuotaObserver::QuotaObserver(QString home, QStringList lockDirs, QObject* parent)
    : QObject(parent)
    , m_home(std::move(home))
    , m_lockDirs(std::move(lockDirs))
{
}

QuotaObserver::~QuotaObserver() = default;

QString QuotaObserver::who()
{
    return QStringLiteral("tollgate-dashboard (pid %1)").arg(ProcessProbe::selfPid());
}

DashboardSnapshot QuotaObserver::readSnapshot(const QString& home, const QStringList& lockDirs,
    qint64 staleSeconds, const ProcessProbe& probe, const Clock& clock)
{
    DashboardSnapshot s;
    s.home = home;
    s.nowMs = msNow(clock);
    const std::string dir = ss(home);
    struct stat st
    {
    };
    if (::lstat(dir.c_str(), &st) != 0 && errno == ENOENT) {
        s.status = HomeStatus::Missing;
    } else if (auto ok = HomeDir::check(dir); !ok) {
        s.status = HomeStatus::Unusable;
        s.problem = qs(ok.error().describe());
    } else {
        readQuota(dir, s);
        const bool any
            = !s.limits.providers().empty() || !s.state.providers.empty() || !s.corruptFile.isEmpty();
        s.status = any ? HomeStatus::Ready : HomeStatus::Empty;
        addSlotHolders(s, probe);
    }
    addLockHolders(s, lockDirs, staleSeconds, probe, clock);
    return s;
}

void QuotaObserver::start()
{
    m_watcher = new HomeWatcher(m_home, m_lockDirs, HomeWatcher::Mode::Notify, this);
    connect(m_watcher, &HomeWatcher::changed, this, &QuotaObserver::refresh);
    m_refreshTimer = new QTimer(this);
    m_refreshTimer->setInterval(REFRESH_MS);
    connect(m_refreshTimer, &QTimer::timeout, this, &QuotaObserver::refresh);
    m_refreshTimer->start();
    refresh();
}

void QuotaObserver::refresh()
{
    DashboardSnapshot s = readSnapshot(m_home, m_lockDirs, m_staleSeconds, m_probe, m_clock);
    const quint64 ino = s.status == HomeStatus::Missing ? 0 : inodeOf(m_home);
    if (ino != m_homeInode) {
        // A different directory (deleted and re-created, or new): its history starts over.
        const bool hadOne = m_homeInode != 0 || m_history;
        m_homeInode = ino;
        m_history.reset();
        if (hadOne)
            Q_EMIT historyReset();
    }
    Q_EMIT snapshotReady(s);
    pollHistory();
    Q_EMIT refreshed();
}

void QuotaObserver::pollHistory()
{
    if (m_homeInode == 0)
        return;
    if (!m_history)
        m_history = std::make_unique<HistoryReader>(ss(m_home));
    auto batch = m_history->poll();
    if (batch && !batch->events.empty())
        Q_EMIT historyAppended(batch->events);
}

void QuotaObserver::setLockDirs(const QStringList& lockDirs)
{
    m_lockDirs = lockDirs;
    if (m_watcher)
        m_watcher->setLockDirs(lockDirs);
    refresh();
}

void QuotaObserver::setStaleSeconds(qint64 seconds)
{
    m_staleSeconds = seconds;
    refresh();
}

QString QuotaObserver::openLimiter()
{
    const quint64 ino = inodeOf(m_home);
    if (ino == 0)
        return tr("there is no Tollgate home at %1 yet; start a caller first").arg(m_home);
    if (m_limiter && ino == m_storeInode)
        return {};
    m_limiter.reset();
    m_store.reset();
    auto store = FileQuotaStore::open(ss(m_home), m_clock);
    if (!store)
        return qs(store.error().describe());
    m_store = std::move(store).value();
    m_limiter = std::make_unique<QuotaLimiter>(*m_store, m_clock, m_probe);
    m_storeInode = ino;
    return {};
}

void QuotaObserver::finish(ActionResult result)
{
    Q_EMIT actionFinished(result);
    refresh();
}

void QuotaObserver::setLimits(const QString& provider, const ProviderLimits& limits)
{
    ActionResult r;
    r.action = QStringLiteral("limits");
    if (QString why = openLimiter(); !why.isEmpty()) {
        r.message = why;
        return finish(r);
    }
    auto done = m_limiter->setLimits(ss(provider), limits, ss(who()));
    r.ok = done.ok();
    r.message = done ? tr("Limits of %1 saved.").arg(provider) : qs(done.error().describe());
    finish(r);
}

void QuotaObserver::pause(const QString& provider, const QString& reason)
{
    ActionResult r;
    r.action = QStringLiteral("pause");
    if (QString why = openLimiter(); !why.isEmpty()) {
        r.message = why;
        return finish(r);
    }
    auto done = m_limiter->pause(ss(provider), ss(reason), ss(who()));
    r.ok = done.ok();
    r.message = done ? (provider.isEmpty() ? tr("All callers paused.") : tr("%1 paused.").arg(provider))
                     : qs(done.error().describe());
    finish(r);
}

void QuotaObserver::resume(const QString& provider)
{
    ActionResult r;
    r.action = QStringLiteral("resume");
    if (QString why = openLimiter(); !why.isEmpty()) {
        r.message = why;
        return finish(r);
    }
    auto done = m_limiter->resume(ss(provider), ss(who()));
    r.ok = done.ok();
    r.message = done ? (provider.isEmpty() ? tr("All callers resumed.") : tr("%1 resumed.").arg(provider))
                     : qs(done.error().describe());
    finish(r);
}

void QuotaObserver::resetBackoff(const QString& provider)
{
    ActionResult r;
    r.action = QStringLiteral("reset-backoff");
    if (QString why = openLimiter(); !why.isEmpty()) {
        r.message = why;
        return finish(r);
    }
    auto done = m_limiter->resetBackoff(ss(provider), ss(who()));
    r.ok = done.ok();
    r.message = done ? tr("Backoff of %1 reset.").arg(provider) : qs(done.error().describe());
    finish(r);
}

void QuotaObserver::releaseHolder(const QString& key, bool confirmed)
{
    ActionResult r;
    r.action = QStringLiteral("release");
    r.holderKey = key;
    if (key.startsWith(QLatin1String("slot:"))) {
        // Provider names may hold ':'; the fence is after the last one.
        const int cut = key.lastIndexOf(QLatin1Char(':'));
        const QString provider = key.mid(5, cut - 5);
        const quint64 fence = key.mid(cut + 1).toULongLong();
        if (QString why = openLimiter(); !why.isEmpty()) {
            r.message = why;
            return finish(r);
        }
        auto snap = m_limiter->snapshot();
        if (!snap) {
            r.message = qs(snap.error().describe());
            return finish(r);
        }
        const ProviderState* p = snap->state.provider(ss(provider));
        const Slot* slot = nullptr;
        if (p) {
            auto it = std::find_if(
                p->slots.begin(), p->slots.end(), [&](const Slot& s) { return s.fence == fence; });
            slot = it == p->slots.end() ? nullptr : &*it;
        }
        if (!slot) {
            r.ok = true;
            r.message = tr("That slot of %1 is already free.").arg(provider);
            return finish(r);
        }
        if (!confirmed && slot->pid > 0
            && m_probe.liveness(slot->pid, slot->acquiredMs / 1000) == Liveness::Alive) {
            r.needsConfirmation = true;
            r.pid = slot->pid;
            r.commandLine = qs(m_probe.commandLine(slot->pid));
            r.message
                = tr("The holder of this %1 slot, pid %2, is still running.").arg(provider).arg(slot->pid);
            Q_EMIT actionFinished(r);
            return;
        }
        auto done = m_limiter->releaseSlot(ss(provider), fence, ss(who()));
        r.ok = done.ok();
        r.message = !done ? qs(done.error().describe())
            : *done       ? tr("Slot %1 of %2 released.").arg(fence).arg(provider)
                          : tr("That slot of %1 is already free.").arg(provider);
        return finish(r);
    }
    if (key.startsWith(QLatin1String("lock:"))) {
        const QString path = key.mid(5);
        auto lock = LockFile::open(ss(path), m_clock, m_probe);
        if (!lock) {
            r.message = qs(lock.error().describe());
            return finish(r);
        }
        auto st = lock->status(m_staleSeconds);
        if (!st) {
            r.message = qs(st.error().describe());
            return finish(r);
        }
        if (!st->exists) {
            r.ok = true;
            r.message = tr("%1 is already free.").arg(path);
            return finish(r);
        }
        if (!confirmed && !st->corrupt && st->holderAlive) {
            r.needsConfirmation = true;
            r.pid = st->info.pid;
            r.commandLine = qs(m_probe.commandLine(st->info.pid));
            r.message = tr("The holder of %1, pid %2, is still running.").arg(path).arg(st->info.pid);
            Q_EMIT actionFinished(r);
            return;
        }
        // A dead holder's lock is removed by clean(), which re-judges it under the flock of that
        // very inode: a fresh lock that replaced it in the meantime is never removed.
        if (!st->corrupt && !st->holderAlive && st->ageSeconds > CLEAN_AGE_SECONDS) {
            auto cleaned = lock->clean(CLEAN_AGE_SECONDS);
            if (cleaned && cleaned->removedLock) {
                r.ok = true;
                r.message = tr("%1 released (its holder was dead).").arg(path);
                return finish(r);
            }
        }
        auto done = lock->release(0, true);
        r.ok = done.ok() && done->state == ReleaseState::Released;
        r.message = !done ? qs(done.error().describe())
            : r.ok        ? tr("%1 released.").arg(path)
                          : tr("%1 is already free.").arg(path);
        if (done && done->state == ReleaseState::NotLocked)
            r.ok = true;
        return finish(r);
    }
    r.message = tr("Unknown holder.");
    finish(r);
}

void QuotaObserver::cleanStale()
{
    ActionResult r;
    r.action = QStringLiteral("clean-stale");
    int slots = 0;
    int locks = 0;
    QStringList problems;
    if (inodeOf(m_home) != 0) {
        if (QString why = openLimiter(); !why.isEmpty()) {
            problems.append(why);
        } else if (auto n = m_limiter->releaseStale(false, ss(who())); n) {
            slots = *n;
        } else {
            problems.append(qs(n.error().describe()));
        }
    }
    const DashboardSnapshot s = readSnapshot(m_home, m_lockDirs, m_staleSeconds, m_probe, m_clock);
    for (const HolderInfo& h : s.holders) {
        if (h.kind != HolderKind::LockFile
            || (h.health != HolderHealth::Dead && h.health != HolderHealth::Stale))
            continue;
        auto lock = LockFile::open(ss(h.path), m_clock, m_probe);
        if (!lock)
            continue;
        auto cleaned = lock->clean(CLEAN_AGE_SECONDS);
        if (!cleaned)
            problems.append(qs(cleaned.error().describe()));
        else if (cleaned->removedLock)
            ++locks;
    }
    r.ok = problems.isEmpty();
    r.message = tr("Released %n dead slot(s) or waiter(s)", nullptr, slots)
        + tr(" and %n lock file(s).", nullptr, locks);
    if (!problems.isEmpty())
        r.message += QLatin1Char(' ') + problems.join(QStringLiteral("; "));
    finish(r);
}

} // namespace tollgate::ui
