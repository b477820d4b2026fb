// The dashboard and the provider's own limits: learned limits shown as such and made the user's
// when edited or cleared (the CLI's rule), following the provider turned on and off, "Use the
// provider's limits" (the exact reported figures, by compare-and-set: a refusal or a change made
// meanwhile writes nothing), and a subscription plan's usage on the tile with one alert per
// window. Homes are real (FileQuotaStore in a temp dir), filled through core's APIs; what is
// written is checked in limits.json and the history as another process reads them.

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "capacitymodel.h"
#include "capacitypanel.h"
#include "dashboardcontroller.h"
#include "history/historyreader.h"
#include "learnedlimits.h"
#include "limitshometest.h"
#include "limitsmodel.h"
#include "mainwindow.h"
#include "planalerts.h"
#include "providersmodel.h"
#include "store/filequotastore.h"
#include "traycontroller.h"

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QCryptographicHash>
#include <QFile>
#include <QFrame>
#include <QLabel>
#include <QMenu>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using namespace tollgate;
using namespace tollgate::ui;

class TestDashboardLearning final : public LimitsHomeTest
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void cleanup();

    void learnedValuesAreShownAsTheProviders();
    void editingALearnedValueRemovesOnlyItsMark();
    void togglingLearning();
    void adoptWritesExactlyTheReportedFigures();
    void adoptRefusedOrRacedWritesNothing();
    void tileShowsPlanUsage();
    void tileShowsPlanFromTheHome();
    void planAlertsOncePerWindow();
    void rejectedPlanAlertsOnceThroughTheWindow();

private:
    [[nodiscard]] std::vector<HistoryEvent> history() const;
};

namespace {

// Learning on; requests and tokens came from the provider, input tokens are the user's; the
// class opus has a learned requests limit and the user's input tokens.
ProviderLimits learnedLimits()
{
    ProviderLimits l;
    l.requests = 40;
    l.tokens = 90000;
    l.inputTokens = 30000;
    l.windowMs = 60000;
    l.parallel = 4;
    l.perDay.requests = 5000;
    l.learn = true;
    l.learned = { "requests", "tokens" };
    ModelLimits opus { 10, std::nullopt, 60000 };
    opus.inputTokens = 12000;
    opus.match = { "claude-opus-4*" };
    opus.learned = { "requests" };
    l.models["opus"] = opus;
    return l;
}

ProviderLimits userLimits()
{
    ProviderLimits l;
    l.requests = 50;
    l.tokens = 90000;
    l.windowMs = 60000;
    l.parallel = 2;
    ModelLimits opus { 10, std::nullopt, 60000 };
    opus.match = { "claude-opus-4*" };
    l.models["opus"] = opus;
    return l;
}

ActionResult waitAction(QSignalSpy& spy)
{
    if (spy.isEmpty() && !spy.wait(TIMEOUT_MS))
        return {};
    return spy.takeFirst().at(0).value<ActionResult>();
}

constexpr std::int64_t HOUR = 3600 * 1000;

} // namespace

void TestDashboardLearning::init()
{
    newHome();
}

void TestDashboardLearning::cleanup()
{
    dropHome();
}

std::vector<HistoryEvent> TestDashboardLearning::history() const
{
    HistoryReader reader(m_home.toStdString());
    auto batch = reader.poll();
    return batch ? batch->events : std::vector<HistoryEvent> {};
}

// ---------------------------------------------------------------------------------------------

void TestDashboardLearning::learnedValuesAreShownAsTheProviders()
{
    LimitsModel model;
    Tester t(&model);
    DashboardSnapshot s;
    QVERIFY(s.limits.set("api", learnedLimits()));
    model.setSnapshot(s);
    const int p = model.rowOf(QStringLiteral("api"));
    const int opus = model.rowOf(QStringLiteral("api/opus"));
    auto cell = [&](int row, int column, int role = Qt::DisplayRole) { return model.index(row, column).data(role); };
    QCOMPARE(cell(p, LimitsModel::Requests).toString(), QStringLiteral("40 (from provider)"));
    QCOMPARE(cell(p, LimitsModel::Requests, Qt::EditRole).toString(), QStringLiteral("40")); // the editor's
    QVERIFY(cell(p, LimitsModel::Requests, Qt::ToolTipRole).toString().contains(QStringLiteral("From the provider")));
    QVERIFY(cell(p, LimitsModel::Requests, Qt::FontRole).value<QFont>().italic());
    QCOMPARE(cell(p, LimitsModel::InputTokens).toString(), QStringLiteral("30000")); // the user's
    QVERIFY(!cell(p, LimitsModel::InputTokens, Qt::FontRole).isValid());
    QCOMPARE(cell(p, LimitsModel::RequestsPerDay).toString(), QStringLiteral("5000"));
    QCOMPARE(cell(opus, LimitsModel::Requests).toString(), QStringLiteral("10 (from provider)"));
    QCOMPARE(cell(opus, LimitsModel::InputTokens).toString(), QStringLiteral("12000"));
    // Following the provider: a checkbox on the provider's row only.
    QCOMPARE(cell(p, LimitsModel::Learn, Qt::CheckStateRole).toInt(), int(Qt::Checked));
    QVERIFY(model.flags(model.index(p, LimitsModel::Learn)) & Qt::ItemIsUserCheckable);
    QVERIFY(!(model.flags(model.index(opus, LimitsModel::Learn)) & Qt::ItemIsUserCheckable));
    QVERIFY(!cell(opus, LimitsModel::Learn, Qt::CheckStateRole).isValid());
}

void TestDashboardLearning::editingALearnedValueRemovesOnlyItsMark()
{
    const ProviderLimits before = learnedLimits();
    makeHome(before);
    START_CONTROLLER(c);
    LimitsModel* model = c->limits();
    QSignalSpy actions(c.get(), &DashboardController::actionFinished);
    const int row = model->rowOf(QStringLiteral("api"));
    ProviderLimits expected = before;

    // A learned value edited: the new value, its mark gone, every other mark and value kept.
    QVERIFY(model->setData(model->index(row, LimitsModel::Requests), QStringLiteral("45")));
    ActionResult r = waitAction(actions);
    QVERIFY2(r.ok, qPrintable(r.message));
    expected.requests = 45;
    expected.learned = { "tokens" };
    QCOMPARE(written(), expected);
    QTRY_COMPARE_WITH_TIMEOUT(
        model->index(row, LimitsModel::Requests).data().toString(), QStringLiteral("45"), TIMEOUT_MS);

    // The same figure typed again: the user takes it as theirs (the CLI's --tokens N does too).
    QVERIFY(model->setData(model->index(row, LimitsModel::Tokens), QStringLiteral("90000")));
    r = waitAction(actions);
    QVERIFY2(r.ok, qPrintable(r.message));
    QVERIFY2(r.message.contains(QStringLiteral("tokens per window kept as yours")), qPrintable(r.message));
    expected.learned = {};
    QCOMPARE(written(), expected);

    // A learned class limit cleared: asked first (a limit removed), then written without its
    // mark (kept, validate would refuse a mark on a limit that is not set).
    const int opus = model->rowOf(QStringLiteral("api/opus"));
    QTRY_COMPARE_WITH_TIMEOUT(model->index(row, LimitsModel::Tokens).data().toString(), QStringLiteral("90000"),
        TIMEOUT_MS);
    QSignalSpy confirm(c.get(), &DashboardController::limitChangeNeedsConfirmation);
    QVERIFY(model->setData(model->index(opus, LimitsModel::Requests), QString()));
    QCOMPARE(confirm.size(), 1);
    const auto change = confirm.takeFirst().at(0).value<LimitChange>();
    expected.models["opus"].requests.reset();
    expected.models["opus"].learned = {};
    QCOMPARE(change.after, expected);
    c->applyLimitChange(change);
    r = waitAction(actions);
    QVERIFY2(r.ok, qPrintable(r.message));
    QCOMPARE(written(), expected);
    QVERIFY(expected.learn); // learning itself stays on
}

void TestDashboardLearning::togglingLearning()
{
    const ProviderLimits before = learnedLimits();
    makeHome(before);
    START_CONTROLLER(c);
    LimitsModel* model = c->limits();
    QSignalSpy actions(c.get(), &DashboardController::actionFinished);
    const int row = model->rowOf(QStringLiteral("api"));

    // Off: --no-learn's result — every value kept, as the user's (no mark anywhere).
    QVERIFY(model->setData(model->index(row, LimitsModel::Learn), Qt::Unchecked, Qt::CheckStateRole));
    ActionResult r = waitAction(actions);
    QVERIFY2(r.ok, qPrintable(r.message));
    QVERIFY2(r.message.contains(QStringLiteral("no longer following the provider's limits")), qPrintable(r.message));
    ProviderLimits expected = before;
    expected.learn = false;
    expected.learned.clear();
    expected.models["opus"].learned.clear();
    QCOMPARE(written(), expected);
    QTRY_COMPARE_WITH_TIMEOUT(model->index(row, LimitsModel::Learn).data(Qt::CheckStateRole).toInt(),
        int(Qt::Unchecked), TIMEOUT_MS);
    QCOMPARE(model->index(row, LimitsModel::Requests).data().toString(), QStringLiteral("40"));

    // On again, through the window's menu action: only learn changes.
    MainWindow w(DashboardOptions { m_home, {}, m_dir->path() + QStringLiteral("/dashboard.ini") });
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->providers()->rowCount() == 1, TIMEOUT_MS);
    QSignalSpy windowActions(w.controller(), &DashboardController::actionFinished);
    auto menu = w.providerMenu(QStringLiteral("api"));
    auto* follow = menu->findChild<QAction*>(QStringLiteral("actionFollowProvider"));
    QVERIFY(follow);
    QVERIFY(follow->isCheckable() && !follow->isChecked());
    follow->setChecked(true);
    r = waitAction(windowActions);
    QVERIFY2(r.ok, qPrintable(r.message));
    expected.learn = true;
    QCOMPARE(written(), expected);
    QTRY_VERIFY_WITH_TIMEOUT(
        w.providerMenu(QStringLiteral("api"))->findChild<QAction*>(QStringLiteral("actionFollowProvider"))->isChecked(),
        TIMEOUT_MS);
}

void TestDashboardLearning::adoptWritesExactlyTheReportedFigures()
{
    const ProviderLimits before = userLimits();
    makeHome(before);
    // What the proxy read from an answer's headers, for the provider's own limits.
    const ReportedLimits reported { 40, -1, 30000, 8000, "" };
    QVERIFY(m_limiter->noteReportedLimits("api", reported, PlanUsage {}, "test"));
    MainWindow w(DashboardOptions { m_home, {}, m_dir->path() + QStringLiteral("/dashboard.ini") });
    QString asked;
    w.setConfirmHandler([&asked](const QString&, const QString& text) {
        asked = text;
        return true;
    });
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->adoptionOf(QStringLiteral("api")).has_value(), TIMEOUT_MS);
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);
    auto menu = w.providerMenu(QStringLiteral("api"));
    auto* adopt = menu->findChild<QAction*>(QStringLiteral("actionAdoptProviderLimits"));
    QVERIFY(adopt && adopt->isEnabled());
    adopt->trigger();
    // The dialog listed the exact changes.
    QVERIFY2(asked.contains(QStringLiteral("requests per window: 50 → 40")), qPrintable(asked));
    QVERIFY2(asked.contains(QStringLiteral("input tokens per window: none → 30000")), qPrintable(asked));
    QVERIFY2(asked.contains(QStringLiteral("output tokens per window: none → 8000")), qPrintable(asked));
    QVERIFY2(!asked.contains(QStringLiteral("tokens per window: 90000")), qPrintable(asked));
    const ActionResult r = waitAction(actions);
    QVERIFY2(r.ok, qPrintable(r.message));
    // Exactly the reported figures, unmarked (the user's now); everything else as it was.
    ProviderLimits expected = before;
    expected.requests = 40;
    expected.inputTokens = 30000;
    expected.outputTokens = 8000;
    QCOMPARE(written(), expected);
    QCOMPARE(written(), LimitLearning::adopt(before, reported)->limits);
    // The history says it in the CLI's words.
    const std::string what = "adopted the provider's limits: requests 50 -> 40, input_tokens none -> 30000, "
                             "output_tokens none -> 8000";
    const auto events = history();
    QVERIFY(std::any_of(events.begin(), events.end(), [&what](const HistoryEvent& e) {
        return e.type == EventType::Limits && e.reason.find(what) != std::string::npos;
    }));
    // Nothing left to adopt.
    QTRY_VERIFY_WITH_TIMEOUT(!w.controller()->adoptionOf(QStringLiteral("api")).has_value(), TIMEOUT_MS);
    QVERIFY(!w.providerMenu(QStringLiteral("api"))
                 ->findChild<QAction*>(QStringLiteral("actionAdoptProviderLimits"))
                 ->isEnabled());
}

void TestDashboardLearning::adoptRefusedOrRacedWritesNothing()
{
    const ProviderLimits before = userLimits();
    makeHome(before);
    // Figures for the class opus this time.
    QVERIFY(m_limiter->noteReportedLimits("api", ReportedLimits { 8, -1, 20000, -1, "opus" }, PlanUsage {}, "test"));
    MainWindow w(DashboardOptions { m_home, {}, m_dir->path() + QStringLiteral("/dashboard.ini") });
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->adoptionOf(QStringLiteral("api")).has_value(), TIMEOUT_MS);
    QCOMPARE(w.controller()->adoptionOf(QStringLiteral("api"))->change.description,
        QStringLiteral("adopted the provider's limits: requests 10 -> 8, input_tokens none -> 20000 (class opus)"));

    // Refused in the dialog: nothing written.
    const QByteArray digest = limitsDigest();
    QString asked;
    w.setConfirmHandler([&asked](const QString&, const QString& text) {
        asked = text;
        return false;
    });
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);
    w.adoptProviderLimits(QStringLiteral("api"));
    QVERIFY2(asked.contains(QStringLiteral("requests per window: 10 → 8 (class opus)")), qPrintable(asked));
    QTest::qWait(300);
    QVERIFY(actions.isEmpty());
    QCOMPARE(limitsDigest(), digest);

    // Someone else changes the limits while the dialog is open: the write loses the race, says
    // so, and what the other one set stays.
    ProviderLimits other = before;
    other.requests = 77;
    w.setConfirmHandler([&](const QString&, const QString&) {
        if (!m_limiter->setLimits("api", other, "someone-else"))
            qWarning("could not change the limits behind the dialog");
        return true;
    });
    w.adoptProviderLimits(QStringLiteral("api"));
    const ActionResult r = waitAction(actions);
    QVERIFY(!r.ok);
    QVERIFY2(r.message.contains(QStringLiteral("changed since you looked; nothing done")), qPrintable(r.message));
    QCOMPARE(written(), other);
    auto* banner = w.findChild<QLabel*>(QStringLiteral("messageBannerText"));
    QVERIFY(banner && banner->text() == r.message);
}

void TestDashboardLearning::tileShowsPlanUsage()
{
    const std::int64_t now = 1'000'000'000'000;
    DashboardSnapshot s;
    s.hasState = true;
    QVERIFY(s.limits.set("api", userLimits()));
    ProviderState& p = s.state.ensureProvider("api");
    p.plan.atMs = now - 60000;
    p.plan.status = PlanUsage::Status::Allowed;
    p.plan.fiveHourPermille = 421;
    p.plan.fiveHourResetMs = now + HOUR + 10 * 60000;
    p.plan.sevenDayPermille = 634;
    p.plan.sevenDayResetMs = now + 3 * 24 * HOUR + 4 * HOUR;
    CapacityModel model;
    CapacityPanel panel(&model);
    model.setSnapshot(s, now);
    const CapacityModel::Row* r = model.row(QStringLiteral("api"));
    QVERIFY(r);
    QCOMPARE(r->plan, QStringLiteral("plan: 5 h 42% (resets in 1 h 10 min), 7 d 63% (resets in 3 d 4 h)"));
    QCOMPARE(r->planLevel, CapacityModel::PlanLevel::Allowed);
    QVERIFY2(panel.tileText(QStringLiteral("api")).contains(r->plan), qPrintable(panel.tileText(QStringLiteral("api"))));
    auto* label = panel.findChild<QLabel*>(QStringLiteral("capacityPlan"));
    QVERIFY(label && !label->isHidden());

    // Nearly used up, then used up: said, and coloured (the tile's near / blocked accent).
    p.plan.status = PlanUsage::Status::Warning;
    p.plan.fiveHourPermille = 905;
    model.setSnapshot(s, now);
    r = model.row(QStringLiteral("api"));
    QCOMPARE(r->plan, QStringLiteral("plan: 5 h 91% (resets in 1 h 10 min), 7 d 63% (resets in 3 d 4 h); nearly used up"));
    QCOMPARE(r->planLevel, CapacityModel::PlanLevel::Warning);
    QCOMPARE(label->property("planLevel").toInt(), int(CapacityModel::PlanLevel::Warning));
    p.plan.status = PlanUsage::Status::Rejected;
    p.plan.fiveHourPermille = 1000;
    model.setSnapshot(s, now);
    r = model.row(QStringLiteral("api"));
    QVERIFY2(r->plan.endsWith(QStringLiteral("; USED UP: callers held until the reset")), qPrintable(r->plan));
    QCOMPARE(r->planLevel, CapacityModel::PlanLevel::Rejected);
    QCOMPARE(label->property("planLevel").toInt(), int(CapacityModel::PlanLevel::Rejected));
    QVERIFY(label->palette().color(QPalette::WindowText) != panel.palette().color(QPalette::WindowText));

    // After the 5-hour window has reset: the figures are of the window before, and say so.
    model.tick(now + 2 * HOUR);
    r = model.row(QStringLiteral("api"));
    QCOMPARE(r->planLevel, CapacityModel::PlanLevel::Old);
    QVERIFY2(r->plan.endsWith(QStringLiteral("(stated 2 h 1 min ago, before a reset)")), qPrintable(r->plan));
    QVERIFY2(r->plan.startsWith(QStringLiteral("plan: 5 h 100%, 7 d 63% (resets in 3 d 2 h)")), qPrintable(r->plan));

    // No plan stated: no line.
    p.plan = PlanUsage {};
    model.setSnapshot(s, now);
    QVERIFY(model.row(QStringLiteral("api"))->plan.isEmpty());
    QVERIFY(label->isHidden());
}

void TestDashboardLearning::tileShowsPlanFromTheHome()
{
    makeHome(userLimits());
    const std::int64_t now = m_clock.unixMs();
    PlanUsage plan;
    plan.atMs = now; // stated (the store dates it)
    plan.status = PlanUsage::Status::Warning;
    plan.fiveHourPermille = 870;
    plan.fiveHourResetMs = now + 2 * HOUR + 30 * 60000;
    plan.sevenDayPermille = 300;
    plan.sevenDayResetMs = now + 5 * 24 * HOUR;
    QVERIFY(m_limiter->noteReportedLimits("api", ReportedLimits {}, plan, "test"));
    MainWindow w(DashboardOptions { m_home, {}, m_dir->path() + QStringLiteral("/dashboard.ini") });
    w.resize(1280, 690);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS);
    auto* panel = w.findChild<CapacityPanel*>(QStringLiteral("capacityPanel"));
    QTRY_VERIFY_WITH_TIMEOUT(
        panel->tileText(QStringLiteral("api")).contains(QStringLiteral("plan: 5 h 87% (resets in 2 h 29 min")), TIMEOUT_MS);
    QVERIFY2(panel->tileText(QStringLiteral("api")).contains(QStringLiteral("7 d 30% (resets in 4 d 23 h)")),
        qPrintable(panel->tileText(QStringLiteral("api"))));
    QVERIFY(panel->tileText(QStringLiteral("api")).contains(QStringLiteral("; nearly used up")));
    QCOMPARE(w.capacity()->row(QStringLiteral("api"))->planLevel, CapacityModel::PlanLevel::Warning);
    // Laid out whole: the plan label is as wide as its text.
    QApplication::processEvents();
    auto* label = panel->findChild<QLabel*>(QStringLiteral("capacityPlan"));
    QVERIFY(label && label->isVisible());
    QVERIFY2(label->width() >= label->sizeHint().width(),
        qPrintable(QStringLiteral("%1 < %2").arg(label->width()).arg(label->sizeHint().width())));
}

void TestDashboardLearning::planAlertsOncePerWindow()
{
    const std::int64_t now = 1'000'000'000'000;
    QuotaState state;
    ProviderState& p = state.ensureProvider("api");
    p.plan.atMs = now;
    p.plan.status = PlanUsage::Status::Warning;
    p.plan.fiveHourPermille = 850;
    p.plan.fiveHourResetMs = now + HOUR;
    p.plan.sevenDayPermille = 400;
    p.plan.sevenDayResetMs = now + 100 * HOUR;
    PlanAlerts alerts;
    auto once = alerts.update(state, now);
    QCOMPARE(once.size(), 1); // Warning, the 5-hour window
    QCOMPARE(once.at(0).plan.status, PlanUsage::Status::Warning);
    QCOMPARE(once.at(0).windowResetMs, now + HOUR);
    QVERIFY(alerts.update(state, now + 1000).isEmpty()); // the same window: once
    p.plan.status = PlanUsage::Status::Rejected;
    p.plan.fiveHourPermille = 1000;
    auto rejected = alerts.update(state, now + 2000);
    QCOMPARE(rejected.size(), 1); // Rejected is news in the same window
    QCOMPARE(rejected.at(0).plan.status, PlanUsage::Status::Rejected);
    QVERIFY(alerts.update(state, now + 3000).isEmpty());
    QVERIFY(alerts.update(state, now + 4000).isEmpty());
    // Still in the state after the reset: old figures, no alert.
    QVERIFY(alerts.update(state, now + HOUR + 1).isEmpty());
    // The next window rejected too: a new alert.
    p.plan.atMs = now + 5 * HOUR;
    p.plan.fiveHourResetMs = now + 6 * HOUR;
    auto next = alerts.update(state, now + 5 * HOUR);
    QCOMPARE(next.size(), 1);
    QCOMPARE(next.at(0).windowResetMs, now + 6 * HOUR);
    QVERIFY(alerts.update(state, now + 5 * HOUR + 1000).isEmpty());
    // Warning after Rejected in the same window: nothing new.
    p.plan.status = PlanUsage::Status::Warning;
    QVERIFY(alerts.update(state, now + 5 * HOUR + 2000).isEmpty());
}

void TestDashboardLearning::rejectedPlanAlertsOnceThroughTheWindow()
{
    makeHome(userLimits());
    MainWindow w(DashboardOptions { m_home, {}, m_dir->path() + QStringLiteral("/dashboard.ini") });
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS);
    QVERIFY(!w.tray()->available()); // offscreen has no tray: the storm alert's banner
    auto* banner = w.findChild<QFrame*>(QStringLiteral("alertBanner"));
    auto* text = w.findChild<QLabel*>(QStringLiteral("alertBannerText"));
    QVERIFY(banner && text && banner->isHidden());
    QSignalSpy alerts(w.controller(), &DashboardController::planAlert);
    QSignalSpy snapshots(w.controller(), &DashboardController::snapshotChanged);
    const std::int64_t now = m_clock.unixMs();
    PlanUsage plan;
    plan.atMs = now;
    plan.status = PlanUsage::Status::Rejected;
    plan.fiveHourPermille = 1000;
    plan.fiveHourResetMs = now + 2 * HOUR;
    plan.sevenDayPermille = 700;
    plan.sevenDayResetMs = now + 50 * HOUR;
    QVERIFY(m_limiter->noteReportedLimits("api", ReportedLimits {}, plan, "test"));
    QTRY_COMPARE_WITH_TIMEOUT(alerts.size(), 1, TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(!banner->isHidden(), TIMEOUT_MS);
    QVERIFY2(text->text().contains(QStringLiteral("plan of api is used up")), qPrintable(text->text()));
    // More snapshots of the same window (another state change, a refresh): no second alert.
    const int seen = snapshots.size();
    QVERIFY(m_limiter->report429("api", "someone", std::nullopt));
    QTRY_VERIFY_WITH_TIMEOUT(snapshots.size() > seen, TIMEOUT_MS);
    w.refresh();
    QTest::qWait(500);
    QCOMPARE(alerts.size(), 1);
    // The next window (a later reset) rejected again: one more.
    plan.fiveHourResetMs = now + 7 * HOUR;
    QVERIFY(m_limiter->noteReportedLimits("api", ReportedLimits {}, plan, "test"));
    QTRY_COMPARE_WITH_TIMEOUT(alerts.size(), 2, TIMEOUT_MS);
}

QTEST_MAIN(TestDashboardLearning)
#include "tst_dashboardlearning.moc"
