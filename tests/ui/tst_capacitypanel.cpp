// The capacity tiles (issue 28, item 6): tiles wrap onto more rows instead of scrolling
// sideways, blocked ones first without jumping on every tick, and no label inside a tile is
// ever narrower or lower than its text — with six providers in their longest states, at the
// widths of a 1280×720 and a 1920×1080 window, alone and in the window (where the charts keep
// a readable height as well).

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "capacitymodel.h"
#include "capacitypanel.h"
#include "dashboardoptions.h"
#include "mainwindow.h"
#include "quota/quotapolicy.h"
#include "ratelimitchart.h"
#include "store/filequotastore.h"
#include "stormdetector.h"
#include "usagechart.h"

#include <QFrame>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>
#include <QTemporaryDir>
#include <QTest>

using namespace tollgate;
using namespace tollgate::ui;

class TestCapacityPanel final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void tilesWrapAndNoLabelIsCut_data();
    void tilesWrapAndNoLabelIsCut();
    void blockedTilesComeFirstAndDoNotJump();
    void aTileWiderThanThePanelScrollsInsteadOfBeingCut();
    void onlyTilesWhoseTextsChangeAreMeasuredAgain();
    void sixProvidersInTheWindow_data();
    void sixProvidersInTheWindow();
};

namespace {

constexpr int TIMEOUT_MS = 15000;
constexpr std::int64_t WINDOW_MS = 32000; // 1 s buckets: the times below are exact
constexpr std::int64_t T0 = 1'000'000'000'000;

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
struct StateBuilder
{
    DashboardSnapshot snapshot;

    StateBuilder() { snapshot.hasState = true; }
    void limits(const std::string& provider, const ProviderLimits& l)
    {
        if (!snapshot.limits.set(provider, l))
            qFatal("limits refused");
    }
    void admit(const std::string& provider, std::int64_t nowMs, std::int64_t tokens = 1, bool slot = false)
    {
        const ProviderLimits* l = snapshot.limits.find(provider);
        ProviderState& p = snapshot.state.ensureProvider(provider);
        QuotaPolicy::syncProvider(p, *l, nowMs);
        auto d = QuotaPolicy::admit(snapshot.state, p, *l, call(provider, tokens, slot), 0, nowMs, false);
        if (!d.ok() || !d->admitted)
            qFatal("not admitted");
    }
    void rateLimited(const std::string& provider, std::int64_t nowMs)
    {
        const ProviderLimits* l = snapshot.limits.find(provider);
        ProviderState& p = snapshot.state.ensureProvider(provider);
        QuotaPolicy::syncProvider(p, *l, nowMs);
        QuotaPolicy::apply429(p, *l, nowMs, std::nullopt, 0);
    }
};

// The tile of a provider, found as a user's tools would (by name and property).
QFrame* tileOf(const CapacityPanel& panel, const QString& provider)
{
    for (QFrame* f : panel.findChildren<QFrame*>(QStringLiteral("capacityTile"))) {
        if (f->property("provider").toString() == provider)
            return f;
    }
    return nullptr;
}

ProviderLimits windowLimits(std::int64_t requests)
{
    ProviderLimits l;
    l.windowMs = WINDOW_MS;
    l.requests = requests;
    return l;
}

// Six providers in the states with the longest words: backing off, paused with a reason,
// huge figures, every kind of budget with a class and a plan, a full window, no slot free.
StateBuilder sixProviders()
{
    StateBuilder s;
    ProviderLimits backoff = windowLimits(100);
    backoff.backoffBaseMs = 600'000;
    s.limits("anthropic-backoff", backoff);
    s.rateLimited("anthropic-backoff", T0 - 600'000);
    s.rateLimited("anthropic-backoff", T0);

    s.limits("batch-paused", windowLimits(30));
    ProviderState& paused = s.snapshot.state.ensureProvider("batch-paused");
    paused.paused = true;
    paused.pauseReason = "nightly re-index of the whole search corpus";
    paused.pausedAtMs = T0;

    ProviderLimits huge = windowLimits(QuotaLimits::MAX_COUNT);
    huge.tokens = QuotaLimits::MAX_COUNT;
    s.limits("cloud-huge", huge);
    s.admit("cloud-huge", T0, 123'456'789);

    ProviderLimits rich;
    rich.requests = 300;
    rich.windowMs = 60000;
    rich.inputTokens = 150000;
    rich.outputTokens = 40000;
    rich.parallel = 6;
    rich.perDay.requests = 20000;
    rich.perDay.outputTokens = 2'000'000;
    rich.dayReset = *DayReset::parse("00:00@America/Los_Angeles");
    ModelLimits large { 200, std::nullopt, 60000 };
    large.outputTokens = 20000;
    large.match = { "search-large*" };
    rich.models["large"] = large;
    s.limits("search-rich", rich);
    ProviderState& planned = s.snapshot.state.ensureProvider("search-rich");
    planned.plan.atMs = T0;
    planned.plan.status = PlanUsage::Status::Rejected;
    planned.plan.fiveHourPermille = 1000;
    planned.plan.fiveHourResetMs = T0 + 4 * 3600'000 + 59 * 60'000;
    planned.plan.sevenDayPermille = 987;
    planned.plan.sevenDayResetMs = T0 + 6 * 86'400'000 + 23 * 3600'000;

    s.limits("window-full", windowLimits(3));
    for (int i = 0; i < 3; ++i)
        s.admit("window-full", T0 + i * 1000);

    ProviderLimits slots = windowLimits(1000);
    slots.parallel = 1;
    s.limits("zeta-slots", slots);
    s.admit("zeta-slots", T0, 1, true);
    return s;
}

// The first problem of the tiles, or nothing: every shown label of every tile is at least as
// wide and as high as its text, and lies within its tile; every tile lies within the panel's
// width (no sideways scrolling). A text that changes on a tick is laid out again in the next
// pass of the event loop, so a live window is polled (QTRY) until a pass leaves none.
QString tileProblem(CapacityPanel& panel)
{
    if (panel.providers().size() != 6)
        return QStringLiteral("%1 providers, not 6").arg(panel.providers().size());
    auto* scroll = panel.findChild<QScrollArea*>();
    if (!scroll)
        return QStringLiteral("no scroll area");
    if (scroll->horizontalScrollBar()->isVisible())
        return QStringLiteral("the tiles scroll sideways");
    const QRect visible = scroll->viewport()->rect();
    for (const QString& provider : panel.providers()) {
        QFrame* tile = tileOf(panel, provider);
        if (!tile || !tile->isVisible())
            return provider + QStringLiteral(": no tile shown");
        const QRect inViewport(tile->mapTo(scroll->viewport(), QPoint(0, 0)), tile->size());
        if (inViewport.left() < visible.left() || inViewport.right() > visible.right())
            return QStringLiteral("%1 at x %2..%3 of %4")
                .arg(provider)
                .arg(inViewport.left())
                .arg(inViewport.right())
                .arg(visible.width());
        for (QLabel* label : tile->findChildren<QLabel*>()) {
            if (label->isHidden() || label->text().isEmpty())
                continue;
            const QFontMetrics fm(label->font());
            const QStringList lines = label->text().split(QLatin1Char('\n'));
            int textWidth = 0;
            for (const QString& line : lines)
                textWidth = std::max(textWidth, fm.horizontalAdvance(line));
            const QSize text = fm.boundingRect(QRect(), Qt::AlignLeft, label->text()).size();
            const QRect room = label->contentsRect();
            const QString where = provider + QStringLiteral(": \"") + label->text() + QStringLiteral("\" ");
            if (room.width() < textWidth || room.width() < text.width())
                return where + QStringLiteral("needs %1 px, has %2").arg(text.width()).arg(room.width());
            if (room.height() < text.height())
                return where
                    + QStringLiteral("needs %1 px high, has %2").arg(text.height()).arg(room.height());
            if (label->size().width() < label->sizeHint().width()
                || label->size().height() < label->sizeHint().height())
                return where + QStringLiteral("smaller than its size hint");
            if (!tile->rect().contains(label->geometry()))
                return where + QStringLiteral("outside its tile");
        }
    }
    return {};
}

} // namespace

void TestCapacityPanel::tilesWrapAndNoLabelIsCut_data()
{
    QTest::addColumn<int>("width");
    QTest::newRow("1280") << 1268; // the window less its margins
    QTest::newRow("1920") << 1908;
}

void TestCapacityPanel::tilesWrapAndNoLabelIsCut()
{
    QFETCH(int, width);
    CapacityModel model;
    CapacityPanel panel(&model);
    StateBuilder s = sixProviders();
    model.setSnapshot(s.snapshot, T0 + 15000);
    // The longest texts are there.
    QCOMPARE(model.row(QStringLiteral("anthropic-backoff"))->headline, QStringLiteral("BACKING OFF"));
    QVERIFY2(model.row(QStringLiteral("cloud-huge"))->headline.startsWith(QStringLiteral("1,099,511,")),
        qPrintable(model.row(QStringLiteral("cloud-huge"))->headline));
    QVERIFY(model.row(QStringLiteral("search-rich"))->plan.contains(QStringLiteral("USED UP")));
    QCOMPARE(model.row(QStringLiteral("zeta-slots"))->next, QStringLiteral("when a slot is released"));
    panel.resize(width, 200);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    // A window of its own asks for every row.
    panel.resize(width, panel.sizeHint().height());
    QTRY_COMPARE(panel.height(), panel.sizeHint().height());
    QCOMPARE(tileProblem(panel), QString());
    // More than one row at both widths: they wrapped.
    int top = INT_MAX;
    int bottom = 0;
    for (const QString& p : panel.providers()) {
        top = std::min(top, tileOf(panel, p)->y());
        bottom = std::max(bottom, tileOf(panel, p)->y());
    }
    QVERIFY(bottom > top);
    // The countdowns move on: still nothing cut.
    model.tick(T0 + 16000);
    QTRY_COMPARE(panel.height(), panel.sizeHint().height());
    QCOMPARE(tileProblem(panel), QString());
}

void TestCapacityPanel::blockedTilesComeFirstAndDoNotJump()
{
    StateBuilder s;
    for (const char* p : { "a", "b", "c", "d" })
        s.limits(p, windowLimits(10));
    s.limits("full", windowLimits(2));
    s.admit("full", T0);
    s.admit("full", T0 + 1000);
    CapacityModel model;
    CapacityPanel panel(&model);
    panel.resize(1268, 300);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    model.setSnapshot(s.snapshot, T0 + 2000);
    // Blocked first; the others in the model's order.
    const QStringList blockedFirst { QStringLiteral("full"), QStringLiteral("a"), QStringLiteral("b"),
        QStringLiteral("c"), QStringLiteral("d") };
    QCOMPARE(panel.providers(), blockedFirst);
    // Drawn so: the first tile is the leftmost of the top row.
    QTRY_VERIFY(tileOf(panel, QStringLiteral("full"))->x() < tileOf(panel, QStringLiteral("a"))->x());

    // The window frees up (T0 + 34 s): the tile stays first for a while, not jumping on the
    // tick it calms down...
    model.tick(T0 + 34'000);
    QCOMPARE(model.row(QStringLiteral("full"))->headline, QStringLiteral("2 left"));
    QCOMPARE(model.row(QStringLiteral("full"))->level, CapacityModel::Level::Ok);
    QCOMPARE(panel.providers(), blockedFirst);
    model.tick(T0 + 34'000 + CapacityPanel::HOLD_MS - 1000);
    QCOMPARE(panel.providers(), blockedFirst);
    // ...and goes back to its place once it has been calm for HOLD_MS.
    model.tick(T0 + 34'000 + CapacityPanel::HOLD_MS + 1000);
    QTRY_COMPARE(panel.providers().first(), QStringLiteral("a"));
    QCOMPARE(panel.providers().size(), 5);
    // Blocked again: first at once.
    s.admit("full", T0 + 70'000);
    s.admit("full", T0 + 70'500);
    model.setSnapshot(s.snapshot, T0 + 71'000);
    QCOMPARE(panel.providers(), blockedFirst);
}

void TestCapacityPanel::onlyTilesWhoseTextsChangeAreMeasuredAgain()
{
    // A snapshot comes with every admission: with 40 providers, measuring every tile (and
    // laying out the whole flow) each time cost ~1 % of a core at 100 admissions/s.
    StateBuilder s;
    for (const char* p : { "a", "b", "c", "d" })
        s.limits(p, windowLimits(10));
    CapacityModel model;
    CapacityPanel panel(&model);
    panel.resize(1268, 300);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    model.setSnapshot(s.snapshot, T0);
    QCOMPARE(panel.providers().size(), 4);
    QTRY_VERIFY(tileOf(panel, QStringLiteral("d"))->isVisible());
    const int before = panel.remeasuredTiles();
    QVERIFY(before >= 4);
    // The same figures again: nothing a tile shows changes, no tile is measured again.
    model.setSnapshot(s.snapshot, T0);
    model.setSnapshot(s.snapshot, T0);
    QCOMPARE(panel.remeasuredTiles(), before);
    // One admission of b's: only b's tile, and it shows the new figure.
    s.admit("b", T0);
    model.setSnapshot(s.snapshot, T0);
    QCOMPARE(panel.remeasuredTiles(), before + 1);
    QVERIFY2(panel.tileText(QStringLiteral("b")).contains(QStringLiteral("9 left")),
        qPrintable(panel.tileText(QStringLiteral("b"))));
    QVERIFY(panel.tileText(QStringLiteral("a")).contains(QStringLiteral("10 left")));
    // Its tile is laid out again with the new text: no label narrower than it.
    auto* headline
        = tileOf(panel, QStringLiteral("b"))->findChild<QLabel*>(QStringLiteral("capacityHeadline"));
    QTRY_VERIFY(headline->width() >= headline->sizeHint().width());
}

void TestCapacityPanel::aTileWiderThanThePanelScrollsInsteadOfBeingCut()
{
    CapacityModel model;
    CapacityPanel panel(&model);
    StateBuilder s = sixProviders();
    model.setSnapshot(s.snapshot, T0 + 15000);
    panel.resize(300, 200); // narrower than the plan line
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    QFrame* rich = tileOf(panel, QStringLiteral("search-rich"));
    QTRY_VERIFY(rich->width() >= rich->minimumSizeHint().width());
    auto* plan = rich->findChild<QLabel*>(QStringLiteral("capacityPlan"));
    QVERIFY(plan->width() >= plan->sizeHint().width());
    QTRY_VERIFY(panel.findChild<QScrollArea*>()->horizontalScrollBar()->isVisible());
}

void TestCapacityPanel::sixProvidersInTheWindow_data()
{
    QTest::addColumn<QSize>("size");
    QTest::newRow("1280x720") << QSize(1280, 720);
    QTest::newRow("1920x1080") << QSize(1920, 1080);
}

void TestCapacityPanel::sixProvidersInTheWindow()
{
    QFETCH(QSize, size);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString home = dir.path() + QStringLiteral("/home");
    SystemClock clock;
    ProcessProbe probe;
    auto store = FileQuotaStore::open(home.toStdString(), clock);
    QVERIFY(store);
    QuotaLimiter limiter(**store, clock, probe);
    const StateBuilder s = sixProviders();
    for (const auto& [name, limits] : s.snapshot.limits.providers())
        QVERIFY(limiter.setLimits(name, limits, "test"));
    QVERIFY(limiter.pause("batch-paused", "nightly re-index of the whole search corpus", "test"));
    // A storm of them: the alert banner takes its row of the height too.
    for (int i = 0; i < StormDetector::DEFAULT_THRESHOLD; ++i)
        QVERIFY(limiter.report429("anthropic-backoff", "c", std::int64_t(600'000)));
    for (int i = 0; i < 3; ++i) {
        AdmitRequest r = call("window-full");
        r.pid = ProcessProbe::selfPid();
        r.pidNs = probe.pidNamespace();
        QVERIFY(limiter.acquire(r, clock.now()).ok());
    }

    MainWindow w(DashboardOptions { home, {}, dir.path() + QStringLiteral("/dashboard.ini") });
    w.resize(size);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS);
    auto* panel = w.findChild<CapacityPanel*>(QStringLiteral("capacityPanel"));
    QTRY_COMPARE_WITH_TIMEOUT(panel->providers().size(), 6, TIMEOUT_MS);
    // No resetLayout() here: the first run's default layout is made again once the data is
    // there, as a user sees it.
    QTRY_COMPARE(w.size(), size);
    QCOMPARE(panel->providers().first().startsWith(QStringLiteral("anthropic-backoff"))
            || panel->providers().first().startsWith(QStringLiteral("batch-paused"))
            || panel->providers().first().startsWith(QStringLiteral("window-full")),
        true);
    QTRY_VERIFY_WITH_TIMEOUT(w.findChild<QWidget*>(QStringLiteral("alertBanner"))->isVisible(), TIMEOUT_MS);
    QTRY_COMPARE_WITH_TIMEOUT(tileProblem(*panel), QString(), TIMEOUT_MS);
    // At least the first row is whole on screen.
    const QFrame* first = tileOf(*panel, panel->providers().first());
    QVERIFY2(panel->height() >= first->height(),
        qPrintable(QStringLiteral("%1 < %2").arg(panel->height()).arg(first->height())));
    // The charts keep a readable height (issue 28: 45 px with six providers).
    for (const char* name : { "usageChart", "rateLimitChart" }) {
        auto* chart = w.findChild<TimeChartView*>(QLatin1String(name));
        QVERIFY(chart);
        QVERIFY2(chart->height() >= 160,
            qPrintable(QStringLiteral("%1: %2 px").arg(QLatin1String(name)).arg(chart->height())));
    }
}

QTEST_MAIN(TestCapacityPanel)
#include "tst_capacitypanel.moc"
