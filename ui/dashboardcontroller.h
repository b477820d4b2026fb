#pragma once

// DashboardController: the GUI-thread side of the dashboard. It owns the worker thread (with
// its QuotaObserver), the models the views show and the aggregates the charts draw, and turns
// user intents into queued calls to the worker.
//
// Invariants: nothing here touches a file. Every call between this thread and the worker goes
// through a ThreadInbox (m_inbox here, m_workerInbox there), never a queued signal or a queued
// functor: snapshots and history batches arrive as values handed over under its mutex. Models
// are updated by difference (never reset on a tick); the one-second tick only re-derives
// time-dependent cells (countdowns, ages, window decay) from the last snapshot. Storm alerts
// are raised once per storm; plan alerts once per plan window (PlanAlerts).

#include "actionresult.h"
#include "dashboardsnapshot.h"
#include "limitchange.h"
#include "planalerts.h"
#include "quota/limitlearning.h"
#include "stateicon.h"
#include "stormdetector.h"
#include "usagehistory.h"

#include <QObject>
#include <QThread>
#include <QTimer>
#include <optional>

namespace tollgate::ui {

class CallerUsageModel;
class EventsFilterModel;
class EventsModel;
class HoldersModel;
class LimitsModel;
class ProvidersModel;
class QuotaObserver;
class RateLimitCallersModel;
class ThreadInbox;

class DashboardController final : public QObject
{
    Q_OBJECT
public:
    static constexpr int TICK_MS = 1000;
    static constexpr int CHART_REFRESH_MS = 1000; // at most this often while history flows

    DashboardController(QString home, QStringList lockDirs, QObject* parent = nullptr);
    ~DashboardController() override;

    void start();

    [[nodiscard]] QString home() const { return m_home; }
    [[nodiscard]] QStringList lockDirs() const { return m_lockDirs; }
    [[nodiscard]] bool loaded() const { return m_loaded; }
    // The whole home, as the observer saw it (tray, alerts, pause all, clean stale).
    [[nodiscard]] const DashboardSnapshot& snapshot() const { return m_snapshot; }
    // What the views show: the whole snapshot, or in the provider view only that provider's
    // limits, state and slots (no lock files). The models are fed from this one.
    // Unscoped it is snapshot() itself, not a copy: a copy of two QuotaStates (every slot of
    // every provider) per snapshot cost ~1.5 % of a core at 100 admissions/s.
    [[nodiscard]] const DashboardSnapshot& shownSnapshot() const
    {
        return m_scope.isEmpty() ? m_snapshot : m_scoped;
    }
    // The provider view: one provider in full, or every provider (empty; never a sum of their
    // limits). The tables, tiles, charts, 429s and the event log follow it.
    void setProviderScope(const QString& provider);
    [[nodiscard]] QString providerScope() const { return m_scope; }
    // Every provider of the home (limits or state), sorted.
    [[nodiscard]] QStringList providerNames() const;
    [[nodiscard]] const UsageHistory& usage() const { return m_usage; }
    [[nodiscard]] const StormDetector& storms() const { return m_storms; }
    [[nodiscard]] TrayState trayState() const { return m_trayState; }
    [[nodiscard]] qint64 nowMs() const;

    [[nodiscard]] ProvidersModel* providers() const { return m_providers; }
    [[nodiscard]] LimitsModel* limits() const { return m_limits; }
    [[nodiscard]] HoldersModel* holders() const { return m_holders; }
    [[nodiscard]] EventsModel* events() const { return m_events; }
    [[nodiscard]] EventsFilterModel* filteredEvents() const { return m_filteredEvents; }
    [[nodiscard]] CallerUsageModel* callerUsage() const { return m_callerUsage; }
    [[nodiscard]] RateLimitCallersModel* rateLimitCallers() const { return m_rateLimitCallers; }

    void setStormThreshold(int count, qint64 windowMs);
    void setLockDirs(const QStringList& dirs);
    void setStaleSeconds(qint64 seconds);

    // User intents; each ends in actionFinished.
    // A limit edit made on the limits shown. A drastic one (a limit removed, or changed by more
    // than half) is not sent: limitChangeNeedsConfirmation asks the window, which answers with
    // applyLimitChange.
    void requestLimits(const QString& provider, const ProviderLimits& limits);
    void applyLimitChange(const LimitChange& change);
    // "Use the provider's limits": the figures the provider's answers last stated become the
    // limits of their scope (`tollgate limits adopt`). The change is made on the limits shown and
    // written by compare-and-set (applyLimitChange), described as the CLI describes it.
    struct Adoption
    {
        LimitChange change;
        LimitLearning::Lesson lesson;
    };
    // nullopt: nothing reported, or the limits already are the provider's.
    [[nodiscard]] std::optional<Adoption> adoptionOf(const QString& provider) const;
    // Turns following the provider's limits on or off (limits set --learn / --no-learn).
    void setLearning(const QString& provider, bool on);
    // Undoes the last limit change this window made (through requestLimits' rules).
    void undoLimitChange();
    [[nodiscard]] bool canUndoLimitChange() const { return m_lastLimitChange.has_value(); }
    [[nodiscard]] std::optional<LimitChange> lastLimitChange() const { return m_lastLimitChange; }
    void pause(const QString& provider, const QString& reason); // empty provider: all
    void resume(const QString& provider);
    void resetBackoff(const QString& provider);
    // Acts on the holder as shown (its row's HolderInfo); a key not shown is refused.
    void releaseHolder(const QString& key, bool confirmed);
    void releaseHolder(const HolderInfo& shown, bool confirmed);
    // Releases the slots and queue places of dead holders, and removes the lock files named
    // (those the user confirmed) that are still stale when judged again: nothing else.
    void cleanStale(const QStringList& lockPaths);
    void refreshNow(); // asks the worker for a fresh look (also what the tests use)
    void updateCharts(); // re-derives the chart data now

Q_SIGNALS:
    void snapshotChanged();
    void providerScopeChanged(const QString& provider);
    // Only holders changed (lock files rewritten in place); snapshot() has them.
    void holdersChanged();
    void loadedChanged(); // the first snapshot and its history are in
    void chartsChanged();
    void stormStarted(const tollgate::ui::StormDetector::Storm& storm);
    // A provider's plan turned Warning or Rejected (once per window).
    void planAlert(const tollgate::ui::PlanAlerts::Alert& alert);
    void trayStateChanged(tollgate::ui::TrayState state);
    void actionFinished(const tollgate::ui::ActionResult& result);
    void limitChangeNeedsConfirmation(const tollgate::ui::LimitChange& change, const QStringList& warnings);
    void undoAvailableChanged(bool available);
    void refreshed(); // a worker refresh (snapshot + history) has been applied

private:
    void onSnapshot(const DashboardSnapshot& snapshot);
    void onHoldersPatch(const HoldersPatch& patch);
    void onHistory(const std::vector<HistoryEvent>& events);
    void onHistoryReset(); // the home is another directory now: forget the old history
    void showSnapshot();
    void onRefreshed();
    void tick();
    void updateTrayState();
    void onAction(const ActionResult& result);
    void proposeLimitChange(const LimitChange& change);
    void toWorker(std::function<void(QuotaObserver*)> call);
    // The observer's signal, handled here in this thread through m_inbox.
    template <typename... Args>
    void relay(
        void (QuotaObserver::*signal)(const Args&...), void (DashboardController::*handler)(const Args&...));

    QString m_home;
    QStringList m_lockDirs;
    QThread m_thread;
    // The worker's objects live in m_thread, which runs once (start) and finishes only in the
    // destructor: then they are deleted in it, after its last job (or by the destructor, if it
    // never ran), so no post can reach them deleted.
    QuotaObserver* m_observer = nullptr;
    ThreadInbox* m_inbox = nullptr; // this thread's: the worker's results come in here
    ThreadInbox* m_workerInbox = nullptr;
    bool m_started = false;
    QTimer m_tick;
    DashboardSnapshot m_snapshot;
    DashboardSnapshot m_scoped; // m_snapshot's m_scope part; empty (unused) while unscoped
    QString m_scope; // the provider view's provider; empty: all
    bool m_loaded = false;
    bool m_chartsDirty = true;
    qint64 m_lastChartMs = 0;
    UsageHistory m_usage;
    StormDetector m_storms;
    PlanAlerts m_planAlerts;
    TrayState m_trayState = TrayState::Normal;
    quint64 m_ticks = 0;
    std::optional<LimitChange> m_lastLimitChange;

    // owned through QObject parenting
    ProvidersModel* m_providers = nullptr;
    LimitsModel* m_limits = nullptr;
    HoldersModel* m_holders = nullptr;
    EventsModel* m_events = nullptr;
    EventsFilterModel* m_filteredEvents = nullptr;
    CallerUsageModel* m_callerUsage = nullptr;
    RateLimitCallersModel* m_rateLimitCallers = nullptr;
};

} // namespace tollgate::ui

Q_DECLARE_METATYPE(tollgate::ui::StormDetector::Storm)
Q_DECLARE_METATYPE(tollgate::ui::PlanAlerts::Alert)
