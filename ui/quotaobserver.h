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
//   change notification rescans it, re-reading only lock files whose (inode, size, mtime)
//   moved (lock files are made by link() and never written in place). Nothing rescans or
//   re-probes on a timer: every LIVENESS_MS the holders whose answer can change with time
//   (an alive holder may die, a dead lock may turn stale, a slot may run overdue) are
//   re-judged, asking /proc once per distinct pid (CachingProbe).
// - A snapshot is sent only when something in it changed; holdersRevision moves exactly when
//   the holder list changed, so the GUI diffs holders only then.

#include "actionresult.h"
#include "base/systemclock.h"
#include "cachingprobe.h"
#include "dashboardsnapshot.h"
#include "limitchange.h"
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

    // Test hooks: how many lock-directory scans and how many lock files were read.
    [[nodiscard]] quint64 lockScans() const { return m_lockScans; }
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
    void publish(bool holdersChanged);

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
    std::vector<LockDir> m_lockDirCache;
    quint64 m_holdersRevision = 1;
    quint64 m_lockScans = 0;
    quint64 m_lockReads = 0;
    bool m_sentOnce = false;
    std::unique_ptr<HistoryCursor> m_history;
    quint64 m_homeInode = 0;
    QuotaActions* m_actions = nullptr; // child: moves to the worker thread with this object
    DashboardSnapshot m_last;
};

} // namespace tollgate::ui
