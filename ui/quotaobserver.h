#pragma once

// QuotaObserver: the dashboard's only door to the files. It lives on a worker QThread and
// talks to the GUI by queued signals carrying value snapshots, so no file I/O, flock wait or
// /proc probe ever runs on the GUI thread.
//
// Invariants:
// - Looking never writes. A snapshot reads limits.json and state.bin read-only (under a
//   shared flock on state.lock, so a writer is never seen half-way), never creates the home
//   or any file in it, and never "repairs" a corrupt file: FileQuotaStore would move a
//   corrupt state aside, so it is not used for reading.
// - Acting is QuotaActions' (a child, on the same thread): after each action this object
//   looks again.
// - The history is read incrementally (HistoryReader); a home that is deleted and re-created
//   (a new inode) starts a new reader.
// - Work follows what changed (HomeWatcher's parts): a history append reads only the new
//   tail; state.bin or limits.json re-read the quota view and slots; a lock directory's
//   change notification looks only at the names inotify reported (DirectoryEvents), and
//   re-reads only those whose (inode, size, mtime, ctime) moved (lock files are made by
//   link() and never written in place); the whole directory is stat-ed only when the names
//   cannot be trusted (first look, overflow, a replaced directory, a network filesystem).
//   Nothing rescans or re-probes on a timer: every LIVENESS_MS the holders whose answer can
//   change with time (an alive holder may die, a dead lock may turn stale, a slot may run
//   overdue) are re-judged, asking /proc once per distinct pid (CachingProbe).
// - A snapshot is sent only when something in it changed; holdersRevision moves exactly when
//   the holder list changed, so the GUI diffs holders only then. When the only change is
//   lock files rewritten in place (same names, so the same rows), a HoldersPatch of those
//   rows is sent instead of a snapshot.

#include "actionresult.h"
#include "base/systemclock.h"
#include "cachingprobe.h"
#include "dashboardsnapshot.h"
#include "limitchange.h"
#include "system/directoryevents.h"
#include "system/processprobe.h"

#include <QObject>
#include <QTimer>
#include <map>
#include <memory>

namespace tollgate {
class QuotaBackend;
class QuotaReader;
class HistoryCursor;
class QuotaLimiter;
} // namespace tollgate

namespace tollgate::ui {

class HomeWatcher;
class QuotaActions;

class QuotaObserver final : public QObject
{
    Q_OBJECT
public:
    // Holder liveness and staleness move without file events; ages and window decay are
    // derived on the GUI side from the snapshot's clock.
    static constexpr int LIVENESS_MS = 2000;
    static constexpr qint64 DEFAULT_STALE_SECONDS = 3600;

    QuotaObserver(QString home, QStringList lockDirs, QObject* parent = nullptr);
    ~QuotaObserver() override;

    // Read-only snapshot of a home and lock directories; also used directly by tests.
    [[nodiscard]] static DashboardSnapshot readSnapshot(const QString& home, const QStringList& lockDirs,
        qint64 staleSeconds, const ProcessProbe& probe, const Clock& clock);

    [[nodiscard]] static QString who();

    // What the user changes, on this object's thread (its child).
    [[nodiscard]] QuotaActions* actions() const { return m_actions; }

    // Test hooks: how many lock-directory scans, lock file stats and lock file reads.
    [[nodiscard]] quint64 lockScans() const { return m_lockScans; }
    [[nodiscard]] quint64 lockStats() const { return m_lockStats; }
    [[nodiscard]] quint64 lockReads() const { return m_lockReads; }

public Q_SLOTS:
    void start(); // call once the object lives in its thread
    void refresh(); // everything, every lock file re-read (F5, after an action)
    void refreshParts(int parts); // HomeWatcher::Part flags
    void checkLiveness();
    void setLockDirs(const QStringList& lockDirs);
    void setStaleSeconds(qint64 seconds);

Q_SIGNALS:
    void snapshotReady(const tollgate::ui::DashboardSnapshot& snapshot);
    // Only lock files rewritten in place, nothing else changed since the last snapshot.
    void holdersPatched(const tollgate::ui::HoldersPatch& patch);
    void historyAppended(const std::vector<tollgate::HistoryEvent>& events);
    void actionFinished(const tollgate::ui::ActionResult& result); // the actions', passed on
    void historyReset(); // the home is a different directory now: forget the old history
    void refreshed(); // after the snapshot and history of one refresh were emitted

private:
    struct CachedLock
    {
        quint64 inode = 0;
        qint64 size = 0;
        qint64 mtimeNs = 0;
        qint64 ctimeNs = 0;
        bool suspicious = false;
        HolderInfo holder;
    };
    struct LockDir
    {
        QString path;
        QString problem;
        std::map<QString, CachedLock> locks; // by file name
    };

    void pollHistory();
    void readHome(); // status, quota view, slot holders
    bool scanLocks(bool rereadAll); // true: the lock holders changed
    bool scanLockDir(LockDir& d, const QString& ownLock, bool rereadAll); // readdir, every entry
    enum class LockLook { Absent, Unchanged, Read };
    // One entry of an open directory: fstatat, and read it unless its signature matches old.
    LockLook lookAtLock(int dfd, const char* name, const QString& dirPath, const QString& fileName,
        const QString& ownLock, const CachedLock* old, CachedLock& c);
    // homeChanged false: only lock holders may have moved (a lock-directory report).
    void publish(bool holdersChanged, bool homeChanged = true);
    void rebuildAllHolders();
    void updateLivenessTimer();
    // Where the rows of m_lockRewrites are in the holder list (slots first, then each
    // directory's locks by name).
    [[nodiscard]] QList<int> lockRewriteIndices() const;

    QString m_home;
    QStringList m_lockDirs;
    qint64 m_staleSeconds = DEFAULT_STALE_SECONDS;
    SystemClock m_clock;
    ProcessProbe m_probe;
    CachingProbe m_round { m_probe }; // cleared at the start of every round
    bool m_isRedis = false; // the home is a Redis URL, not a directory
    std::unique_ptr<QuotaReader> m_reader; // a Redis home's, kept between refreshes (its connection)
    class ChangeFeedWatcher* m_feedWatcher = nullptr; // child, Redis homes only
    HomeWatcher* m_watcher = nullptr; // child; created in start() so it lives in the worker thread
    QTimer* m_livenessTimer = nullptr; // child
    DashboardSnapshot m_homePart; // the home part of the next snapshot (no lock holders)
    QList<HolderInfo> m_slotHolders;
    QList<HolderInfo> m_allHolders; // as last sent
    bool m_allHoldersStale = false; // dropped after a patch: rebuild before sending it again
    std::vector<LockDir> m_lockDirCache;
    DirectoryEvents m_dirEvents; // which lock files changed, so a rescan stats only those
    quint64 m_holdersRevision = 1;
    quint64 m_lockScans = 0;
    quint64 m_lockStats = 0;
    quint64 m_lockReads = 0;
    bool m_sentOnce = false;
    std::unique_ptr<HistoryCursor> m_history;
    quint64 m_homeInode = 0;
    QuotaActions* m_actions = nullptr; // child: moves to the worker thread with this object
    DashboardSnapshot m_last;
    // Since the last publish: whether holders came or went (or anything else moved rows), and
    // the lock files (directory index, name) only rewritten in place.
    bool m_holdersReshaped = true;
    std::vector<std::pair<std::size_t, QString>> m_lockRewrites;
};

} // namespace tollgate::ui
