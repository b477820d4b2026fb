// Every dashboard model under QAbstractItemModelTester, fed the way the worker feeds them:
// snapshots and history batches that grow, shrink and change; plus the in-place limit edit.

#include "callerusagemodel.h"
#include "capacitymodel.h"
#include "eventsfiltermodel.h"
#include "eventsmodel.h"
#include "holdersmodel.h"
#include "keyedtableview.h"
#include "providersmodel.h"
#include "ratelimitcallersmodel.h"
#include "usagehistory.h"

#include <QAbstractItemModelTester>
#include <QCoreApplication>
#include <QEvent>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTest>

using namespace tollgate;
using namespace tollgate::ui;

class TestModels final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void providersFollowSnapshots();
    void providersTickCountsDown();
    void limitEditsAreValidated();
    void holdersFollowSnapshots();
    void eventsAppendAndCap();
    void eventsFilter();
    void rowsHoldStillWhileFrozen();
    void aLimitTheProviderContradictsIsShownAndNotGreen();
    void callerAndRateLimitModels();
};

namespace {

constexpr qint64 NOW = 1'700'000'000'000;

ProviderLimits limits(
    std::int64_t requests, std::int64_t windowMs = 60000, std::optional<std::int64_t> parallel = 4)
{
    ProviderLimits l;
    l.requests = requests;
    l.windowMs = windowMs;
    l.parallel = parallel;
    return l;
}

DashboardSnapshot snapshotWith(const std::vector<std::string>& providers)
{
    DashboardSnapshot s;
    s.home = QStringLiteral("/nowhere");
    s.status = HomeStatus::Ready;
    s.nowMs = NOW;
    for (const auto& name : providers) {
        if (!s.limits.set(name, limits(60)))
            qFatal("test limits refused");
        ProviderState& p = s.state.ensureProvider(name);
        p.scopes.push_back({ "", RollingWindow(60000) });
        p.scopes.back().window.record(NOW - 1000, 30, 0);
    }
    return s;
}

HistoryEvent historyEvent(
    qint64 t, const char* type, const char* provider, const char* caller, std::int64_t tokens = 0)
{
    HistoryEvent e;
    e.timeMs = t;
    e.type = eventTypeFromName(type).value_or(EventType::Other);
    if (e.type == EventType::Other)
        e.otherType = type;
    e.provider = provider;
    e.caller = caller;
    e.tokens = tokens;
    return e;
}

QString cell(const QAbstractItemModel& m, int row, int column, int role = Qt::DisplayRole)
{
    return m.index(row, column).data(role).toString();
}

} // namespace

void TestModels::providersFollowSnapshots()
{
    ProvidersModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
    QSignalSpy removed(&model, &QAbstractItemModel::rowsRemoved);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);

    model.setSnapshot(snapshotWith({ "alpha", "beta" }));
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.columnCount(), int(ProvidersModel::ColumnCount));
    QCOMPARE(cell(model, 0, ProvidersModel::Provider), QStringLiteral("alpha"));
    QCOMPARE(cell(model, 0, ProvidersModel::RequestsUsed), QStringLiteral("30 / 60 (50%)"));
    QCOMPARE(
        model.index(0, ProvidersModel::RequestsUsed).data(KeyedTableModel::FractionRole).toDouble(), 0.5);

    // The same snapshot again changes nothing, so nothing is signalled.
    changed.clear();
    model.setSnapshot(snapshotWith({ "alpha", "beta" }));
    QCOMPARE(changed.count(), 0);

    // A provider appears, one goes away, one changes: insert, remove, one dataChanged.
    DashboardSnapshot next = snapshotWith({ "beta", "gamma" });
    next.state.provider("beta")->paused = true;
    next.state.provider("beta")->pauseReason = "maintenance";
    inserted.clear();
    model.setSnapshot(next);
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(removed.count(), 1);
    QCOMPARE(inserted.count(), 1);
    QCOMPARE(model.keyAt(0), QStringLiteral("beta"));
    QCOMPARE(model.keyAt(1), QStringLiteral("gamma"));
    QCOMPARE(cell(model, 0, ProvidersModel::Paused), QStringLiteral("paused: maintenance"));
    QVERIFY(model.isPaused(QStringLiteral("beta")));
    QCOMPARE(reset.count(), 0);

    // Pause all shows on every row.
    next.state.pausedAll = true;
    next.state.pauseReason = "deploy";
    model.setSnapshot(next);
    QCOMPARE(cell(model, 1, ProvidersModel::Paused), QStringLiteral("all paused: deploy"));

    model.setSnapshot(DashboardSnapshot {});
    QCOMPARE(model.rowCount(), 0);
    QCOMPARE(reset.count(), 0);
}

void TestModels::providersTickCountsDown()
{
    ProvidersModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    DashboardSnapshot s = snapshotWith({ "api" });
    ProviderState* p = s.state.provider("api");
    p->backoffUntilMs = NOW + 10'000;
    p->consecutive429 = 3;
    model.setSnapshot(s);
    QCOMPARE(cell(model, 0, ProvidersModel::Backoff), QStringLiteral("10 s"));
    QCOMPARE(cell(model, 0, ProvidersModel::Consecutive429), QStringLiteral("3"));
    QVERIFY(model.inBackoff(QStringLiteral("api")));
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.tick(NOW + 4'500);
    QCOMPARE(cell(model, 0, ProvidersModel::Backoff), QStringLiteral("6 s"));
    QCOMPARE(changed.count(), 1);
    // The window slides too: a minute later the 30 requests are out of it.
    model.tick(NOW + 62'000);
    QCOMPARE(cell(model, 0, ProvidersModel::Backoff), QString());
    QCOMPARE(cell(model, 0, ProvidersModel::RequestsUsed), QStringLiteral("0 / 60 (0%)"));
}

void TestModels::limitEditsAreValidated()
{
    ProvidersModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setSnapshot(snapshotWith({ "api" }));
    QSignalSpy requested(&model, &ProvidersModel::limitsEditRequested);
    QSignalSpy refused(&model, &ProvidersModel::editRefused);

    const QModelIndex window = model.index(0, ProvidersModel::Window);
    QVERIFY(model.flags(window) & Qt::ItemIsEditable);
    QVERIFY(!(model.flags(model.index(0, ProvidersModel::RequestsUsed)) & Qt::ItemIsEditable));
    QCOMPARE(window.data(Qt::EditRole).toString(), QStringLiteral("60"));

    // Every edited field is checked by the core's one range check, with the core's words
    // (llround(1e300 * 1000) used to overflow before any check saw the value).
    const auto coreSays = [](LimitField f, double v, const char* name) {
        return QString::fromStdString(QuotaLimits::check(f, v, name).error().message);
    };
    QVERIFY(!model.setData(window, QStringLiteral("0")));
    QCOMPARE(refused.count(), 1);
    QVERIFY2(refused.last().at(1).toString().contains(coreSays(LimitField::WindowSeconds, 0, "window")),
        qPrintable(refused.last().at(1).toString()));
    QVERIFY(!model.setData(window, QStringLiteral("1e300")));
    QVERIFY2(refused.last().at(1).toString().contains(coreSays(LimitField::WindowSeconds, 1e300, "window")),
        qPrintable(refused.last().at(1).toString()));
    QVERIFY(!model.setData(window, QStringLiteral("0.0001")));
    QVERIFY2(refused.last().at(1).toString().contains(coreSays(LimitField::WindowSeconds, 0.0001, "window")),
        qPrintable(refused.last().at(1).toString()));
    QVERIFY(!model.setData(model.index(0, ProvidersModel::TokenLimit), QStringLiteral("1e30")));
    QVERIFY2(refused.last().at(1).toString().contains(coreSays(LimitField::Tokens, 1e30, "tokens")),
        qPrintable(refused.last().at(1).toString()));
    refused.clear();
    QVERIFY(!model.setData(window, QStringLiteral("-5")));
    QCOMPARE(refused.count(), 1);
    QVERIFY(refused.last().at(1).toString().contains(QStringLiteral("-5")));
    QVERIFY(!model.setData(window, QStringLiteral("soon")));
    QVERIFY(!model.setData(model.index(0, ProvidersModel::RequestLimit), QStringLiteral("12.5")));
    // The core's own rules apply too: parallel above the maximum.
    QVERIFY(!model.setData(model.index(0, ProvidersModel::Parallel), QStringLiteral("100000")));
    QVERIFY(refused.last().at(1).toString().contains(QStringLiteral("parallel")));
    QCOMPARE(requested.count(), 0);

    QVERIFY(model.setData(window, QStringLiteral("30")));
    QCOMPARE(requested.count(), 1);
    QCOMPARE(requested.last().at(0).toString(), QStringLiteral("api"));
    const auto edited = requested.last().at(1).value<ProviderLimits>();
    QCOMPARE(edited.windowMs, std::int64_t(30000));
    QCOMPARE(edited.requests, std::optional<std::int64_t>(60));

    QVERIFY(model.setData(model.index(0, ProvidersModel::TokenLimit), QStringLiteral("5000")));
    QCOMPARE(requested.last().at(1).value<ProviderLimits>().tokens, std::optional<std::int64_t>(5000));
    QVERIFY(model.setData(model.index(0, ProvidersModel::Parallel), QString()));
    QVERIFY(!requested.last().at(1).value<ProviderLimits>().parallel);
}

void TestModels::holdersFollowSnapshots()
{
    HoldersModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    DashboardSnapshot s;
    s.nowMs = NOW;
    HolderInfo slot;
    slot.kind = HolderKind::Slot;
    slot.key = QStringLiteral("slot:api:7");
    slot.provider = QStringLiteral("api");
    slot.fence = 7;
    slot.pid = 4242;
    slot.who = QStringLiteral("indexer");
    slot.sinceMs = NOW - 90'000;
    slot.health = HolderHealth::Dead;
    HolderInfo lock;
    lock.kind = HolderKind::LockFile;
    lock.key = QStringLiteral("lock:/tmp/x/deploy.lock");
    lock.path = QStringLiteral("/tmp/x/deploy.lock");
    lock.pid = 99;
    lock.who = QStringLiteral("nightly deploy");
    lock.sinceMs = NOW - 5'000;
    lock.commandLine = QStringLiteral("bash deploy.sh");
    s.holders = { slot, lock };
    model.setSnapshot(s);
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(cell(model, 0, HoldersModel::Health), QStringLiteral("dead"));
    QCOMPARE(cell(model, 0, HoldersModel::Age), QStringLiteral("1 min 30 s"));
    QCOMPARE(cell(model, 1, HoldersModel::Where), QStringLiteral("deploy.lock"));
    QCOMPARE(cell(model, 1, HoldersModel::CommandLine), QStringLiteral("bash deploy.sh"));
    QCOMPARE(model.deadCount(), 1);
    QCOMPARE(model.index(1, 0).data(KeyedTableModel::KeyRole).toString(), lock.key);

    model.tick(NOW + 60'000);
    QCOMPARE(cell(model, 1, HoldersModel::Age), QStringLiteral("1 min 5 s"));

    s.holders = { lock };
    model.setSnapshot(s);
    QCOMPARE(model.rowCount(), 1);
    QCOMPARE(model.keyAt(0), lock.key);
    QVERIFY(model.holder(lock.key));
    QVERIFY(!model.holder(slot.key));
}

void TestModels::eventsAppendAndCap()
{
    EventsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    model.append({ historyEvent(NOW, "admit", "api", "a", 12), historyEvent(NOW + 1, "429", "api", "b") });
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(cell(model, 1, EventsModel::Type), QStringLiteral("429"));
    QCOMPARE(cell(model, 0, EventsModel::Details), QStringLiteral("12 tokens"));

    std::vector<HistoryEvent> many;
    for (int i = 0; i < EventsModel::MAX_ROWS; ++i)
        many.push_back(historyEvent(NOW + 10 + i, "admit", "api", "c"));
    model.append(many);
    QCOMPARE(model.rowCount(), EventsModel::MAX_ROWS);
    QCOMPARE(cell(model, 0, EventsModel::Caller), QStringLiteral("c"));
    // A batch bigger than the cap keeps only its newest rows.
    many.push_back(historyEvent(NOW + 99999, "pause", "", ""));
    model.append(many);
    QCOMPARE(model.rowCount(), EventsModel::MAX_ROWS);
    QCOMPARE(cell(model, EventsModel::MAX_ROWS - 1, EventsModel::Type), QStringLiteral("pause"));
    QCOMPARE(cell(model, EventsModel::MAX_ROWS - 1, EventsModel::Provider), QStringLiteral("(all)"));
    model.clear();
    QCOMPARE(model.rowCount(), 0);
    QCOMPARE(reset.count(), 0);
}

void TestModels::eventsFilter()
{
    EventsModel model;
    EventsFilterModel filter;
    filter.setSourceModel(&model);
    QAbstractItemModelTester tester(&filter, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.append({ historyEvent(NOW, "admit", "api", "indexer"), historyEvent(NOW + 1, "429", "api", "chat"),
        historyEvent(NOW + 2, "429", "other", "indexer"), historyEvent(NOW + 3, "pause", "api", "") });
    QCOMPARE(filter.rowCount(), 4);
    filter.setTypeFilter(QStringLiteral("429"));
    QCOMPARE(filter.rowCount(), 2);
    filter.setTextFilter(QStringLiteral("INDEXER"));
    QCOMPARE(filter.rowCount(), 1);
    QCOMPARE(filter.index(0, EventsModel::Provider).data().toString(), QStringLiteral("other"));
    model.append({ historyEvent(NOW + 4, "429", "api", "indexer") });
    QCOMPARE(filter.rowCount(), 2);
    filter.setTypeFilter(QString());
    filter.setTextFilter(QString());
    QCOMPARE(filter.rowCount(), 5);

    // Issue 28, item 10: "429" finds the rate limits, not the events whose time holds 429.
    EventsModel timed;
    EventsFilterModel text;
    text.setSourceModel(&timed);
    const qint64 at429 = (NOW / 1000) * 1000 + 429; // ….429 s
    timed.append(
        { historyEvent(at429, "admit", "api", "indexer"), historyEvent(at429 + 1000, "429", "api", "chat") });
    QVERIFY(timed.index(0, EventsModel::Time).data().toString().contains(QStringLiteral("429")));
    text.setTextFilter(QStringLiteral("429"));
    QCOMPARE(text.rowCount(), 1);
    QCOMPARE(text.index(0, EventsModel::Caller).data().toString(), QStringLiteral("chat"));
}

// Issue 28, item 4: rows moved under the pointer (a row reappeared where a click was aimed).
// While frozen, a vanished row stays and new rows go to the end; thawed, the rows catch up.
// The view freezes while the pointer is over it and stops its sorting proxy meanwhile.
void TestModels::rowsHoldStillWhileFrozen()
{
    auto totals = [](std::initializer_list<const char*> callers) {
        QVector<UsageHistory::CallerTotals> out;
        for (const char* c : callers)
            out.append({ QStringLiteral("api"), QString::fromLatin1(c), 0, 1, 0, 0.5 });
        return out;
    };
    CallerUsageModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setTotals(totals({ "a", "b" }));
    model.freeze(true);
    model.setTotals(totals({ "a", "c" }));
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(cell(model, 1, CallerUsageModel::Caller), QStringLiteral("b")); // still where it was
    QCOMPARE(cell(model, 2, CallerUsageModel::Caller), QStringLiteral("c"));
    model.setTotals(totals({ "a", "b", "c" })); // b came back: not on its way out any more
    model.freeze(false);
    QCOMPARE(model.rowCount(), 3);
    model.freeze(true);
    model.setTotals(totals({ "c" }));
    model.freeze(false);
    QCOMPARE(model.rowCount(), 1);
    QCOMPARE(cell(model, 0, CallerUsageModel::Caller), QStringLiteral("c"));

    QSortFilterProxyModel sorted;
    sorted.setSourceModel(&model);
    KeyedTableView view;
    view.setModel(&sorted);
    QVERIFY(sorted.dynamicSortFilter());
    QEvent enter(QEvent::Enter);
    QCoreApplication::sendEvent(view.viewport(), &enter);
    QVERIFY(view.rowsFrozen() && model.isFrozen() && !sorted.dynamicSortFilter());
    view.freezeRows(true); // a menu opened on it: the pointer leaves for the menu
    QEvent leave(QEvent::Leave);
    QCoreApplication::sendEvent(view.viewport(), &leave);
    QVERIFY(model.isFrozen());
    view.freezeRows(false); // the menu closed
    QVERIFY(!view.rowsFrozen() && !model.isFrozen() && sorted.dynamicSortFilter());
}

// Issue 28, item 9: a provider whose headers report another limit than Tollgate's stayed green,
// with no column for it. The providers' table shows what it reports (amber, the difference in
// the tooltip) and its tile is not green.
void TestModels::aLimitTheProviderContradictsIsShownAndNotGreen()
{
    DashboardSnapshot s = snapshotWith({ "alpha" }); // 60 requests a minute set
    s.hasState = true;
    ProviderState* p = s.state.provider("alpha");
    p->reportedAtMs = NOW - 1000;
    p->reportedRequests = 40;
    ProvidersModel model;
    model.setSnapshot(s);
    const QModelIndex reports = model.index(0, ProvidersModel::ProviderReports);
    QCOMPARE(reports.data().toString(), QStringLiteral("40 req/min"));
    QVERIFY(reports.data(Qt::ForegroundRole).isValid());
    QVERIFY2(reports.data(Qt::ToolTipRole).toString().contains(QStringLiteral("40")),
        qPrintable(reports.data(Qt::ToolTipRole).toString()));
    CapacityModel tiles;
    tiles.setSnapshot(s, NOW);
    QCOMPARE(tiles.rows().size(), 1);
    QCOMPARE(tiles.rows().at(0).level, CapacityModel::Level::Near);

    // The same figure as the limit set: nothing to say, green.
    p->reportedRequests = 60;
    model.setSnapshot(s);
    QVERIFY(!model.index(0, ProvidersModel::ProviderReports).data(Qt::ForegroundRole).isValid());
    tiles.setSnapshot(s, NOW);
    QCOMPARE(tiles.rows().at(0).level, CapacityModel::Level::Ok);
}

void TestModels::callerAndRateLimitModels()
{
    UsageHistory usage;
    usage.add({ historyEvent(NOW - 120'000, "admit", "api", "indexer", 100),
        historyEvent(NOW - 1000, "admit", "api", "indexer", 50),
        historyEvent(NOW - 500, "admit", "api", "chat"), historyEvent(NOW - 400, "429", "api", "chat"),
        historyEvent(NOW - 300, "429", "api", "indexer"), historyEvent(NOW - 200, "429", "api", "chat") });

    CallerUsageModel callers;
    QAbstractItemModelTester t1(&callers, QAbstractItemModelTester::FailureReportingMode::QtTest);
    callers.setTotals(usage.callerTotals(NOW));
    QCOMPARE(callers.rowCount(), 2);
    QCOMPARE(cell(callers, 0, CallerUsageModel::Caller), QStringLiteral("indexer"));
    QCOMPARE(cell(callers, 0, CallerUsageModel::Provider), QStringLiteral("api"));
    QCOMPARE(cell(callers, 0, CallerUsageModel::LastHour), QStringLiteral("2"));
    QCOMPARE(cell(callers, 0, CallerUsageModel::Tokens), QStringLiteral("150"));
    QCOMPARE(cell(callers, 0, CallerUsageModel::Share), QStringLiteral("67%"));
    // An hour later nobody is left.
    callers.setTotals(usage.callerTotals(NOW + 3'700'000));
    QCOMPARE(callers.rowCount(), 0);

    // Issue 28, item 2: one caller at two providers spends two quotas: two rows, each with its
    // provider (the table had no provider column and summed them).
    UsageHistory two;
    two.add({ historyEvent(NOW - 3000, "admit", "api", "indexer"),
        historyEvent(NOW - 2000, "admit", "api", "indexer"),
        historyEvent(NOW - 1000, "admit", "other", "indexer") });
    callers.setTotals(two.callerTotals(NOW));
    QCOMPARE(callers.rowCount(), 2);
    QCOMPARE(cell(callers, 0, CallerUsageModel::Provider), QStringLiteral("api"));
    QCOMPARE(cell(callers, 0, CallerUsageModel::LastHour), QStringLiteral("2"));
    QCOMPARE(cell(callers, 1, CallerUsageModel::Provider), QStringLiteral("other"));
    QCOMPARE(cell(callers, 1, CallerUsageModel::LastHour), QStringLiteral("1"));

    RateLimitCallersModel limited;
    QAbstractItemModelTester t2(&limited, QAbstractItemModelTester::FailureReportingMode::QtTest);
    limited.setCallers(usage.rateLimitedCallers(NOW));
    QCOMPARE(limited.rowCount(), 2);
    QCOMPARE(cell(limited, 0, RateLimitCallersModel::Caller), QStringLiteral("chat"));
    QCOMPARE(cell(limited, 0, RateLimitCallersModel::Count), QStringLiteral("2"));
    usage.add({ historyEvent(NOW, "429", "other", "batch") });
    limited.setCallers(usage.rateLimitedCallers(NOW));
    QCOMPARE(limited.rowCount(), 3);
    limited.setCallers({});
    QCOMPARE(limited.rowCount(), 0);
}

QTEST_MAIN(TestModels)
#include "tst_models.moc"
