#pragma once

// QuotaActions: what the dashboard changes — limits, pauses, backoffs, releases and cleans —
// on the observer's worker thread, never the GUI's. Split from QuotaObserver, which only
// reads; both live in the same thread, so an action and a look never overlap.
//
// Invariants:
// - Acting goes through the core under its lock and is recorded in the history with the
//   dashboard as actor: quota actions are QuotaLimiter calls; a lock file action removes the
//   file under its flock (LockFile::releaseIfSame) and then records a "lock-release" or
//   "lock-clean" event through a QuotaStore transaction. The store is opened only when the
//   user acts and only on a home that already exists (without one, the lock action is done
//   and the message says it could not be recorded).
// - An action names what the user saw (a HolderInfo with its fence or lock identity, a
//   LimitChange with the limits shown) and is refused, with nothing done, when the target is
//   no longer that: "deploy.lock changed since you looked".
// - Every action ends in exactly one actionFinished; one that changed or may have changed
//   something is followed by acted(), on which the observer looks again.

#include "actionresult.h"
#include "base/systemclock.h"
#include "dashboardsnapshot.h"
#include "limitchange.h"
#include "system/processprobe.h"

#include <QObject>
#include <QStringList>
#include <memory>

namespace tollgate {
class QuotaBackend;
class QuotaLimiter;
} // namespace tollgate

namespace tollgate::ui {

class QuotaActions final : public QObject
{
    Q_OBJECT
public:
    QuotaActions(QString home, QStringList lockDirs, bool isRedis, QObject* parent = nullptr);
    ~QuotaActions() override;

    // The actor recorded in the history: "tollgate-dashboard (pid N)".
    [[nodiscard]] static QString who();

    void setLockDirs(const QStringList& lockDirs) { m_lockDirs = lockDirs; }
    void setStaleSeconds(qint64 seconds) { m_staleSeconds = seconds; }
    // The home as the observer last found it (0: missing; a Redis home: 1 while there); a
    // different one makes the next action open the store again.
    void setHomeInode(quint64 inode) { m_homeInode = inode; }

public Q_SLOTS:
    // Applied only if the provider's limits are still change.before (under state.lock).
    void setLimits(const tollgate::ui::LimitChange& change);
    void pause(const QString& provider, const QString& reason); // provider empty: all
    void resume(const QString& provider); // provider empty: all
    void resetBackoff(const QString& provider);
    // Acts only on `expected` (same slot fence and holder / same lock file inode and bytes).
    // confirmed=false refuses (with needsConfirmation) when the holder is alive.
    void releaseHolder(const tollgate::ui::HolderInfo& expected, bool confirmed);
    void cleanStale(const QStringList& lockPaths); // see DashboardController::cleanStale

Q_SIGNALS:
    void actionFinished(const tollgate::ui::ActionResult& result);
    void acted(); // after an action's result: look again

private:
    [[nodiscard]] QString openLimiter(); // empty on success, else why not
    void finish(ActionResult result);
    void releaseSlot(const HolderInfo& expected, bool confirmed, ActionResult& r);
    void releaseLock(const HolderInfo& expected, bool confirmed, ActionResult& r);
    // Appends events to the history (one transaction); empty on success, else why not.
    [[nodiscard]] QString record(const std::vector<HistoryEvent>& events);

    QString m_home;
    QStringList m_lockDirs;
    bool m_isRedis = false;
    qint64 m_staleSeconds = 3600; // QuotaObserver::DEFAULT_STALE_SECONDS, set by the observer
    quint64 m_homeInode = 0;
    SystemClock m_clock;
    ProcessProbe m_probe;
    std::unique_ptr<QuotaBackend> m_store;
    std::unique_ptr<QuotaLimiter> m_limiter;
    quint64 m_storeInode = 0;
};

} // namespace tollgate::ui
