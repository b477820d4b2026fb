#include "quotaobserver.h"

#include "backend/quotalimiter.h"
#include "backend/storefactory.h"
#include "base/textsanitizer.h"
#include "changefeedwatcher.h"
#include "corebridge.h"
#include "homewatcher.h"
#include "lock/lockfile.h"
#include "quota/capacity.h"
#include "quota/holderstatus.h"
#include "quota/quotapolicy.h"
#include "quotaactions.h"
#include "system/hostidentity.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHash>
#include <QScopeGuard>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <optional>
#include <unistd.h>

namespace tollgate::ui {

namespace {

// A shared flock on state.lock is held for the few microseconds of two preads; a writer that
// keeps the lock this long is stopped, and the previous snapshot stays on screen.
constexpr auto READ_LOCK_TIMEOUT = std::chrono::milliseconds(2000);
// The window looks a few times a second; a writer's turn matters more than its wake-ups.
constexpr auto READ_LOCK_PAUSE = std::chrono::microseconds(4000);

// The home part of a snapshot through the store's read side (the reader was opened, and the
// home checked, by the caller).
// false: the home is not there (a Redis home where nothing ran yet).
bool readQuota(QuotaReader& reader, DashboardSnapshot& s)
{
    auto view = reader.snapshot();
    if (!view && view.error().kind == ErrorKind::NotFound)
        return false;
    if (!view) {
        s.problem = qs(view.error().describe());
        return true;
    }
    s.limits = std::move(view->limits);
    s.corruptFile = qs(view->corruptFile);
    s.limitsCorrupt = view->limitsCorrupt;
    s.corruptReason = qs(view->corruptReason);
    if (view->state) {
        s.state = std::move(*view->state);
        s.hasState = true;
    }
    return true;
}

HolderHealth slotHealth(const Slot& slot, const ProviderLimits* l, qint64 nowMs, const ProcessProbe& probe)
{
    // The core's judgement (the limiter's and status's): a holder of another pid namespace is
    // alive while its lease runs, never judged by a pid of ours.
    const ProviderLimits none;
    switch (HolderStatus::judge(slot, l ? *l : none, nowMs, probe).state) {
    case HolderState::Gone:
        return HolderHealth::Dead;
    case HolderState::Overdue:
        return l ? HolderHealth::Overdue : HolderHealth::Alive; // no limits: no maximum hold to pass
    case HolderState::Placeholder:
    case HolderState::Alive:
    case HolderState::Leased:
        break;
    }
    return HolderHealth::Alive;
}

void fillCommandLine(HolderInfo& h, const Slot& slot, const ProcessProbe& probe)
{
    h.commandLine.clear();
    if (h.health != HolderHealth::Dead && slot.pid > 0 && QuotaPolicy::sameNamespace(slot.pidNs, probe))
        h.commandLine = qs(probe.commandLine(slot.pid));
}

bool sameSlots(const std::vector<Slot>& a, const std::vector<Slot>& b)
{
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Slot& x, const Slot& y) {
        return x.fence == y.fence && x.pid == y.pid && x.acquiredMs == y.acquiredMs && x.tokens == y.tokens
            && x.caller == y.caller && x.model == y.model && x.pidNs == y.pidNs
            && x.startTicks == y.startTicks && x.leaseUntilMs == y.leaseUntilMs;
    });
}

// The slot holders shown so far: one HolderInfo per slot of `state`, in its order.
struct PreviousSlots
{
    const QuotaState* state = nullptr;
    const QuotaLimits* limits = nullptr;
    const QList<HolderInfo>* holders = nullptr;
};

// Appends one HolderInfo per slot. A provider whose slots and limits are those shown keeps its
// rows as they are (the liveness round re-judges them with time); otherwise a known fence keeps
// its texts (a fence names one admission for good) and only its health is judged again.
// Returns true (and appends nothing) when every row would be kept as it is.
bool addSlotHolders(DashboardSnapshot& s, const ProcessProbe& probe, const PreviousSlots& previous = {})
{
    std::map<std::string, std::pair<const ProviderState*, qsizetype>> before; // name -> (state, first row)
    if (previous.state && previous.holders) {
        qsizetype at = 0;
        for (const ProviderState& p : previous.state->providers) {
            before.emplace(p.name, std::make_pair(&p, at));
            at += static_cast<qsizetype>(p.slots.size());
        }
        if (at != previous.holders->size())
            before.clear(); // not built from that state: judge everything
    }
    // Kept: every row is the row at the same place before (checkLiveness goes by position).
    bool allKept = previous.holders && (!before.empty() || previous.holders->isEmpty());
    const auto unchanged = [&](const ProviderState& p, const ProviderState& old) {
        const ProviderLimits* l = s.limits.find(p.name);
        const ProviderLimits* oldLimits = previous.limits->find(p.name);
        return (l == nullptr) == (oldLimits == nullptr) && (!l || *l == *oldLimits)
            && sameSlots(old.slots, p.slots);
    };
    if (allKept) {
        // The common case (a write that changed no slot): nothing to build or copy.
        qsizetype at = 0;
        for (const ProviderState& p : s.state.providers) {
            if (p.slots.empty())
                continue;
            const auto known = before.find(p.name);
            if (known == before.end() || known->second.second != at || !unchanged(p, *known->second.first)) {
                allKept = false;
                break;
            }
            at += static_cast<qsizetype>(p.slots.size());
        }
        if (allKept && at == previous.holders->size())
            return true;
        allKept = false;
    }
    for (const ProviderState& p : s.state.providers) {
        const ProviderLimits* l = s.limits.find(p.name);
        const auto known = before.find(p.name);
        const ProviderState* old = known == before.end() ? nullptr : known->second.first;
        if (old) {
            if (unchanged(p, *old)) {
                const qsizetype first = known->second.second;
                for (qsizetype i = 0; i < static_cast<qsizetype>(p.slots.size()); ++i)
                    s.holders.push_back(previous.holders->at(first + i));
                continue;
            }
        }
        QHash<quint64, const HolderInfo*> byFence;
        if (old) {
            for (qsizetype i = 0; i < static_cast<qsizetype>(old->slots.size()); ++i)
                byFence.insert(old->slots[i].fence, &previous.holders->at(known->second.second + i));
        }
        const QString provider = qs(p.name);
        for (const Slot& slot : p.slots) {
            const HolderHealth health = slotHealth(slot, l, s.nowMs, probe);
            if (const HolderInfo* was = byFence.value(slot.fence);
                was && was->pid == slot.pid && was->sinceMs == slot.acquiredMs) {
                HolderInfo h = *was;
                if (h.health != health) {
                    h.health = health;
                    fillCommandLine(h, slot, probe);
                }
                s.holders.push_back(std::move(h));
                continue;
            }
            HolderInfo h;
            h.kind = HolderKind::Slot;
            h.provider = provider;
            h.fence = slot.fence;
            h.key = QStringLiteral("slot:%1:%2").arg(provider).arg(slot.fence);
            h.pid = slot.pid;
            // The codec gives slots of this host our pid namespace; any other is elsewhere.
            if (!slot.host.empty() && !QuotaPolicy::sameNamespace(slot.pidNs, probe))
                h.host = qs(HostIdentity::shortName(slot.host)); // its name (core's words)
            h.who = slot.pid == 0 ? QObject::tr("(placeholder after a lost state)") : qs(slot.caller);
            h.model = qs(slot.model);
            h.sinceMs = slot.acquiredMs;
            h.health = health;
            fillCommandLine(h, slot, probe);
            s.holders.push_back(std::move(h));
        }
    }
    return false;
}

// One lock file as the core judges it; false when it is gone or unreadable (the next look
// shows it).
bool judgeLockFile(const QString& path, qint64 staleSeconds, const ProcessProbe& probe, const Clock& clock,
    HolderInfo& h, bool* suspicious = nullptr)
{
    auto lock = LockFile::open(ss(path), clock, probe);
    if (!lock)
        return false;
    // One read gives the identity (inode and bytes) and the core's judgement of them, so
    // an action on the row names exactly the lock that was judged.
    auto st = lock->status(staleSeconds);
    // An unreadable lock (another user's 0600 file) has no holder to show or act on: left out,
    // as before LockFile reported it held.
    if (!st || !st->exists || st->unreadable)
        return false;
    h = HolderInfo();
    h.kind = HolderKind::LockFile;
    h.key = QStringLiteral("lock:") + path;
    h.path = path;
    h.lock = st->identity;
    // From the core's age, which is never negative and never trusts a timestamp in the
    // future: the stored timestamp times 1000 overflows for a forged 2^63-1.
    const qint64 now = clock.unixMs();
    h.sinceMs = now - std::min<std::int64_t>(st->ageSeconds, now / 1000) * 1000;
    if (st->corrupt) {
        h.health = HolderHealth::Corrupt;
        h.problem = qs(st->corruptReason);
    } else {
        h.pid = st->info.pid;
        h.who = qs(st->info.tag);
        h.health
            = st->stale ? HolderHealth::Stale : (st->holderAlive ? HolderHealth::Alive : HolderHealth::Dead);
        if (st->holderAlive)
            h.commandLine = qs(probe.commandLine(h.pid));
    }
    if (suspicious)
        *suspicious = !st->suspicion.empty();
    return true;
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
            HolderInfo h;
            if (judgeLockFile(path, staleSeconds, probe, clock, h))
                s.holders.push_back(std::move(h));
        }
    }
}

// The home part of a snapshot: status, quota view, slot holders.
// `kept`: a reader to use again (a Redis home's: its connection stays open between refreshes);
// null: one made for this read.
bool readHomePart(DashboardSnapshot& s, const ProcessProbe& probe, const PreviousSlots& previous = {},
    std::unique_ptr<QuotaReader>* kept = nullptr)
{
    FileQuotaReader::Options options;
    options.lockTimeout = READ_LOCK_TIMEOUT;
    options.longestPause = READ_LOCK_PAUSE;
    Result<std::unique_ptr<QuotaReader>> reader = kept && *kept
        ? Result<std::unique_ptr<QuotaReader>>(std::move(*kept))
        : StoreFactory::openReader(ss(s.home), options);
    // Handed back however this read ends (only a reader that opened is kept).
    const auto giveBack = qScopeGuard([&] {
        if (kept && reader)
            *kept = std::move(reader).value();
    });
    if (!reader && reader.error().kind == ErrorKind::NotFound) {
        s.status = HomeStatus::Missing;
    } else if (!reader) {
        s.status = HomeStatus::Unusable;
        s.problem = qs(reader.error().describe());
    } else {
        if (!readQuota(**reader, s)) {
            s.status = HomeStatus::Missing;
            return false;
        }
        s.liveState = s.state;
        Capacity::discountGone(*s.liveState, s.limits, s.nowMs, probe);
        const bool any
            = !s.limits.providers().empty() || !s.state.providers.empty() || !s.corruptFile.isEmpty();
        s.status = any ? HomeStatus::Ready : HomeStatus::Empty;
        return addSlotHolders(s, probe, previous);
    }
    return false;
}

} // namespace

QuotaObserver::QuotaObserver(QString home, QStringList lockDirs, QObject* parent)
    : QObject(parent)
    , m_home(std::move(home))
    , m_lockDirs(std::move(lockDirs))
{
    auto spec = HomeSpec::parse(ss(m_home));
    m_isRedis = spec && !spec->isDirectory();
    m_actions = new QuotaActions(m_home, m_lockDirs, m_isRedis, this);
    m_actions->setStaleSeconds(m_staleSeconds);
    connect(m_actions, &QuotaActions::actionFinished, this, &QuotaObserver::actionFinished);
    // Every part, but incrementally: what an action changed shows in the files' signatures,
    // so 10,000 unchanged lock files are not read again for it.
    connect(m_actions, &QuotaActions::acted, this, [this] { refreshParts(HomeWatcher::All); });
}

QuotaObserver::~QuotaObserver() = default;

QString QuotaObserver::who()
{
    return QuotaActions::who();
}

DashboardSnapshot QuotaObserver::readSnapshot(const QString& home, const QStringList& lockDirs,
    qint64 staleSeconds, const ProcessProbe& probe, const Clock& clock)
{
    CachingProbe cached(probe); // one look per pid for the whole snapshot
    DashboardSnapshot s;
    s.home = home;
    s.nowMs = clock.unixMs();
    readHomePart(s, cached);
    addLockHolders(s, lockDirs, staleSeconds, cached, clock);
    return s;
}

void QuotaObserver::start()
{
    // A directory home is watched with its files; a Redis home through its change
    // subscription (the lock directories are local either way).
    m_watcher = new HomeWatcher(m_isRedis ? QString() : m_home, m_lockDirs, HomeWatcher::Mode::Notify, this);
    connect(m_watcher, &HomeWatcher::changed, this, &QuotaObserver::refreshParts);
    if (m_isRedis) {
        m_feedWatcher = new ChangeFeedWatcher(m_home, this);
        connect(m_feedWatcher, &ChangeFeedWatcher::changed, this, &QuotaObserver::refreshParts);
    }
    m_livenessTimer = new QTimer(this);
    m_livenessTimer->setInterval(LIVENESS_MS);
    connect(m_livenessTimer, &QTimer::timeout, this, &QuotaObserver::checkLiveness);
    refresh();
}

void QuotaObserver::refresh()
{
    m_round.clear();
    readHome();
    scanLocks(true);
    m_holdersReshaped = true;
    publish(true);
    pollHistory();
    Q_EMIT refreshed();
}

void QuotaObserver::refreshParts(int parts)
{
    m_round.clear();
    bool send = false;
    bool holders = false;
    if (parts & HomeWatcher::Quota) {
        const QList<HolderInfo> before = m_slotHolders;
        readHome();
        send = true;
        holders = m_slotHolders != before;
        m_holdersReshaped = m_holdersReshaped || holders;
    } else if (parts & HomeWatcher::History) {
        // The history of a re-created home starts over; its snapshot goes first.
        const quint64 ino = m_isRedis ? m_homeInode : inodeOf(m_home);
        if (ino != m_homeInode) {
            readHome();
            send = holders = m_holdersReshaped = true;
        }
    }
    if (parts & HomeWatcher::Locks)
        holders = scanLocks(false) || holders;
    if (send || holders)
        publish(holders, send);
    if (parts & HomeWatcher::History)
        pollHistory();
    Q_EMIT refreshed();
}

void QuotaObserver::readHome()
{
    DashboardSnapshot s;
    s.home = m_home;
    s.nowMs = m_clock.unixMs();
    const bool kept = readHomePart(s, m_round, { &m_homePart.state, &m_homePart.limits, &m_slotHolders },
        m_isRedis ? &m_reader : nullptr);
    if (!kept) // otherwise the same rows: keep the list itself, so comparing it costs nothing
        m_slotHolders = std::move(s.holders);
    s.holders = {};
    m_homePart = std::move(s);
    // A Redis home has no inode: 1 while it is there.
    const quint64 ino = m_homePart.status == HomeStatus::Missing ? 0 : (m_isRedis ? 1 : inodeOf(m_home));
    if (ino != m_homeInode) {
        // A different directory (deleted and re-created, or new): its history starts over.
        const bool hadOne = m_homeInode != 0 || m_history;
        m_homeInode = ino;
        m_actions->setHomeInode(ino);
        m_history.reset();
        if (hadOne)
            Q_EMIT historyReset();
    }
}

bool QuotaObserver::scanLocks(bool rereadAll)
{
    ++m_lockScans;
    bool changed = false;
    // The cache follows the list of directories (kept by path).
    std::vector<LockDir> dirs;
    std::vector<std::string> paths;
    for (const QString& path : std::as_const(m_lockDirs)) {
        auto it = std::find_if(
            m_lockDirCache.begin(), m_lockDirCache.end(), [&](const LockDir& d) { return d.path == path; });
        dirs.push_back(it != m_lockDirCache.end() ? std::move(*it) : LockDir { path, {}, {} });
        paths.push_back(QFile::encodeName(path).toStdString());
    }
    changed = dirs.size() != m_lockDirCache.size();
    m_holdersReshaped = m_holdersReshaped || changed;
    m_lockDirCache = std::move(dirs);
    m_dirEvents.keepOnly(paths);

    const QString ownLock = QDir::cleanPath(m_home + QStringLiteral("/state.lock"));
    for (std::size_t i = 0; i < m_lockDirCache.size(); ++i) {
        LockDir& d = m_lockDirCache[i];
        // Asked even for a full re-read: it (re)starts the watch before the directory is read.
        DirectoryEvents::Changes events = m_dirEvents.take(paths[i]);
        if (rereadAll || events.everything) {
            const bool moved = scanLockDir(d, ownLock, rereadAll);
            m_holdersReshaped = m_holdersReshaped || moved;
            changed = moved || changed;
            continue;
        }
        const QByteArray native = QFile::encodeName(d.path);
        const int dfd = ::open(native.constData(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
            const bool moved = scanLockDir(d, ownLock, false); // says why
            m_holdersReshaped = m_holdersReshaped || moved;
            changed = moved || changed;
            continue;
        }
        for (const std::string& name : events.names) {
            if (name.size() <= 5 || !std::string_view(name).ends_with(".lock"))
                continue;
            const QString fileName = QFile::decodeName(QByteArray::fromStdString(name));
            auto old = d.locks.find(fileName);
            CachedLock c;
            const LockLook look = lookAtLock(dfd, name.c_str(), d.path, fileName, ownLock,
                old == d.locks.end() ? nullptr : &old->second, c);
            if (look == LockLook::Unchanged)
                continue;
            if (look == LockLook::Absent) {
                if (old != d.locks.end()) {
                    d.locks.erase(old);
                    changed = m_holdersReshaped = true;
                }
                continue;
            }
            if (old == d.locks.end()) {
                changed = m_holdersReshaped = true;
                d.locks.emplace(fileName, std::move(c));
            } else {
                if (!(old->second.holder == c.holder)) {
                    // Same file name, so the same key in the same place: sent as a delta.
                    changed = true;
                    m_lockRewrites.emplace_back(i, fileName);
                }
                old->second = std::move(c);
            }
        }
        ::close(dfd);
    }
    return changed;
}

QuotaObserver::LockLook QuotaObserver::lookAtLock(int dfd, const char* name, const QString& dirPath,
    const QString& fileName, const QString& ownLock, const CachedLock* old, CachedLock& c)
{
    ++m_lockStats;
    struct stat st
    {
    };
    // Only regular files can be locks (LockFile refuses anything else).
    if (::fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        return LockLook::Absent;
    const QString path = QDir::cleanPath(dirPath + QLatin1Char('/') + fileName);
    if (path == ownLock)
        return LockLook::Absent;
    c.inode = st.st_ino;
    c.size = st.st_size;
    c.mtimeNs = st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec;
    c.ctimeNs = st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec;
    if (old && old->inode == c.inode && old->size == c.size && old->mtimeNs == c.mtimeNs
        && old->ctimeNs == c.ctimeNs)
        return LockLook::Unchanged;
    ++m_lockReads;
    if (!judgeLockFile(path, m_staleSeconds, m_round, m_clock, c.holder, &c.suspicious))
        return LockLook::Absent;
    return LockLook::Read;
}

bool QuotaObserver::scanLockDir(LockDir& d, const QString& ownLock, bool rereadAll)
{
    bool changed = false;
    QString problem;
    std::map<QString, CachedLock> next;
    const QByteArray native = QFile::encodeName(d.path);
    DIR* dir = ::opendir(native.constData());
    if (!dir) {
        problem = errno == ENOENT || errno == ENOTDIR
            ? tr("%1: no such directory").arg(d.path)
            : QStringLiteral("%1: %2").arg(d.path, QString::fromLocal8Bit(std::strerror(errno)));
    } else {
        const int dfd = ::dirfd(dir);
        while (const dirent* e = ::readdir(dir)) {
            const std::string_view name(e->d_name);
            if (name.size() <= 5 || !name.ends_with(".lock"))
                continue;
            const QString fileName = QFile::decodeName(e->d_name);
            auto old = d.locks.find(fileName);
            CachedLock c;
            const LockLook look = lookAtLock(dfd, e->d_name, d.path, fileName, ownLock,
                rereadAll || old == d.locks.end() ? nullptr : &old->second, c);
            if (look == LockLook::Absent)
                continue;
            if (look == LockLook::Unchanged) {
                next.emplace(fileName, std::move(old->second));
                continue;
            }
            if (old == d.locks.end() || !(old->second.holder == c.holder))
                changed = true;
            next.emplace(fileName, std::move(c));
        }
        ::closedir(dir);
    }
    changed = changed || next.size() != d.locks.size() || problem != d.problem;
    d.locks = std::move(next);
    d.problem = problem;
    return changed;
}

void QuotaObserver::checkLiveness()
{
    m_round.clear();
    const qint64 now = m_clock.unixMs();
    bool changed = false;
    for (LockDir& d : m_lockDirCache) {
        for (auto it = d.locks.begin(); it != d.locks.end();) {
            CachedLock& c = it->second;
            const HolderInfo& h = c.holder;
            const qint64 ageS = (now - h.sinceMs) / 1000;
            const bool mayTurnStale = m_staleSeconds > 0 && ageS > m_staleSeconds;
            bool again = false;
            if (h.health == HolderHealth::Alive)
                again = m_round.liveness(h.pid, h.sinceMs / 1000) == Liveness::Dead
                    || (c.suspicious && mayTurnStale);
            else if (h.health == HolderHealth::Dead)
                again = mayTurnStale;
            if (!again) {
                ++it;
                continue;
            }
            ++m_lockReads;
            CachedLock fresh = c;
            if (!judgeLockFile(h.path, m_staleSeconds, m_round, m_clock, fresh.holder, &fresh.suspicious)) {
                it = d.locks.erase(it); // gone: the directory's notification rescans it
                changed = true;
                continue;
            }
            changed = changed || !(fresh.holder == c.holder);
            c = std::move(fresh);
            ++it;
        }
    }
    // Slots: the same judgement as readHome, from the state already read.
    int i = 0;
    for (const ProviderState& p : m_homePart.state.providers) {
        const ProviderLimits* l = m_homePart.limits.find(p.name);
        for (const Slot& slot : p.slots) {
            if (i >= m_slotHolders.size())
                break;
            const HolderHealth health = slotHealth(slot, l, now, m_round);
            if (m_slotHolders.at(i).health != health) {
                HolderInfo& h = m_slotHolders[i];
                h.health = health;
                fillCommandLine(h, slot, m_round);
                changed = true;
            }
            ++i;
        }
    }
    if (changed) {
        m_holdersReshaped = true;
        publish(true);
    }
}

void QuotaObserver::publish(bool holdersChanged, bool homeChanged)
{
    const bool rewritesOnly = holdersChanged && m_sentOnce && !m_holdersReshaped && !m_lockRewrites.empty();
    if (rewritesOnly && !homeChanged) {
        // Only lock files rewritten in place and nothing else: the GUI patches those rows of
        // its own list. Ours is dropped rather than patched too: one of the two would have to
        // copy all 20,000 rows (the list is shared), and it is rebuilt only when next needed.
        HoldersPatch patch;
        patch.base = m_holdersRevision;
        patch.revision = ++m_holdersRevision;
        patch.changed = lockRewriteIndices();
        for (const auto& [dir, name] : m_lockRewrites)
            patch.rows.append(m_lockDirCache[dir].locks.at(name).holder);
        m_lockRewrites.clear();
        m_allHolders = {};
        m_allHoldersStale = true;
        Q_EMIT holdersPatched(patch);
        updateLivenessTimer();
        return;
    }
    DashboardSnapshot s = m_homePart;
    s.nowMs = m_clock.unixMs();
    if (rewritesOnly) {
        // The same rows with new values at known places: the GUI's model rebuilds only those.
        s.holdersBase = m_holdersRevision;
        s.holdersChanged = lockRewriteIndices();
    }
    if (holdersChanged || !m_sentOnce) {
        ++m_holdersRevision;
        rebuildAllHolders();
        m_holdersReshaped = false;
        m_lockRewrites.clear();
    } else if (m_allHoldersStale) {
        rebuildAllHolders(); // the same revision: what the GUI already has, patched
    }
    s.holders = m_allHolders;
    s.holdersRevision = m_holdersRevision;
    for (const LockDir& d : m_lockDirCache) {
        if (!d.problem.isEmpty())
            s.lockDirProblems.append(d.problem);
    }
    m_sentOnce = true;
    Q_EMIT snapshotReady(s);
    updateLivenessTimer();
}

void QuotaObserver::rebuildAllHolders()
{
    m_allHolders = m_slotHolders;
    for (const LockDir& d : m_lockDirCache) {
        for (const auto& [name, c] : d.locks)
            m_allHolders.append(c.holder);
    }
    m_allHoldersStale = false;
}

void QuotaObserver::updateLivenessTimer()
{
    // Only holders whose answer can change with time need the slow look.
    bool timely = !m_slotHolders.isEmpty();
    for (const LockDir& d : m_lockDirCache) {
        for (auto it = d.locks.begin(); !timely && it != d.locks.end(); ++it)
            timely = it->second.holder.health == HolderHealth::Alive
                || it->second.holder.health == HolderHealth::Dead;
    }
    if (m_livenessTimer && timely != m_livenessTimer->isActive()) {
        if (timely)
            m_livenessTimer->start();
        else
            m_livenessTimer->stop();
    }
}

QList<int> QuotaObserver::lockRewriteIndices() const
{
    QList<int> at;
    for (const auto& [dir, name] : m_lockRewrites) {
        qsizetype i = m_slotHolders.size();
        for (std::size_t d = 0; d < dir; ++d)
            i += qsizetype(m_lockDirCache[d].locks.size());
        const auto& locks = m_lockDirCache[dir].locks;
        i += qsizetype(std::distance(locks.begin(), locks.find(name)));
        at.append(int(i));
    }
    return at;
}

void QuotaObserver::pollHistory()
{
    if (m_homeInode == 0)
        return;
    if (!m_history) {
        auto reader = StoreFactory::openReader(ss(m_home));
        if (!reader)
            return; // the home's status says why
        m_history = (*reader)->history();
    }
    auto batch = m_history->poll();
    if (batch && !batch->events.empty())
        Q_EMIT historyAppended(batch->events);
}

void QuotaObserver::setLockDirs(const QStringList& lockDirs)
{
    m_lockDirs = lockDirs;
    m_actions->setLockDirs(lockDirs);
    if (m_watcher)
        m_watcher->setLockDirs(lockDirs);
    refresh();
}

void QuotaObserver::setStaleSeconds(qint64 seconds)
{
    m_staleSeconds = seconds;
    m_actions->setStaleSeconds(seconds);
    refresh();
}

} // namespace tollgate::ui
