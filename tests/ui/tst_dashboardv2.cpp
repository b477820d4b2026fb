// Dashboard v2 (issue 9): capacity at a glance computed from a known state at a fixed clock,
// chart spans and zoom, the keyboard, a window that fits its screen, events that follow, the
// per-caller / per-provider scope of the event log, and the palette. Real homes and the real
// limiter where the window is involved; fixed clocks and hand-made states where figures are
// asserted.

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "capacitymodel.h"
#include "capacitypanel.h"
#include "chartspan.h"
#include "dashboardcontroller.h"
#include "eventsfiltermodel.h"
#include "eventsmodel.h"
#include "holdersmodel.h"
#include "keyedtableview.h"
#include "mainwindow.h"
#include "providersmodel.h"
#include "quota/quotapolicy.h"
#include "ratelimitchart.h"
#include "store/filequotastore.h"
#include "testsupport.h"
#include "usagechart.h"
#include "usagehistory.h"
#include "windowfit.h"

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QHeaderView>
#include <QHelpEvent>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QPushButton>
#include <QScreen>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSplitter>
#include <QTemporaryDir>
#include <QTest>
#include <QToolTip>
#include <QtCharts/QChart>
#include <QtCharts/QScatterSeries>

using namespace tollgate;
using namespace tollgate::ui;

class TestDashboardV2 final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void cleanup();

    // Capacity (model and panel; the arithmetic itself is core's, tests/tst_capacity.cpp).
    void capacityFullWindowSaysWhenTheNextRequestFrees();
    void capacityBackoffCountsDown();
    void capacityPauseShowsItsReason();
    void capacitySaysWhenTheProviderReportsOtherLimits();
    void capacityNearAndTokensAndSlots();
    void capacityHostileNamesArePlainText();
    void capacityOnCorruptLimitsRefusesEveryCall();
    void capacityPanelInTheWindow();

    // Charts.
    void spanSwitchingChangesRangeAndBuckets();
    void spanChoiceInTheWindowIsRemembered();
    void zoomNarrowsAndResets();
    void limitLineOnTheUsageChart();
    void clumpedMarkersAreGrouped();
    void markerTipStaysWhileHoveredAndPins();

    // Keyboard.
    void shortcutsTriggerTheirActions();
    void shortcutsAreShownInMenusAndTooltips();

    // Window.
    void windowFitClampsOntoTheScreen();
    void savedGeometryIsClampedOntoASmallerScreen();
    void windowFitsA1280x720Screen();
    void everyColumnIsOnScreenAt1280AndNoneTakesTheRestAt1920();
    void splittersAndHiddenPanelsAreRemembered();

    // Events.
    void eventsFollowAndStopFollowing();
    void scopeFromARightClick();

    // Look.
    void pauseToggleShowsTheState();
    void chartsFollowThePalette();

private:
    void makeHome(const ProviderLimits& limits = defaultLimits());
    static ProviderLimits defaultLimits();
    [[nodiscard]] DashboardOptions options() const;

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
    QString m_locks;
    SystemClock m_clock;
    ProcessProbe m_probe;
    std::unique_ptr<FileQuotaStore> m_store;
    std::unique_ptr<QuotaLimiter> m_limiter;
};

namespace {

constexpr int TIMEOUT_MS = 15000;
// 32 s windows have 1 s buckets (RollingWindow::BUCKETS = 32): the times below are exact.
constexpr std::int64_t WINDOW_MS = 32000;
constexpr std::int64_t T0 = 1'000'000'000'000; // a bucket edge

AdmitRequest call(const std::string& provider, std::int64_t tokens = 1, bool slot = false)
{
    AdmitRequest r;
    r.provider = provider;
    r.caller = "c";
    r.tokens = tokens;
    r.wantsSlot = slot;
    r.pid = 100;
    return r;
}

// A snapshot as the observer hands it over, built with the limiter's own policy functions.
class StateBuilder
{
public:
    DashboardSnapshot snapshot;

    StateBuilder() { snapshot.hasState = true; }
    void limits(const std::string& provider, const ProviderLimits& l)
    {
        QVERIFY(snapshot.limits.set(provider, l));
    }
    void admit(const std::string& provider, std::int64_t nowMs, std::int64_t tokens = 1, bool slot = false)
    {
        const ProviderLimits* l = snapshot.limits.find(provider);
        QVERIFY(l);
        ProviderState& p = snapshot.state.ensureProvider(provider);
        QuotaPolicy::syncProvider(p, *l, nowMs);
        auto d = QuotaPolicy::admit(snapshot.state, p, *l, call(provider, tokens, slot), 0, nowMs, false);
        QVERIFY(d.ok());
        QVERIFY2(d->admitted, waitReasonName(d->reason));
    }
    void rateLimited(const std::string& provider, std::int64_t nowMs)
    {
        const ProviderLimits* l = snapshot.limits.find(provider);
        ProviderState& p = snapshot.state.ensureProvider(provider);
        QuotaPolicy::syncProvider(p, *l, nowMs);
        QuotaPolicy::apply429(p, *l, nowMs, std::nullopt, 0);
    }
};

ProviderLimits windowLimits(std::int64_t requests)
{
    ProviderLimits l;
    l.windowMs = WINDOW_MS;
    l.requests = requests;
    return l;
}

void writeLock(const QString& path, qint64 pid, qint64 timestamp, const QByteArray& tag)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("pid=" + QByteArray::number(pid) + "\ntimestamp=" + QByteArray::number(timestamp) + "\ntag=" + tag
        + "\n");
}

HistoryEvent admitted(qint64 t, const char* caller, std::int64_t tokens = 1)
{
    HistoryEvent e;
    e.timeMs = t;
    e.type = EventType::Admit;
    e.provider = "api";
    e.caller = caller;
    e.tokens = tokens;
    return e;
}

bool activate(QWidget& w)
{
    w.show();
    w.activateWindow();
    return QTest::qWaitForWindowActive(&w);
}

} // namespace

#define OPEN_WINDOW(w)                                                                                       \
    MainWindow w(options());                                                                                 \
    w.show();                                                                                                \
    QVERIFY(QTest::qWaitForWindowExposed(&w));                                                               \
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS)

void TestDashboardV2::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->path() + QStringLiteral("/home");
    m_locks = m_dir->path() + QStringLiteral("/locks");
    QVERIFY(QDir().mkpath(m_locks));
}

void TestDashboardV2::cleanup()
{
    m_limiter.reset();
    m_store.reset();
}

ProviderLimits TestDashboardV2::defaultLimits()
{
    ProviderLimits l;
    l.requests = 60;
    l.parallel = 4;
    return l;
}

DashboardOptions TestDashboardV2::options() const
{
    return DashboardOptions { m_home, { m_locks }, m_dir->path() + QStringLiteral("/dashboard.ini") };
}

void TestDashboardV2::makeHome(const ProviderLimits& limits)
{
    auto store = FileQuotaStore::open(m_home.toStdString(), m_clock);
    QVERIFY(store);
    m_store = std::move(store).value();
    m_limiter = std::make_unique<QuotaLimiter>(*m_store, m_clock, m_probe);
    QVERIFY(m_limiter->setLimits("api", limits, "test"));
}

// ---------------------------------------------------------------------------------------------
// Capacity

void TestDashboardV2::capacityFullWindowSaysWhenTheNextRequestFrees()
{
    StateBuilder s;
    s.limits("api", windowLimits(3));
    s.admit("api", T0); // counted in bucket T0/1000, which leaves the window at T0 + 33 s
    s.admit("api", T0 + 5000);
    s.admit("api", T0 + 9000);

    CapacityModel model;
    CapacityPanel panel(&model);
    QSignalSpy changed(&model, &CapacityModel::changed);
    model.setSnapshot(s.snapshot, T0 + 10000);
    QCOMPARE(changed.count(), 1);
    const CapacityModel::Row* r = model.row(QStringLiteral("api"));
    QVERIFY(r);
    QCOMPARE(r->level, CapacityModel::Level::Blocked);
    QCOMPARE(r->headline, QStringLiteral("0 left"));
    QCOMPARE(r->next, QStringLiteral("next free in 23 s"));
    QVERIFY2(r->details.contains(QStringLiteral("0 / 3 requests left per 32 s")),
        qPrintable(r->details.join(QLatin1Char('|'))));
    QCOMPARE(panel.providers(), QStringList { QStringLiteral("api") });
    QVERIFY(panel.tileText(QStringLiteral("api")).contains(QStringLiteral("next free in 23 s")));

    // The countdown moves with the clock alone (no new snapshot); rounded up, never early.
    model.tick(T0 + 32001);
    QCOMPARE(model.row(QStringLiteral("api"))->next, QStringLiteral("next free in 1 s"));
    QVERIFY(panel.tileText(QStringLiteral("api")).contains(QStringLiteral("next free in 1 s")));
    // The same instant again: nothing changed, no signal.
    const int before = changed.count();
    model.tick(T0 + 32001);
    QCOMPARE(changed.count(), before);

    // The oldest request left the window: one left, a call can go now.
    model.tick(T0 + 33000);
    r = model.row(QStringLiteral("api"));
    QCOMPARE(r->level, CapacityModel::Level::Ok);
    QCOMPARE(r->headline, QStringLiteral("1 left"));
    QCOMPARE(r->next, QStringLiteral("next call: now"));
    QVERIFY(r->details.contains(QStringLiteral("1 / 3 requests left per 32 s")));
    auto* tile = panel.findChild<QFrame*>(QStringLiteral("capacityTile"));
    QVERIFY(tile);
    QCOMPARE(tile->property("level").toInt(), int(CapacityModel::Level::Ok));
}

// Limits that do not parse reach the model as none: core's figures then say "no limit, next
// call: now" in green, while every command refuses (exit 3) until the file is fixed.
void TestDashboardV2::capacityOnCorruptLimitsRefusesEveryCall()
{
    StateBuilder s;
    s.limits("api", windowLimits(3));
    s.admit("api", T0);
    DashboardSnapshot corrupt = s.snapshot;
    corrupt.limits = QuotaLimits {};
    corrupt.corruptFile = QStringLiteral("/home/u/.local/state/tollgate/limits.json");
    corrupt.corruptReason = QStringLiteral("unexpected end of input");
    corrupt.limitsCorrupt = true;

    CapacityModel model;
    CapacityPanel panel(&model);
    model.setSnapshot(corrupt, T0 + 1000);
    const CapacityModel::Row* r = model.row(QStringLiteral("api"));
    QVERIFY(r);
    QCOMPARE(r->level, CapacityModel::Level::Blocked);
    QCOMPARE(r->headline, QStringLiteral("LIMITS CORRUPT"));
    QVERIFY2(!r->next.contains(QStringLiteral("now")), qPrintable(r->next));
    QVERIFY2(r->details.join(QLatin1Char('|')).contains(QStringLiteral("unexpected end of input")),
        qPrintable(r->details.join(QLatin1Char('|'))));
    QVERIFY(!panel.tileText(QStringLiteral("api")).contains(QStringLiteral("no limit")));

    // Fixed: the tile shows the limits again.
    model.setSnapshot(s.snapshot, T0 + 1000);
    r = model.row(QStringLiteral("api"));
    QCOMPARE(r->level, CapacityModel::Level::Ok);
    QCOMPARE(r->headline, QStringLiteral("2 left"));
}

void TestDashboardV2::capacityBackoffCountsDown()
{
    StateBuilder s;
    ProviderLimits l = windowLimits(100);
    l.backoffBaseMs = 60000;
    s.limits("api", l);
    s.rateLimited("api", T0 - 60000);
    s.rateLimited("api", T0); // the storm's next step, the first backoff over: 120 s

    CapacityModel model;
    model.setSnapshot(s.snapshot, T0 + 15000);
    const CapacityModel::Row* r = model.row(QStringLiteral("api"));
    QVERIFY(r);
    QCOMPARE(r->level, CapacityModel::Level::Blocked);
    QCOMPARE(r->headline, QStringLiteral("BACKING OFF"));
    QCOMPARE(r->next, QStringLiteral("next free in 1 min 45 s"));
    QVERIFY2(r->details.contains(QStringLiteral("backoff 1 min 45 s left (2 × 429)")),
        qPrintable(r->details.join(QLatin1Char('|'))));
    model.tick(T0 + 119500);
    QCOMPARE(model.row(QStringLiteral("api"))->next, QStringLiteral("next free in 1 s"));
}

// The provider's own limits (learned by the proxy from its headers) differ from the ones set:
// the tile says so in the core's words, and stops saying it once they agree.
void TestDashboardV2::capacitySaysWhenTheProviderReportsOtherLimits()
{
    StateBuilder s;
    ProviderLimits l = windowLimits(60);
    l.windowMs = 60000;
    s.limits("api", l);
    ProviderState& p = s.snapshot.state.ensureProvider("api");
    p.reportedAtMs = T0;
    p.reportedRequests = 40;

    CapacityModel model;
    model.setSnapshot(s.snapshot, T0 + 1000);
    const CapacityModel::Row* r = model.row(QStringLiteral("api"));
    QVERIFY(r);
    QVERIFY2(r->details.contains(QStringLiteral("⚠ provider reports 40 requests/min; Tollgate is set to 60")),
        qPrintable(r->details.join(QLatin1Char('|'))));
    // Not a block (the limits set apply), but not green either (issue 28: it stayed green).
    QCOMPARE(r->level, CapacityModel::Level::Near);
    QVERIFY(r->tooltip.contains(QStringLiteral("rate-limit headers")));

    l.requests = 40;
    s.limits("api", l);
    model.setSnapshot(s.snapshot, T0 + 2000);
    r = model.row(QStringLiteral("api"));
    for (const QString& d : r->details)
        QVERIFY2(!d.contains(QStringLiteral("provider reports")), qPrintable(d));
}

void TestDashboardV2::capacityPauseShowsItsReason()
{
    StateBuilder s;
    s.limits("api", windowLimits(10));
    s.limits("other", windowLimits(10));
    ProviderState& p = s.snapshot.state.ensureProvider("api");
    p.paused = true;
    p.pauseReason = "maintenance window";
    p.pausedAtMs = T0;

    CapacityModel model;
    model.setSnapshot(s.snapshot, T0 + 1000);
    const CapacityModel::Row* r = model.row(QStringLiteral("api"));
    QCOMPARE(r->level, CapacityModel::Level::Blocked);
    QCOMPARE(r->headline, QStringLiteral("PAUSED"));
    QCOMPARE(r->next, QStringLiteral("until resumed"));
    QVERIFY(r->details.contains(QStringLiteral("paused: maintenance window")));
    QCOMPARE(model.row(QStringLiteral("other"))->level, CapacityModel::Level::Ok);

    // Everything paused: every provider says so, with the global reason.
    s.snapshot.state.pausedAll = true;
    s.snapshot.state.pauseReason = "deploy";
    s.snapshot.state.pausedAtMs = T0;
    model.setSnapshot(s.snapshot, T0 + 1000);
    r = model.row(QStringLiteral("other"));
    QCOMPARE(r->headline, QStringLiteral("PAUSED"));
    QVERIFY2(r->details.contains(QStringLiteral("paused (everything): deploy")),
        qPrintable(r->details.join(QLatin1Char('|'))));
}

void TestDashboardV2::capacityNearAndTokensAndSlots()
{
    StateBuilder s;
    ProviderLimits l = windowLimits(10);
    l.tokens = 1000;
    l.parallel = 2;
    s.limits("api", l);
    for (int i = 0; i < 8; ++i)
        s.admit("api", T0 + i * 100, 50);
    s.admit("api", T0 + 900, 100, true); // holds a slot

    CapacityModel model;
    CapacityPanel panel(&model);
    model.setSnapshot(s.snapshot, T0 + 2000);
    const CapacityModel::Row* r = model.row(QStringLiteral("api"));
    QCOMPARE(r->level, CapacityModel::Level::Near); // 9 of 10 requests
    QCOMPARE(r->headline, QStringLiteral("1 left"));
    QVERIFY2(r->details.contains(QStringLiteral("500 / 1,000 tokens left")),
        qPrintable(r->details.join(QLatin1Char('|'))));
    QVERIFY(r->details.contains(QStringLiteral("1 / 2 slots free")));
    auto* tile = panel.findChild<QFrame*>(QStringLiteral("capacityTile"));
    QCOMPARE(tile->property("level").toInt(), int(CapacityModel::Level::Near));

    // No state yet (a home with limits only): the limits with everything left.
    DashboardSnapshot empty;
    empty.limits = s.snapshot.limits;
    model.setSnapshot(empty, T0);
    QCOMPARE(model.row(QStringLiteral("api"))->headline, QStringLiteral("10 left"));
    QCOMPARE(model.row(QStringLiteral("api"))->level, CapacityModel::Level::Ok);
    // A provider removed: its tile goes.
    model.setSnapshot(DashboardSnapshot {}, T0);
    QVERIFY(model.rows().isEmpty());
    QTRY_VERIFY(panel.findChildren<QFrame*>(QStringLiteral("capacityTile")).isEmpty());
}

void TestDashboardV2::capacityHostileNamesArePlainText()
{
    // A provider name is whatever a caller typed: markup and control bytes stay text.
    StateBuilder s;
    // (limits.json refuses such names; a state file is whatever is in it.)
    const std::string name = "<b>x</b>\x1b[31m";
    s.snapshot.state.ensureProvider(name).paused = true;
    CapacityModel model;
    CapacityPanel panel(&model);
    model.setSnapshot(s.snapshot, T0);
    const QString qname = QString::fromStdString(name);
    QCOMPARE(panel.providers(), QStringList { qname });
    auto* tile = panel.findChild<QFrame*>(QStringLiteral("capacityTile"));
    QVERIFY(tile);
    for (QLabel* label : tile->findChildren<QLabel*>())
        QCOMPARE(label->textFormat(), Qt::PlainText);
    QVERIFY(panel.tileText(qname).startsWith(qname));

    // Huge figures are shown in full, not wrapped or overflowed.
    StateBuilder big;
    big.limits("api", windowLimits(QuotaLimits::MAX_COUNT));
    model.setSnapshot(big.snapshot, T0);
    QVERIFY2(model.row(QStringLiteral("api"))->headline.startsWith(QStringLiteral("1,099,511,627,776")),
        qPrintable(model.row(QStringLiteral("api"))->headline));
}

void TestDashboardV2::capacityPanelInTheWindow()
{
    ProviderLimits l = defaultLimits();
    l.requests = 2;
    makeHome(l);
    OPEN_WINDOW(w);
    auto* panel = w.findChild<CapacityPanel*>(QStringLiteral("capacityPanel"));
    QVERIFY(panel);
    QTRY_COMPARE_WITH_TIMEOUT(panel->providers(), QStringList { QStringLiteral("api") }, TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(
        panel->tileText(QStringLiteral("api")).contains(QStringLiteral("2 left")), TIMEOUT_MS);
    // Two real admissions through the limiter: the window is full and the tile says when a
    // request frees up.
    for (int i = 0; i < 2; ++i) {
        AdmitRequest r = call("api");
        r.pid = ProcessProbe::selfPid();
        r.pidNs = m_probe.pidNamespace();
        QVERIFY(m_limiter->acquire(r, m_clock.now()).ok()); // a try: admitted now or refused
    }
    QTRY_VERIFY_WITH_TIMEOUT(
        panel->tileText(QStringLiteral("api")).contains(QStringLiteral("next free in")), TIMEOUT_MS);
    QCOMPARE(w.capacity()->row(QStringLiteral("api"))->level, CapacityModel::Level::Blocked);
}

// ---------------------------------------------------------------------------------------------
// Charts

void TestDashboardV2::spanSwitchingChangesRangeAndBuckets()
{
    const qint64 now = T0 + 5000;
    UsageHistory usage;
    std::vector<HistoryEvent> events;
    for (int i = 0; i < 20; ++i)
        events.push_back(admitted(now - i * 20'000, "a"));
    events.push_back(TestSupport::rateLimited(now - 2 * ChartSpan::MINUTE_MS, "api", "a"));
    usage.add(events);

    UsageChart chart;
    RateLimitChart rate;
    const struct
    {
        qint64 span;
        qint64 width;
    } cases[] = { { 5 * ChartSpan::MINUTE_MS, 10'000 }, { 15 * ChartSpan::MINUTE_MS, 30'000 },
        { ChartSpan::HOUR_MS, 60'000 }, { 6 * ChartSpan::HOUR_MS, 300'000 },
        { 24 * ChartSpan::HOUR_MS, 900'000 } };
    for (const auto& c : cases) {
        for (TimeChartView* view :
            { static_cast<TimeChartView*>(&chart), static_cast<TimeChartView*>(&rate) }) {
            view->setSpan(c.span);
            if (view == &chart)
                chart.update(usage, now);
            else
                rate.update(usage, now);
            QCOMPARE(view->effectiveSpan(), c.span);
            QCOMPARE(view->buckets().widthMs, c.width);
            QCOMPARE(view->axisMaxMs() - view->axisMinMs(), c.span);
            QVERIFY(view->axisMinMs() <= now - c.span + c.width && view->axisMaxMs() > now);
        }
        // Every admission falls in the span (all within 6.4 minutes) except in 5 minutes.
        const auto points = chart.bandPoints(0);
        QCOMPARE(points.size(), static_cast<qsizetype>(int(c.span / c.width) * 2 + 1));
        QCOMPARE(qint64(points.first().x()), chart.axisMinMs());
        QCOMPARE(rate.totalShown(), 1);
    }
    QVERIFY(chart.heading().contains(QStringLiteral("per 15 min")));
    QVERIFY(rate.heading().contains(QStringLiteral("last 24 h")));

    // Auto: the shortest span of its ladder that reaches back to the oldest data (6.3 min:
    // 10 min; tst_timechart has the ladder).
    chart.setSpan(ChartSpan::AUTO);
    chart.update(usage, now);
    QCOMPARE(chart.effectiveSpan(), 10 * ChartSpan::MINUTE_MS);
    QCOMPARE(chart.buckets().widthMs, 10'000);
    // An empty history: the shortest.
    chart.update(UsageHistory {}, now);
    QCOMPARE(chart.effectiveSpan(), 5 * ChartSpan::MINUTE_MS);
}

void TestDashboardV2::spanChoiceInTheWindowIsRemembered()
{
    makeHome();
    {
        OPEN_WINDOW(w);
        auto* box = w.findChild<QComboBox*>(QStringLiteral("usageSpan"));
        auto* chart = w.findChild<UsageChart*>(QStringLiteral("usageChart"));
        auto* rateBox = w.findChild<QComboBox*>(QStringLiteral("rateLimitSpan"));
        auto* rate = w.findChild<RateLimitChart*>(QStringLiteral("rateLimitChart"));
        QVERIFY(box && chart && rateBox && rate);
        QCOMPARE(box->currentData().toLongLong(), ChartSpan::AUTO);
        QCOMPARE(chart->effectiveSpan(), 5 * ChartSpan::MINUTE_MS); // a new home: little data
        box->setCurrentIndex(box->findData(6 * ChartSpan::HOUR_MS));
        QCOMPARE(chart->effectiveSpan(), 6 * ChartSpan::HOUR_MS);
        QCOMPARE(chart->buckets().widthMs, 5 * ChartSpan::MINUTE_MS);
        QCOMPARE(chart->axisMaxMs() - chart->axisMinMs(), 6 * ChartSpan::HOUR_MS);
        rateBox->setCurrentIndex(rateBox->findData(15 * ChartSpan::MINUTE_MS));
        QCOMPARE(rate->buckets().widthMs, 30'000);
    }
    OPEN_WINDOW(again);
    QCOMPARE(again.findChild<QComboBox*>(QStringLiteral("usageSpan"))->currentData().toLongLong(),
        6 * ChartSpan::HOUR_MS);
    QCOMPARE(
        again.findChild<UsageChart*>(QStringLiteral("usageChart"))->effectiveSpan(), 6 * ChartSpan::HOUR_MS);
    QCOMPARE(again.findChild<QComboBox*>(QStringLiteral("rateLimitSpan"))->currentData().toLongLong(),
        15 * ChartSpan::MINUTE_MS);
}

void TestDashboardV2::zoomNarrowsAndResets()
{
    const qint64 now = T0 + 5000;
    UsageHistory usage;
    usage.add({ admitted(now - 1000, "a") });
    UsageChart chart;
    chart.resize(600, 300);
    chart.setSpan(ChartSpan::HOUR_MS);
    chart.update(usage, now);
    const qint64 from = chart.axisMinMs();
    const qint64 to = chart.axisMaxMs();
    QSignalSpy zoomed(&chart, &TimeChartView::zoomChanged);

    chart.zoomTo(to - 10 * ChartSpan::MINUTE_MS, to);
    QVERIFY(chart.isZoomed());
    QCOMPARE(zoomed.count(), 1);
    QCOMPARE(chart.axisMinMs(), to - 10 * ChartSpan::MINUTE_MS);
    // A redraw (new data, time moving on) keeps the zoom in absolute time.
    chart.update(usage, now + 1000);
    QCOMPARE(chart.axisMinMs(), to - 10 * ChartSpan::MINUTE_MS);
    QCOMPARE(chart.buckets().widthMs, ChartSpan::MINUTE_MS); // the span's buckets, not finer

    // The wheel zooms in around the pointer; never out past the span.
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    const QPointF mid(chart.width() / 2.0, chart.height() / 2.0);
    QWheelEvent in(mid, chart.mapToGlobal(mid), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
        Qt::NoScrollPhase, false);
    QApplication::sendEvent(chart.viewport(), &in);
    QVERIFY(chart.axisMaxMs() - chart.axisMinMs() < 10 * ChartSpan::MINUTE_MS);
    for (int i = 0; i < 30; ++i) {
        QWheelEvent out(mid, chart.mapToGlobal(mid), QPoint(), QPoint(0, -120), Qt::NoButton, Qt::NoModifier,
            Qt::NoScrollPhase, false);
        QApplication::sendEvent(chart.viewport(), &out);
    }
    QVERIFY(!chart.isZoomed());
    QCOMPARE(chart.axisMinMs(), from);

    // Esc resets, as does resetZoom().
    chart.zoomTo(from, from + 20 * ChartSpan::MINUTE_MS);
    QVERIFY(chart.isZoomed());
    QTest::keyClick(&chart, Qt::Key_Escape);
    QVERIFY(!chart.isZoomed());
    chart.zoomTo(from, from + 20 * ChartSpan::MINUTE_MS);
    chart.resetZoom();
    QVERIFY(!chart.isZoomed());
    QCOMPARE(chart.axisMaxMs() - chart.axisMinMs(), ChartSpan::HOUR_MS);
    // A span change drops the zoom.
    chart.zoomTo(from, from + 20 * ChartSpan::MINUTE_MS);
    chart.setSpan(5 * ChartSpan::MINUTE_MS);
    chart.update(usage, now);
    QVERIFY(!chart.isZoomed());
    QCOMPARE(chart.axisMaxMs() - chart.axisMinMs(), 5 * ChartSpan::MINUTE_MS);
}

void TestDashboardV2::limitLineOnTheUsageChart()
{
    const qint64 now = T0 + 5000;
    UsageHistory usage;
    usage.add({ admitted(now - 1000, "a", 40) });
    UsageChart chart;
    chart.setLimitRates(1.0, 100.0); // 60 requests, 6000 tokens a minute
    chart.setSpan(ChartSpan::HOUR_MS);
    chart.update(usage, now);
    QCOMPARE(chart.limitLineValue(), 60.0); // per one-minute bucket
    chart.setSpan(5 * ChartSpan::MINUTE_MS);
    chart.update(usage, now);
    QCOMPARE(chart.limitLineValue(), 10.0); // per 10-second bucket
    chart.setShowTokens(true);
    chart.update(usage, now);
    QCOMPARE(chart.limitLineValue(), 1000.0);
    chart.setLimitRates(0, 0);
    chart.update(usage, now);
    QCOMPARE(chart.limitLineValue(), 0.0);
}

void TestDashboardV2::clumpedMarkersAreGrouped()
{
    const qint64 now = T0 + 5000;
    UsageHistory usage;
    std::vector<HistoryEvent> events;
    for (int i = 0; i < 12; ++i) {
        HistoryEvent e;
        e.timeMs = now - 30'000 + i * 100;
        e.type = i % 2 ? EventType::Resume : EventType::Pause;
        e.provider = "api";
        e.reason = "flap";
        events.push_back(e);
    }
    usage.add(events);
    RateLimitChart chart;
    chart.resize(600, 300);
    chart.setSpan(ChartSpan::HOUR_MS);
    chart.update(usage, now);
    // Twelve marks within a second: one pause mark and one resume mark, saying how many.
    QCOMPARE(chart.markerEvents(), 12);
    QCOMPARE(chart.markersShown(), 2);
    const QString tip = chart.markerTipAt(now - 30'000);
    QVERIFY2(tip.contains(QStringLiteral("6 × pause")) && tip.contains(QStringLiteral("6 × resume")),
        qPrintable(tip));
    QVERIFY(tip.count(QLatin1Char('\n')) < 20); // bounded, however many there are
    // In 5 minutes of 10 s buckets they still share one bucket.
    chart.setSpan(5 * ChartSpan::MINUTE_MS);
    chart.update(usage, now);
    QCOMPARE(chart.markersShown(), 2);
}

void TestDashboardV2::markerTipStaysWhileHoveredAndPins()
{
    const qint64 now = T0 + 5000;
    UsageHistory usage;
    HistoryEvent e;
    e.timeMs = now - 60'000;
    e.type = EventType::Pause;
    e.provider = "api";
    e.reason = "deploy";
    usage.add({ e });
    RateLimitChart chart;
    chart.resize(600, 300);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    chart.setSpan(ChartSpan::HOUR_MS);
    chart.update(usage, now);
    QScatterSeries* pauses = nullptr;
    for (QAbstractSeries* s : chart.chart()->series()) {
        if (s->name() == QStringLiteral("pause"))
            pauses = qobject_cast<QScatterSeries*>(s);
    }
    QVERIFY(pauses && pauses->count() == 1);
    const QPointF mark = pauses->at(0);

    // Hovered: the tip shows and stays through redraws while traffic flows.
    Q_EMIT pauses->hovered(mark, true);
    QVERIFY(chart.tipVisible());
    QVERIFY2(
        chart.tipText().contains(QStringLiteral("pause")) && chart.tipText().contains(QStringLiteral("api")),
        qPrintable(chart.tipText()));
    for (int i = 1; i <= 5; ++i)
        chart.update(usage, now + i * 1000);
    QTest::qWait(20);
    QVERIFY(chart.tipVisible());
    // The mouse leaves: it goes.
    Q_EMIT pauses->hovered(mark, false);
    QVERIFY(!chart.tipVisible());

    // A click pins it: leaving the mark no longer hides it; Esc does.
    Q_EMIT pauses->hovered(mark, true);
    Q_EMIT pauses->clicked(mark);
    QVERIFY(chart.tipPinned());
    Q_EMIT pauses->hovered(mark, false);
    chart.update(usage, now + 10'000);
    QVERIFY(chart.tipVisible());
    QTest::keyClick(&chart, Qt::Key_Escape);
    QVERIFY(!chart.tipPinned());
    QVERIFY(!chart.tipVisible());
}

// ---------------------------------------------------------------------------------------------
// Keyboard

void TestDashboardV2::shortcutsTriggerTheirActions()
{
    makeHome();
    writeLock(m_locks + QStringLiteral("/mine.lock"), ProcessProbe::selfPid(), m_clock.unixSeconds(), "mine");
    OPEN_WINDOW(w);
    QVERIFY(activate(w));
    QStringList confirmations;
    w.setConfirmHandler([&confirmations](const QString& title, const QString&) {
        confirmations.append(title);
        return false; // "No": nothing is released
    });
    QTRY_COMPARE_WITH_TIMEOUT(w.controller()->providers()->rowCount(), 1, TIMEOUT_MS);

    // F5: refresh.
    auto* refresh = w.findChild<QAction*>(QStringLiteral("actionRefresh"));
    QSignalSpy refreshed(refresh, &QAction::triggered);
    QTest::keyClick(&w, Qt::Key_F5);
    QCOMPARE(refreshed.count(), 1);

    // Ctrl+Shift+P / Ctrl+Shift+R: pause all, resume all — in the shared state.
    QTest::keyClick(&w, Qt::Key_P, Qt::ControlModifier | Qt::ShiftModifier);
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->snapshot().state.pausedAll, TIMEOUT_MS);
    QTest::keyClick(&w, Qt::Key_R, Qt::ControlModifier | Qt::ShiftModifier);
    QTRY_VERIFY_WITH_TIMEOUT(!w.controller()->snapshot().state.pausedAll, TIMEOUT_MS);

    // Ctrl+F: the events filter gets the focus.
    auto* filter = w.findChild<QLineEdit*>(QStringLiteral("eventText"));
    QTest::keyClick(&w, Qt::Key_F, Qt::ControlModifier);
    QTRY_COMPARE(QApplication::focusWidget(), filter);

    // F2: edits the selected cell (here the provider's requests limit; issue 28: it used to
    // edit that one whichever cell was selected).
    auto* providers = w.findChild<KeyedTableView*>(QStringLiteral("providersView"));
    w.selectProvider(QStringLiteral("api"));
    providers->setCurrentIndex(
        providers->model()->index(providers->rowOfKey(QStringLiteral("api")), ProvidersModel::RequestLimit));
    QTest::keyClick(&w, Qt::Key_F2);
    // The cell's editor is open (it has the focus, inside the table).
    auto editing = [providers] {
        QWidget* f = QApplication::focusWidget();
        return f && f->parentWidget() == providers->viewport();
    };
    QTRY_VERIFY(editing());
    QCOMPARE(providers->currentIndex().column(), int(ProvidersModel::RequestLimit));
    QTest::keyClick(QApplication::focusWidget(), Qt::Key_Escape); // nothing changed
    QTRY_VERIFY(!editing());

    // Delete: force-release the selected holder, which asks first (its holder is alive).
    const QString key = QStringLiteral("lock:") + m_locks + QStringLiteral("/mine.lock");
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->holders()->holder(key), TIMEOUT_MS);
    w.selectHolder(key);
    // Pressed in another table, Delete does not release the holder selected elsewhere.
    auto* eventsView = w.findChild<KeyedTableView*>(QStringLiteral("eventsView"));
    eventsView->setFocus();
    QTRY_COMPARE(QApplication::focusWidget(), eventsView);
    QTest::keyClick(QApplication::focusWidget(), Qt::Key_Delete);
    QTest::qWait(50);
    QVERIFY(confirmations.isEmpty());
    auto* holdersView = w.findChild<KeyedTableView*>(QStringLiteral("holdersView"));
    holdersView->setFocus();
    QTRY_COMPARE(QApplication::focusWidget(), holdersView);
    QTest::keyClick(holdersView, Qt::Key_Delete);
    QTRY_COMPARE_WITH_TIMEOUT(confirmations, QStringList { QStringLiteral("Force release") }, TIMEOUT_MS);
    QVERIFY(QFile::exists(m_locks + QStringLiteral("/mine.lock"))); // answered No
    // Delete in the filter field deletes text, not a holder.
    filter->setFocus();
    filter->setText(QStringLiteral("abc"));
    filter->setCursorPosition(0);
    QTest::keyClick(filter, Qt::Key_Delete);
    QCOMPARE(filter->text(), QStringLiteral("bc"));
    QTest::qWait(50);
    QCOMPARE(confirmations.size(), 1);
}

void TestDashboardV2::shortcutsAreShownInMenusAndTooltips()
{
    makeHome();
    OPEN_WINDOW(w);
    QHash<QString, QKeySequence> expected {
        { QStringLiteral("actionPauseAll"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_P) },
        { QStringLiteral("actionResumeAll"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R) },
        { QStringLiteral("actionFindEvents"), QKeySequence(Qt::CTRL | Qt::Key_F) },
        { QStringLiteral("actionEditLimit"), QKeySequence(Qt::Key_F2) },
        { QStringLiteral("actionRelease"), QKeySequence(QKeySequence::Delete) },
        { QStringLiteral("actionRefresh"), QKeySequence(Qt::Key_F5) },
    };
    QSet<QAction*> inMenus;
    for (QAction* top : w.menuBar()->actions()) {
        if (top->menu()) {
            for (QAction* a : top->menu()->actions())
                inMenus.insert(a);
        }
    }
    for (auto it = expected.cbegin(); it != expected.cend(); ++it) {
        auto* a = w.findChild<QAction*>(it.key());
        QVERIFY2(a, qPrintable(it.key()));
        QCOMPARE(a->shortcut(), it.value());
        QVERIFY2(inMenus.contains(a), qPrintable(it.key())); // a menu shows its shortcut
        QVERIFY2(
            a->toolTip().contains(it.value().toString(QKeySequence::NativeText)), qPrintable(a->toolTip()));
    }
    // No two actions share a shortcut (an ambiguous one triggers neither).
    QHash<QKeySequence, QString> seen;
    for (QAction* a : w.findChildren<QAction*>()) {
        for (const QKeySequence& k : a->shortcuts()) {
            QVERIFY2(!seen.contains(k) || seen.value(k) == a->objectName(),
                qPrintable(k.toString() + QStringLiteral(": ") + seen.value(k) + QStringLiteral(", ")
                    + a->objectName()));
            seen.insert(k, a->objectName());
        }
    }
    // The pause toggle in the toolbar names its shortcut too.
    auto* toggle = w.findChild<QAction*>(QStringLiteral("actionTogglePause"));
    QVERIFY(toggle->toolTip().contains(
        expected.value(QStringLiteral("actionPauseAll")).toString(QKeySequence::NativeText)));
}

// ---------------------------------------------------------------------------------------------
// Window

void TestDashboardV2::windowFitClampsOntoTheScreen()
{
    const QRect screen(0, 0, 1280, 720);
    const QMargins frame(0, 30, 0, 0);
    // Fits: left alone.
    QCOMPARE(WindowFit::fit(QRect(100, 100, 800, 500), screen, frame), QRect(100, 100, 800, 500));
    // Too large (saved on a 1920×1200 screen): shrunk to the screen, title bar on it.
    const QRect big = WindowFit::fit(QRect(50, 50, 1500, 1000), screen, frame);
    QVERIFY(screen.contains(big.marginsAdded(frame)));
    QCOMPARE(big.size(), QSize(1280, 690));
    // Off the screen to the right and below (a screen since unplugged): moved in, same size.
    const QRect moved = WindowFit::fit(QRect(1700, 900, 800, 500), screen, frame);
    QCOMPARE(moved.size(), QSize(800, 500));
    QVERIFY(screen.contains(moved.marginsAdded(frame)));
    // Above the top: the title bar comes back on screen.
    QCOMPARE(WindowFit::fit(QRect(10, -200, 800, 500), screen, frame).top(), 30);
    // A screen at an offset (the second monitor).
    const QRect second(1920, 0, 1280, 720);
    QVERIFY(second.contains(WindowFit::fit(QRect(0, 0, 1500, 1000), second, frame).marginsAdded(frame)));
    // First run on a small screen: all of it (issue 28: 1152×618 at 1280×720, the tables
    // scrolled sideways).
    const QRect first = WindowFit::initial(QSize(1500, 1000), screen, frame);
    QCOMPARE(first.size(), QSize(1280, 690));
    QVERIFY(screen.contains(first.marginsAdded(frame)));
    // On a large one at most 90 %, centred.
    const QRect large(0, 0, 2560, 1440);
    const QRect roomy = WindowFit::initial(QSize(3000, 2000), large, frame);
    QVERIFY(roomy.width() <= 2304 && roomy.height() <= 1296 - 30);
    QVERIFY(large.contains(roomy.marginsAdded(frame)));
    // Nonsense in: no crash, something sane out.
    QCOMPARE(WindowFit::fit(QRect(), screen, frame), QRect());
    QCOMPARE(WindowFit::fit(QRect(0, 0, 100, 100), QRect(), frame), QRect(0, 0, 100, 100));
}

void TestDashboardV2::savedGeometryIsClampedOntoASmallerScreen()
{
    makeHome();
    {
        OPEN_WINDOW(w);
        w.setGeometry(QRect(1400, 900, 1900, 1150)); // on a big screen, far right
    }
    const QRect available = QGuiApplication::primaryScreen()->availableGeometry();
    QVERIFY(available.width() >= 700 && available.height() >= 500);
    {
        MainWindow w(options());
        QVERIFY2(available.contains(w.geometry()),
            qPrintable(QStringLiteral("%1,%2 %3x%4 in %5x%6")
                           .arg(w.x())
                           .arg(w.y())
                           .arg(w.width())
                           .arg(w.height())
                           .arg(available.width())
                           .arg(available.height())));
        // And onto a screen smaller still (a 1280×720 laptop next to it, say).
        w.setGeometry(QRect(100, 100, 1900, 1150));
        const QRect laptop(0, 0, 700, 520);
        w.fitToScreen(laptop);
        QVERIFY(laptop.contains(w.frameGeometry()));
    }
}

void TestDashboardV2::windowFitsA1280x720Screen()
{
    makeHome();
    OPEN_WINDOW(w);
    // What a small screen leaves after its panel: every panel shown, nothing forced bigger.
    const QSize min = w.minimumSizeHint().expandedTo(w.minimumSize());
    QVERIFY2(min.width() <= 760 && min.height() <= 560,
        qPrintable(QStringLiteral("%1x%2").arg(min.width()).arg(min.height())));
    w.resize(1280, 690);
    w.resetLayout();
    QTRY_COMPARE(w.size(), QSize(1280, 690));
    auto* events = w.findChild<KeyedTableView*>(QStringLiteral("eventsView"));
    auto* chart = w.findChild<UsageChart*>(QStringLiteral("usageChart"));
    auto* capacity = w.findChild<CapacityPanel*>(QStringLiteral("capacityPanel"));
    auto* providers = w.findChild<KeyedTableView*>(QStringLiteral("providersView"));
    // Readable: the event log shows several rows, the charts have room, the provider row is
    // whole (not cut by a scroll bar).
    QTRY_VERIFY(events->viewport()->height() >= 5 * events->verticalHeader()->defaultSectionSize());
    QVERIFY2(chart->height() >= 150, qPrintable(QString::number(chart->height())));
    // The tile is whole (a row of tiles is as high as they are; tst_capacitypanel has more).
    QTRY_VERIFY(!capacity->providers().isEmpty());
    QVERIFY(capacity->height() >= capacity->tile(capacity->providers().first())->height());
    const int rowBottom = providers->rowViewportPosition(0) + providers->rowHeight(0);
    QVERIFY2(rowBottom <= providers->viewport()->height(),
        qPrintable(QStringLiteral("%1 > %2").arg(rowBottom).arg(providers->viewport()->height())));
}

void TestDashboardV2::everyColumnIsOnScreenAt1280AndNoneTakesTheRestAt1920()
{
    // Issue 28: at 1280 maximised the Waiting and Paused columns needed a horizontal scroll and
    // the holders' state column was off screen; at 1920 the Paused column took all spare width.
    ProviderLimits limits = defaultLimits();
    limits.tokens = 90000;
    makeHome(limits);
    QVERIFY(m_limiter->pause("api", "nightly re-index of the search cluster", "test"));
    writeLock(m_locks + QStringLiteral("/mine.lock"), ProcessProbe::selfPid(), m_clock.unixSeconds(),
        "a caller with a long tag");
    OPEN_WINDOW(w);
    auto* providers = w.findChild<KeyedTableView*>(QStringLiteral("providersView"));
    auto* holders = w.findChild<KeyedTableView*>(QStringLiteral("holdersView"));
    QTRY_VERIFY_WITH_TIMEOUT(
        providers->model()->rowCount() == 1 && holders->model()->rowCount() == 1, TIMEOUT_MS);
    auto columnsEnd = [](KeyedTableView* v, int upTo) {
        v->fitColumns();
        QCoreApplication::processEvents();
        return v->columnViewportPosition(upTo) + v->columnWidth(upTo);
    };
    w.resize(1280, 690);
    w.resetLayout();
    QTRY_COMPARE(w.size(), QSize(1280, 690));
    const int lastProvidersColumn = providers->model()->columnCount() - 1;
    QTRY_VERIFY2(columnsEnd(providers, lastProvidersColumn) <= providers->viewport()->width(),
        qPrintable(QStringLiteral("%1 > %2")
                       .arg(columnsEnd(providers, lastProvidersColumn))
                       .arg(providers->viewport()->width())));
    QCOMPARE(providers->horizontalScrollBar()->maximum(), 0);
    QTRY_VERIFY2(columnsEnd(holders, HoldersModel::Health) <= holders->viewport()->width(),
        qPrintable(QStringLiteral("%1 > %2")
                       .arg(columnsEnd(holders, HoldersModel::Health))
                       .arg(holders->viewport()->width())));
    // A value that had to give way is whole in its tooltip.
    const QModelIndex paused = providers->model()->index(0, ProvidersModel::Paused);
    QVERIFY(paused.data().toString().contains(QStringLiteral("nightly re-index of the search cluster")));
    const QRect cell = providers->visualRect(paused);
    QVERIFY2(providers->sizeHintForIndex(paused).width() > cell.width(), "the pause reason was not elided");
    QHelpEvent tip(QEvent::ToolTip, cell.center(), providers->viewport()->mapToGlobal(cell.center()));
    QCoreApplication::sendEvent(providers->viewport(), &tip);
    QTRY_VERIFY(QToolTip::isVisible());
    QVERIFY2(QToolTip::text().contains(QStringLiteral("nightly re-index of the search cluster")),
        qPrintable(QToolTip::text()));
    QToolTip::hideText();

    // At 1920 the spare width is shared in equal parts: no column takes most of it.
    w.resize(1920, 1050);
    QTRY_COMPARE(w.size(), QSize(1920, 1050));
    columnsEnd(providers, lastProvidersColumn);
    QTRY_COMPARE(columnsEnd(providers, lastProvidersColumn), providers->viewport()->width());
    QHeaderView* header = providers->horizontalHeader();
    int least = INT_MAX;
    int most = 0;
    for (int c = 0; c <= lastProvidersColumn; ++c) {
        const int need = std::min(KeyedTableView::MAX_FIT_WIDTH,
            std::max(header->sectionSizeHint(c),
                providers->sizeHintForIndex(providers->model()->index(0, c)).width() + 1));
        least = std::min(least, providers->columnWidth(c) - need);
        most = std::max(most, providers->columnWidth(c) - need);
    }
    QVERIFY2(least > 0 && most - least <= lastProvidersColumn + 1,
        qPrintable(QStringLiteral("extra width from %1 to %2 px").arg(least).arg(most)));
}

void TestDashboardV2::splittersAndHiddenPanelsAreRemembered()
{
    makeHome();
    QList<int> sizes;
    {
        OPEN_WINDOW(w);
        w.resize(780, 560); // fits the offscreen screen: restored as it is
        w.resetLayout();
        auto* charts = w.findChild<QSplitter*>(QStringLiteral("chartsSplitter"));
        charts->setSizes({ 500, 260 });
        sizes = charts->sizes();
        w.setPanelVisible(QStringLiteral("holders"), false);
        QVERIFY(!w.isPanelVisible(QStringLiteral("holders")));
        QVERIFY(!w.findChild<QAction*>(QStringLiteral("actionPanel_holders"))->isChecked());
    }
    {
        OPEN_WINDOW(w);
        QCOMPARE(w.findChild<QSplitter*>(QStringLiteral("chartsSplitter"))->sizes(), sizes);
        QVERIFY(!w.isPanelVisible(QStringLiteral("holders")));
        QVERIFY(w.isPanelVisible(QStringLiteral("events")));
        // Hiding every panel leaves one: a window of nothing is not a state to end up in.
        for (const QString& p : MainWindow::panelNames())
            w.setPanelVisible(p, false);
        int shown = 0;
        for (const QString& p : MainWindow::panelNames())
            shown += w.isPanelVisible(p) ? 1 : 0;
        QCOMPARE(shown, 1);
        // The keyboard reaches them: Alt+4 shows the holders again.
        QVERIFY(activate(w));
        QTest::keyClick(&w, Qt::Key_4, Qt::AltModifier);
        QVERIFY(w.isPanelVisible(QStringLiteral("holders")));
    }
}

// ---------------------------------------------------------------------------------------------
// Events

void TestDashboardV2::eventsFollowAndStopFollowing()
{
    makeHome();
    auto addEvents = [this](int n) {
        for (int i = 0; i < n; ++i)
            QVERIFY(m_limiter->reportSuccess("api", "filler"));
    };
    addEvents(100);
    OPEN_WINDOW(w);
    w.resize(1280, 720);
    auto* view = w.findChild<KeyedTableView*>(QStringLiteral("eventsView"));
    auto* chip = w.findChild<QPushButton*>(QStringLiteral("newEventsChip"));
    QVERIFY(view && chip);
    QScrollBar* bar = view->verticalScrollBar();
    QTRY_VERIFY_WITH_TIMEOUT(view->model()->rowCount() >= 100, TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(bar->maximum() > 0 && bar->value() == bar->maximum(), TIMEOUT_MS);
    QVERIFY(chip->isHidden());

    // Following: new rows scroll into view, no chip.
    int rows = view->model()->rowCount();
    addEvents(5);
    QTRY_VERIFY_WITH_TIMEOUT(view->model()->rowCount() >= rows + 5, TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(bar->value() == bar->maximum(), TIMEOUT_MS);
    QVERIFY(chip->isHidden());

    // Scrolled up: the view stays where the user is and the chip counts what arrived.
    bar->setValue(bar->maximum() / 2);
    const int at = bar->value();
    rows = view->model()->rowCount();
    addEvents(3);
    QTRY_VERIFY_WITH_TIMEOUT(view->model()->rowCount() >= rows + 3, TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(!chip->isHidden(), TIMEOUT_MS);
    QCOMPARE(bar->value(), at);
    QCOMPARE(w.newEventsCount(), 3);
    QCOMPARE(chip->text(), QStringLiteral("3 new events ↓"));

    // The chip jumps back down and follows again.
    QTest::mouseClick(chip, Qt::LeftButton);
    QCOMPARE(bar->value(), bar->maximum());
    QVERIFY(chip->isHidden());
    QCOMPARE(w.newEventsCount(), 0);
    rows = view->model()->rowCount();
    addEvents(4);
    QTRY_VERIFY_WITH_TIMEOUT(view->model()->rowCount() >= rows + 4, TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(bar->value() == bar->maximum(), TIMEOUT_MS);
    QVERIFY(chip->isHidden());

    // Scrolling back to the end by hand also clears the chip.
    bar->setValue(0);
    addEvents(1);
    QTRY_VERIFY_WITH_TIMEOUT(!chip->isHidden(), TIMEOUT_MS);
    QCOMPARE(chip->text(), QStringLiteral("1 new event ↓"));
    bar->setValue(bar->maximum());
    QTRY_VERIFY(chip->isHidden());
}

void TestDashboardV2::scopeFromARightClick()
{
    makeHome();
    QVERIFY(m_limiter->reportSuccess("api", "alice"));
    QVERIFY(m_limiter->reportSuccess("api", "bob"));
    ProviderLimits other = defaultLimits();
    QVERIFY(m_limiter->setLimits("other", other, "test"));
    QVERIFY(m_limiter->reportSuccess("other", "alice"));
    OPEN_WINDOW(w);
    auto* events = w.controller()->filteredEvents();
    QTRY_VERIFY_WITH_TIMEOUT(events->rowCount() >= 5, TIMEOUT_MS);
    const int all = events->rowCount();
    auto count = [events](int column, const QString& value) {
        int n = 0;
        for (int r = 0; r < events->rowCount(); ++r)
            n += events->index(r, column).data().toString() == value ? 1 : 0;
        return n;
    };

    // From a caller shown in the event log: "Show events of caller alice".
    auto menu = w.scopeMenu(QStringLiteral("api"), QStringLiteral("alice"));
    QAction* caller = menu->findChild<QAction*>(QStringLiteral("scopeCaller"));
    QVERIFY(caller);
    caller->trigger();
    QCOMPARE(events->callerFilter(), QStringLiteral("alice"));
    QCOMPARE(events->rowCount(), count(EventsModel::Caller, QStringLiteral("alice")));
    QCOMPARE(events->rowCount(), 2);
    auto* chip = w.findChild<QPushButton*>(QStringLiteral("eventScopeChip"));
    QVERIFY(!chip->isHidden() && chip->text().contains(QStringLiteral("alice")));

    // From a provider (its row, its capacity tile): the provider menu offers it too.
    auto pmenu = w.providerMenu(QStringLiteral("other"));
    QAction* provider = pmenu->findChild<QAction*>(QStringLiteral("scopeProvider"));
    QVERIFY(provider);
    provider->trigger();
    QCOMPARE(events->providerFilter(), QStringLiteral("other"));
    QCOMPARE(events->callerFilter(), QString());
    QCOMPARE(events->rowCount(), count(EventsModel::Provider, QStringLiteral("other")));
    QVERIFY(events->rowCount() >= 2); // its limits and alice's success

    // Both, then back to everyone with the chip.
    w.scopeMenu(QStringLiteral("api"), QStringLiteral("bob"))
        ->findChild<QAction*>(QStringLiteral("scopeBoth"))
        ->trigger();
    QCOMPARE(events->rowCount(), 1);
    QTest::mouseClick(chip, Qt::LeftButton);
    QCOMPARE(events->rowCount(), all);
    QVERIFY(chip->isHidden());

    // From the per-caller chart: its right-click menu names the callers it draws.
    AdmitRequest admit = call("api");
    admit.caller = "bob";
    admit.pid = ProcessProbe::selfPid();
    admit.pidNs = m_probe.pidNamespace();
    QVERIFY(m_limiter->acquire(admit, m_clock.now()).ok());
    auto* chart = w.findChild<UsageChart*>(QStringLiteral("usageChart"));
    QTRY_VERIFY_WITH_TIMEOUT(chart->bandNames().contains(QStringLiteral("bob")), TIMEOUT_MS);
    auto cmenu = chart->contextMenu();
    QAction* bob = nullptr;
    for (QAction* a : cmenu->actions()) {
        if (a->text() == QStringLiteral("Show events of caller bob"))
            bob = a;
    }
    QVERIFY(bob);
    QVERIFY(cmenu->findChild<QAction*>(QStringLiteral("chartResetZoom")));
    bob->trigger();
    QCOMPARE(events->callerFilter(), QStringLiteral("bob"));
    QCOMPARE(events->rowCount(), count(EventsModel::Caller, QStringLiteral("bob")));
    QCOMPARE(events->rowCount(), 2); // the success and the admission
    QTest::mouseClick(chip, Qt::LeftButton);

    // A holder's menu offers its provider and caller; "(all)" is no provider to narrow to.
    QVERIFY(!w.scopeMenu(EventsModel::tr("(all)"), QString())
                 ->findChild<QAction*>(QStringLiteral("scopeProvider")));
}

// ---------------------------------------------------------------------------------------------
// Look

void TestDashboardV2::pauseToggleShowsTheState()
{
    makeHome();
    OPEN_WINDOW(w);
    auto* toggle = w.findChild<QAction*>(QStringLiteral("actionTogglePause"));
    QVERIFY(toggle && toggle->isCheckable());
    QVERIFY(!toggle->isChecked());
    QCOMPARE(toggle->text(), QStringLiteral("Pause all"));
    toggle->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->snapshot().state.pausedAll, TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(toggle->isChecked(), TIMEOUT_MS);
    QCOMPARE(toggle->text(), QStringLiteral("Resume all"));
    // Paused from elsewhere (the CLI, another dashboard): the control follows the state.
    QVERIFY(m_limiter->resume("", "test"));
    QTRY_VERIFY_WITH_TIMEOUT(!toggle->isChecked(), TIMEOUT_MS);
    QCOMPARE(toggle->text(), QStringLiteral("Pause all"));
    QVERIFY(m_limiter->pause("", "from the CLI", "test"));
    QTRY_VERIFY_WITH_TIMEOUT(toggle->isChecked(), TIMEOUT_MS);
    toggle->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!w.controller()->snapshot().state.pausedAll, TIMEOUT_MS);
}

void TestDashboardV2::chartsFollowThePalette()
{
    UsageChart chart;
    RateLimitChart rate;
    CapacityModel model;
    CapacityPanel panel(&model);
    StateBuilder s;
    s.limits("api", windowLimits(10));
    model.setSnapshot(s.snapshot, T0);
    auto* tile = panel.findChild<QFrame*>(QStringLiteral("capacityTile"));
    QVERIFY(tile);

    QPalette dark;
    dark.setColor(QPalette::Window, QColor(0x2a, 0x2e, 0x32));
    dark.setColor(QPalette::WindowText, QColor(0xfc, 0xfc, 0xfc));
    dark.setColor(QPalette::Base, QColor(0x1b, 0x1e, 0x20));
    dark.setColor(QPalette::Text, QColor(0xfc, 0xfc, 0xfc));
    dark.setColor(QPalette::Mid, QColor(0x5a, 0x61, 0x68));
    const QPalette before = QApplication::palette();
    QApplication::setPalette(dark);
    auto restore = qScopeGuard([&before] { QApplication::setPalette(before); });
    for (TimeChartView* v : { static_cast<TimeChartView*>(&chart), static_cast<TimeChartView*>(&rate) }) {
        QTRY_COMPARE(v->chart()->backgroundBrush().color(), dark.color(QPalette::Base));
        QCOMPARE(v->chart()->titleBrush().color(), dark.color(QPalette::WindowText));
        for (QAbstractAxis* axis : v->chart()->axes())
            QCOMPARE(axis->labelsColor(), dark.color(QPalette::WindowText));
    }
    // The tile's background is dark and its headline light enough to read on it.
    const QColor bg = tile->palette().color(QPalette::Window);
    const QColor headline
        = tile->findChild<QLabel*>(QStringLiteral("capacityHeadline"))->palette().color(QPalette::WindowText);
    QVERIFY2(bg.lightness() < 80, qPrintable(bg.name()));
    QVERIFY2(headline.lightness() - bg.lightness() > 90, qPrintable(headline.name() + bg.name()));
    // Back to light: the charts follow.
    QApplication::setPalette(before);
    QTRY_COMPARE(chart.chart()->backgroundBrush().color(), before.color(QPalette::Base));
    QVERIFY(tile->palette().color(QPalette::Window).lightness() > 150);
}

QTEST_MAIN(TestDashboardV2)
#include "tst_dashboardv2.moc"
