#include "dashboardcontroller.h"

#include "callerusagemodel.h"
#include "eventsfiltermodel.h"
#include "eventsmodel.h"
#include "holdersmodel.h"
#include "learnedlimits.h"
#include "limitsmodel.h"
#include "providersmodel.h"
#include "quotaactions.h"
#include "quotaobserver.h"
#include "ratelimitcallersmodel.h"
#include "threadinbox.h"

#include <QDateTime>

namespace tollgate::ui {

namespace {

// Charts slide by one minute per minute; redrawing every few seconds keeps them live
// without cost when nothing happens.
constexpr int IDLE_CHART_TICKS = 10;

// The snapshot as the provider view shows it: the provider's limits, state and slots only.
// Lock files belong to no provider and are left out. Global facts (pause all, the home's
// status, a corrupt file) stay.
DashboardSnapshot scopedTo(const DashboardSnapshot& full, const QString& provider)
{
    DashboardSnapshot s = full;
    const std::string name = provider.toStdString();
    std::vector<std::string> others;
    for (const auto& [n, limits] : s.limits.providers()) {
        if (n != name)
            others.push_back(n);
    }
    for (const std::string& n : others)
        s.limits.remove(n);
    auto keepOnly = [&name](QuotaState& state) {
        std::erase_if(state.providers, [&name](const ProviderState& p) { return p.name != name; });
    };
    keepOnly(s.state);
    if (s.liveState)
        keepOnly(*s.liveState);
    s.holders.removeIf(
        [&provider](const HolderInfo& h) { return h.kind != HolderKind::Slot || h.provider != provider; });
    s.holdersRevision = 0; // another subset of the same revision: compare the rows themselves
    s.holdersBase = 0; // indices of the whole list mean nothing in the subset
    s.holdersChanged = {};
    return s;
}

} // namespace

template <typename... Args>
void DashboardController::relay(
    void (QuotaObserver::*signal)(const Args&...), void (DashboardController::*handler)(const Args&...))
{
    // Direct: runs in the worker as it emits, and hands a copy over through m_inbox (see
    // ThreadInbox for why no value rides a queued signal).
    connect(
        m_observer, signal, m_observer,
        [this, handler](const Args&... args) {
            m_inbox->post([this, handler, ... copies = args] { (this->*handler)(copies...); });
        },
        Qt::DirectConnection);
}

DashboardController::DashboardController(QString home, QStringList lockDirs, QObject* parent)
    : QObject(parent)
    , m_home(std::move(home))
    , m_lockDirs(std::move(lockDirs))
    , m_providers(new ProvidersModel(this))
    , m_limits(new LimitsModel(this))
    , m_holders(new HoldersModel(this))
    , m_events(new EventsModel(this))
    , m_filteredEvents(new EventsFilterModel(this))
    , m_callerUsage(new CallerUsageModel(this))
    , m_rateLimitCallers(new RateLimitCallersModel(this))
{
    qRegisterMetaType<DashboardSnapshot>();
    qRegisterMetaType<HoldersPatch>();
    qRegisterMetaType<std::vector<HistoryEvent>>();
    qRegisterMetaType<ProviderLimits>();
    qRegisterMetaType<ActionResult>();
    qRegisterMetaType<LimitChange>();
    qRegisterMetaType<StormDetector::Storm>();
    qRegisterMetaType<PlanAlerts::Alert>();
    qRegisterMetaType<TrayState>();

    m_filteredEvents->setSourceModel(m_events);
    m_thread.setObjectName(QStringLiteral("tollgate-observer"));
    m_observer = new QuotaObserver(m_home, m_lockDirs);
    m_observer->moveToThread(&m_thread);
    m_inbox = new ThreadInbox(this);
    m_workerInbox = new ThreadInbox;
    m_workerInbox->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_observer, &QObject::deleteLater);
    connect(&m_thread, &QThread::finished, m_workerInbox, &QObject::deleteLater);
    relay(&QuotaObserver::snapshotReady, &DashboardController::onSnapshot);
    relay(&QuotaObserver::holdersPatched, &DashboardController::onHoldersPatch);
    relay(&QuotaObserver::historyAppended, &DashboardController::onHistory);
    relay(&QuotaObserver::refreshed, &DashboardController::onRefreshed);
    relay(&QuotaObserver::historyReset, &DashboardController::onHistoryReset);
    relay(&QuotaObserver::actionFinished, &DashboardController::onAction);
    connect(m_providers, &ProvidersModel::limitsEditRequested, this, &DashboardController::requestLimits);
    connect(m_limits, &LimitsModel::limitsEditRequested, this, &DashboardController::requestLimits);

    m_tick.setInterval(TICK_MS);
    connect(&m_tick, &QTimer::timeout, this, &DashboardController::tick);
}

DashboardController::~DashboardController()
{
    if (!m_started) {
        // Never ran: nothing of theirs is in use, and no `finished` will delete them.
        delete m_observer;
        delete m_workerInbox;
        return;
    }
    m_thread.quit();
    m_thread.wait();
}

void DashboardController::start()
{
    if (m_started)
        return; // once: a thread started again would find its objects deleted
    m_started = true;
    m_thread.start();
    toWorker([](QuotaObserver* o) { o->start(); });
    m_tick.start();
}

qint64 DashboardController::nowMs() const
{
    return QDateTime::currentMSecsSinceEpoch();
}

void DashboardController::onHoldersPatch(const HoldersPatch& patch)
{
    if (!m_scope.isEmpty()) {
        // The provider view shows no lock files (a patch is lock files rewritten in place):
        // only the whole list kept here (clean stale counts from it) takes the rows.
        bool fits = patch.base != 0 && patch.base == m_snapshot.holdersRevision
            && patch.changed.size() == patch.rows.size();
        for (int i = 0; fits && i < patch.changed.size(); ++i) {
            const int at = patch.changed.at(i);
            fits = at >= 0 && at < m_snapshot.holders.size()
                && m_snapshot.holders.at(at).key == patch.rows.at(i).key;
        }
        if (!fits) {
            toWorker([](QuotaObserver* o) { o->refresh(); });
            return;
        }
        for (int i = 0; i < patch.changed.size(); ++i)
            m_snapshot.holders[patch.changed.at(i)] = patch.rows.at(i);
        m_snapshot.holdersRevision = patch.revision;
        m_snapshot.holdersBase = 0;
        m_snapshot.holdersChanged = {};
        Q_EMIT holdersChanged();
        return;
    }
    // The rest of the snapshot stands; only the holders move. Ours is let go first, so the
    // model's list is the only one and is patched in place, not copied whole (unscoped, the
    // shown snapshot is m_snapshot itself).
    m_snapshot.holders = {};
    if (!m_holders->applyPatch(patch)) // based on a revision not shown: ask for everything
        toWorker([](QuotaObserver* o) { o->refresh(); });
    m_snapshot.holders = m_holders->holders();
    m_snapshot.holdersRevision = m_holders->revision();
    m_snapshot.holdersBase = 0;
    m_snapshot.holdersChanged = {};
    Q_EMIT holdersChanged();
}

void DashboardController::onHistoryReset()
{
    m_events->clear();
    m_usage.clear();
    m_chartsDirty = true;
}

void DashboardController::onSnapshot(const DashboardSnapshot& snapshot)
{
    m_snapshot = snapshot;
    showSnapshot();
    updateTrayState();
    Q_EMIT snapshotChanged();
    // After the window has the snapshot: an alert's reader finds the tile saying the same.
    if (snapshot.hasState) {
        for (const PlanAlerts::Alert& alert : m_planAlerts.update(snapshot.state, snapshot.nowMs))
            Q_EMIT planAlert(alert);
    }
}

void DashboardController::showSnapshot()
{
    if (m_scope.isEmpty())
        m_scoped = {}; // a scope left: its copy is not kept
    else
        m_scoped = scopedTo(m_snapshot, m_scope);
    const DashboardSnapshot& shown = shownSnapshot();
    m_providers->setSnapshot(shown);
    m_limits->setSnapshot(shown);
    m_holders->setSnapshot(shown);
}

QStringList DashboardController::providerNames() const
{
    QStringList out;
    for (const auto& [name, limits] : m_snapshot.limits.providers())
        out.append(QString::fromStdString(name));
    for (const ProviderState& p : m_snapshot.state.providers) {
        const QString name = QString::fromStdString(p.name);
        if (!out.contains(name))
            out.append(name);
    }
    out.sort();
    return out;
}

void DashboardController::setProviderScope(const QString& provider)
{
    if (provider == m_scope)
        return;
    m_scope = provider;
    m_usage.setProviderScope(provider);
    m_filteredEvents->setProviderFilter(provider);
    showSnapshot();
    Q_EMIT snapshotChanged();
    updateCharts();
    Q_EMIT providerScopeChanged(provider);
}

void DashboardController::onHistory(const std::vector<HistoryEvent>& events)
{
    m_events->append(events);
    m_usage.add(events);
    m_chartsDirty = true;
    const qint64 now = nowMs();
    const QVector<StormDetector::Storm> started = m_storms.add(events, now);
    // Storms found in old history end here, not a tick later (the tray must not flash "storm").
    const QStringList ended = m_storms.tick(now);
    for (const auto& storm : started)
        Q_EMIT stormStarted(storm);
    if (!started.isEmpty() || !ended.isEmpty())
        updateTrayState();
    // Leading edge: the first batch after a quiet spell is drawn at once; a flood is drawn
    // at most once per CHART_REFRESH_MS (the tick picks up the rest).
    if (now - m_lastChartMs >= CHART_REFRESH_MS)
        updateCharts();
}

void DashboardController::onRefreshed()
{
    if (!m_loaded) {
        m_loaded = true;
        updateCharts();
        Q_EMIT loadedChanged();
    }
    Q_EMIT refreshed();
}

void DashboardController::tick()
{
    const qint64 now = nowMs();
    ++m_ticks;
    m_providers->tick(now);
    m_holders->tick(now);
    if (!m_storms.tick(now).isEmpty())
        updateTrayState();
    else if (m_trayState == TrayState::Backoff)
        updateTrayState(); // the backoff may just have run out
    if (m_chartsDirty || m_ticks % IDLE_CHART_TICKS == 0)
        updateCharts();
}

void DashboardController::updateCharts()
{
    const qint64 now = nowMs();
    m_usage.prune(now);
    m_callerUsage->setTotals(m_usage.callerTotals(now));
    m_rateLimitCallers->setCallers(m_usage.rateLimitedCallers(now));
    m_chartsDirty = false;
    m_lastChartMs = now;
    Q_EMIT chartsChanged();
}

void DashboardController::updateTrayState()
{
    const qint64 now = nowMs();
    TrayState state = TrayState::Normal;
    bool paused = m_snapshot.state.pausedAll;
    bool backoff = false;
    for (const ProviderState& p : m_snapshot.state.providers) {
        paused = paused || p.paused;
        backoff = backoff || p.backoffUntilMs > now;
    }
    if (m_storms.anyActive())
        state = TrayState::Storm;
    else if (paused)
        state = TrayState::Paused;
    else if (backoff)
        state = TrayState::Backoff;
    if (state != m_trayState) {
        m_trayState = state;
        Q_EMIT trayStateChanged(state);
    }
}

void DashboardController::setStormThreshold(int count, qint64 windowMs)
{
    m_storms.setThreshold(count, windowMs);
}

void DashboardController::setLockDirs(const QStringList& dirs)
{
    m_lockDirs = dirs;
    toWorker([dirs](QuotaObserver* o) { o->setLockDirs(dirs); });
}

void DashboardController::setStaleSeconds(qint64 seconds)
{
    toWorker([seconds](QuotaObserver* o) { o->setStaleSeconds(seconds); });
}

void DashboardController::requestLimits(const QString& provider, const ProviderLimits& limits)
{
    const std::optional<ProviderLimits> shown = m_providers->limitsOf(provider);
    if (!shown) {
        ActionResult r;
        r.action = QStringLiteral("limits");
        r.message = tr("%1 has no limits any more; nothing done.").arg(provider);
        Q_EMIT actionFinished(r);
        return;
    }
    proposeLimitChange(LimitChange { provider, *shown, limits, false, {} });
}

void DashboardController::applyLimitChange(const LimitChange& change)
{
    toWorker([change](QuotaObserver* o) { o->actions()->setLimits(change); });
}

void DashboardController::proposeLimitChange(const LimitChange& change)
{
    const QStringList warnings = change.warnings();
    if (!warnings.isEmpty()) {
        Q_EMIT limitChangeNeedsConfirmation(change, warnings);
        return;
    }
    applyLimitChange(change);
}

std::optional<DashboardController::Adoption> DashboardController::adoptionOf(const QString& provider) const
{
    const std::optional<ProviderLimits> shown = m_providers->limitsOf(provider);
    if (!shown)
        return std::nullopt;
    const ProviderState* state
        = m_snapshot.hasState ? m_snapshot.state.provider(provider.toStdString()) : nullptr;
    auto lesson = LearnedLimits::adoption(*shown, state);
    if (!lesson)
        return std::nullopt;
    LimitChange change { provider, *shown, lesson->limits, false,
        QString::fromStdString(lesson->describe(LearnedLimits::ADOPTED)) };
    return Adoption { std::move(change), std::move(*lesson) };
}

void DashboardController::setLearning(const QString& provider, bool on)
{
    if (!m_providers->limitsOf(provider)) {
        ActionResult r;
        r.action = QStringLiteral("limits");
        r.message = tr("%1 has no limits any more; nothing done.").arg(provider);
        Q_EMIT actionFinished(r);
        return;
    }
    // Through the limits table's request: checked (editRefused) and sent as any edit is.
    m_limits->setLearning(provider, on);
}

void DashboardController::undoLimitChange()
{
    if (!m_lastLimitChange) {
        ActionResult r;
        r.action = QStringLiteral("limits");
        r.message = tr("There is no limit change to undo.");
        Q_EMIT actionFinished(r);
        return;
    }
    proposeLimitChange(m_lastLimitChange->reversed());
}

void DashboardController::onAction(const ActionResult& result)
{
    if (result.hasLimitChange && result.ok) {
        m_lastLimitChange = result.limitChange;
        Q_EMIT undoAvailableChanged(true);
    }
    Q_EMIT actionFinished(result);
}

void DashboardController::pause(const QString& provider, const QString& reason)
{
    toWorker([provider, reason](QuotaObserver* o) { o->actions()->pause(provider, reason); });
}

void DashboardController::resume(const QString& provider)
{
    toWorker([provider](QuotaObserver* o) { o->actions()->resume(provider); });
}

void DashboardController::resetBackoff(const QString& provider)
{
    toWorker([provider](QuotaObserver* o) { o->actions()->resetBackoff(provider); });
}

void DashboardController::releaseHolder(const QString& key, bool confirmed)
{
    if (const HolderInfo* shown = m_holders->holder(key)) {
        releaseHolder(*shown, confirmed);
        return;
    }
    ActionResult r;
    r.action = QStringLiteral("release");
    r.holderKey = key;
    r.message = tr("That holder is no longer shown; nothing done.");
    Q_EMIT actionFinished(r);
}

void DashboardController::releaseHolder(const HolderInfo& shown, bool confirmed)
{
    toWorker([shown, confirmed](QuotaObserver* o) { o->actions()->releaseHolder(shown, confirmed); });
}

void DashboardController::cleanStale(const QStringList& lockPaths)
{
    toWorker([lockPaths](QuotaObserver* o) { o->actions()->cleanStale(lockPaths); });
}

void DashboardController::refreshNow()
{
    toWorker([](QuotaObserver* o) { o->refresh(); });
}

void DashboardController::toWorker(std::function<void(QuotaObserver*)> call)
{
    // The observer is deleted only when the thread has finished, after its inbox's last job.
    m_workerInbox->post([o = m_observer, call = std::move(call)] { call(o); });
}

} // namespace tollgate::ui
