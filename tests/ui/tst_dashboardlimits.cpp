// The dashboard in the provider's own terms: input and output tokens, per-day budgets, the day
// reset and model classes. Tiles and tooltips from a hand-made state at a fixed clock (the
// figures are core's Capacity); edits through the real worker on a real home, checked in
// limits.json as another process reads it — the edited field changes and nothing else; a
// refused value is refused with the core's (and the CLI's) words and writes nothing.

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "capacitymodel.h"
#include "capacitypanel.h"
#include "dashboardcontroller.h"
#include "keyedtableview.h"
#include "limitshometest.h"
#include "limitsmodel.h"
#include "mainwindow.h"
#include "quota/quotapolicy.h"
#include "store/filequotastore.h"

#include <QAbstractItemModelTester>
#include <QCryptographicHash>
#include <QFile>
#include <QFrame>
#include <QLabel>
#include <QMenu>
#include <QScrollArea>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>

using namespace tollgate;
using namespace tollgate::ui;

class TestDashboardLimits final : public LimitsHomeTest
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void cleanup();

    // Tiles.
    void tilesShowInputOutputAndPerDayBudgets();
    void tileOfARollingDayAndAFullBudget();
    void tilesLayOutTheirTextFullyAt1280x720();

    // The limits table.
    void classIsShownWithItsPatterns();
    void editingInputTokensKeepsEverythingElse();
    void editingAPerDayLimitAndTheDayReset();
    void editingAClassAndItsPatterns();
    void invalidValuesAreRefusedWithTheCoresWords();
    void backoffAndMaxHoldAreEditedAsTheCliSetsThem();
    void addAndRemoveAClassFromTheWindow();

private:
};

namespace {

constexpr std::int64_t WINDOW_MS = 32000; // 1 s buckets: the times below are exact
constexpr std::int64_t T0 = 1'000'000'000'000; // 2001-09-09 01:46:40 UTC, a bucket edge

// Every kind of limit at once, each with a value no other has, so a mix-up shows.
ProviderLimits richLimits()
{
    ProviderLimits l;
    l.requests = 50;
    l.tokens = 90000;
    l.inputTokens = 30000;
    l.outputTokens = 8000;
    l.windowMs = 60000;
    l.parallel = 4;
    l.headroomPercent = 90;
    l.backoffBaseMs = 30000;
    l.backoffCapMs = 600000;
    l.maxHoldMs = 120000;
    l.perDay.requests = 5000;
    l.perDay.tokens = 2000000;
    l.perDay.outputTokens = 400000;
    l.dayReset = *DayReset::parse("07:30@Europe/Paris");
    ModelLimits opus { 10, std::nullopt, 60000 };
    opus.inputTokens = 12000;
    opus.perDay.requests = 400;
    opus.match = { "claude-opus-4*", "claude-opus-5*" };
    l.models["opus"] = opus;
    ModelLimits haiku { 30, 50000, 30000 };
    l.models["claude-haiku"] = haiku; // the model of its own name (no patterns)
    return l;
}

AdmitRequest call(std::int64_t input, std::int64_t output, const std::string& model = {})
{
    AdmitRequest r;
    r.provider = "api";
    r.caller = "c";
    r.model = model;
    r.inputTokens = input;
    r.outputTokens = output;
    r.tokens = input + output;
    r.pid = 100;
    return r;
}

// A snapshot as the observer hands it over, built with the limiter's own policy functions.
DashboardSnapshot snapshotWith(
    const ProviderLimits& l, const std::vector<std::pair<std::int64_t, AdmitRequest>>& calls)
{
    DashboardSnapshot s;
    s.hasState = true;
    if (!s.limits.set("api", l))
        qFatal("limits refused");
    for (const auto& [at, r] : calls) {
        ProviderState& p = s.state.ensureProvider("api");
        QuotaPolicy::syncProvider(p, l, at);
        auto d = QuotaPolicy::admit(s.state, p, l, r, 0, at, false);
        if (!d || !d->admitted)
            qFatal("not admitted: %s", d ? waitReasonName(d->reason) : "error");
    }
    return s;
}

bool has(const QStringList& lines, const QString& line)
{
    return lines.contains(line);
}

} // namespace

void TestDashboardLimits::init()
{
    newHome();
}

void TestDashboardLimits::cleanup()
{
    dropHome();
}

// ---------------------------------------------------------------------------------------------
// Tiles

void TestDashboardLimits::tilesShowInputOutputAndPerDayBudgets()
{
    ProviderLimits l;
    l.windowMs = WINDOW_MS;
    l.requests = 10;
    l.inputTokens = 1000;
    l.outputTokens = 500;
    l.perDay.requests = 100;
    l.perDay.outputTokens = 2000;
    l.dayReset = *DayReset::parse("00:00"); // UTC: T0 is 01:46:40, the day ends in 22 h 13 min
    ModelLimits opus { 4, std::nullopt, WINDOW_MS };
    opus.match = { "claude-opus-4*" };
    l.models["opus"] = opus;
    // 300 in + 200 out at T0, 100 in + 300 out (opus) at T0 + 1 s: output 500 of 500 is full
    // until the first call leaves the window, at T0 + 32 s.
    const DashboardSnapshot s
        = snapshotWith(l, { { T0, call(300, 200) }, { T0 + 1000, call(100, 300, "claude-opus-4-1") } });
    CapacityModel model;
    CapacityPanel panel(&model);
    model.setSnapshot(s, T0 + 2000);
    const CapacityModel::Row* r = model.row(QStringLiteral("api"));
    QVERIFY(r);
    const QStringList& d = r->details;
    QVERIFY2(has(d, QStringLiteral("8 / 10 requests left per 32 s")), qPrintable(d.join(QLatin1Char('|'))));
    QVERIFY2(has(d, QStringLiteral("600 / 1,000 input tokens left")), qPrintable(d.join(QLatin1Char('|'))));
    QVERIFY2(has(d, QStringLiteral("0 / 500 output tokens left, more in 31 s")),
        qPrintable(d.join(QLatin1Char('|'))));
    // Per day, then when the calendar day starts afresh.
    QVERIFY2(has(d, QStringLiteral("98 / 100 requests left today")), qPrintable(d.join(QLatin1Char('|'))));
    QVERIFY2(has(d, QStringLiteral("day resets in 22 h 13 min")), qPrintable(d.join(QLatin1Char('|'))));
    QVERIFY2(has(d, QStringLiteral("1,500 / 2,000 output tokens left today")),
        qPrintable(d.join(QLatin1Char('|'))));
    // The class: its tightest budget in the tile, every budget and its patterns in the tooltip.
    QVERIFY2(has(d, QStringLiteral("class opus: 3 / 4 requests left per 32 s")),
        qPrintable(d.join(QLatin1Char('|'))));
    QVERIFY2(r->tooltip.contains(QStringLiteral("class opus (claude-opus-4*): 1/4 requests per 32 s")),
        qPrintable(r->tooltip));
    // The tooltip says it as `tollgate status` does: used/limit.
    QVERIFY2(r->tooltip.contains(
                 QStringLiteral("2/10 requests, 400/1,000 input tokens, 500/500 output tokens per 32 s")),
        qPrintable(r->tooltip));
    QVERIFY2(r->tooltip.contains(QStringLiteral(
                 "2/100 requests, 500/2,000 output tokens today (resets at 00:00, in 22 h 13 min)")),
        qPrintable(r->tooltip));
    // The tile shows what the model says, every line of it.
    const QString tile = panel.tileText(QStringLiteral("api"));
    for (const QString& line : d)
        QVERIFY2(tile.contains(line), qPrintable(tile));
    // The output budget frees when the first call leaves the window.
    model.tick(T0 + WINDOW_MS + 1100); // its bucket has left
    QVERIFY2(has(model.row(QStringLiteral("api"))->details, QStringLiteral("200 / 500 output tokens left")),
        qPrintable(model.row(QStringLiteral("api"))->details.join(QLatin1Char('|'))));
}

void TestDashboardLimits::tileOfARollingDayAndAFullBudget()
{
    ProviderLimits l;
    l.windowMs = WINDOW_MS;
    l.perDay.requests = 2;
    l.perDay.inputTokens = 5000;
    const DashboardSnapshot s = snapshotWith(l, { { T0, call(10, 1) }, { T0 + 1000, call(10, 1) } });
    CapacityModel model;
    model.setSnapshot(s, T0 + 5000);
    const CapacityModel::Row* r = model.row(QStringLiteral("api"));
    QVERIFY(r);
    QCOMPARE(r->level, CapacityModel::Level::Blocked);
    // A rolling day: "in 24 h", and a full budget says when the oldest call leaves the day.
    // (A rolling day counts in buckets: when the oldest leaves is a bucket's end, within 24 h.)
    const auto full = std::find_if(r->details.cbegin(), r->details.cend(), [](const QString& line) {
        return line.startsWith(QStringLiteral("0 / 2 requests left in 24 h, more in "));
    });
    QVERIFY2(full != r->details.cend(), qPrintable(r->details.join(QLatin1Char('|'))));
    QVERIFY2(full->contains(QStringLiteral(" h ")), qPrintable(*full));
    QVERIFY2(has(r->details, QStringLiteral("4,980 / 5,000 input tokens left in 24 h")),
        qPrintable(r->details.join(QLatin1Char('|'))));
    QVERIFY2(r->tooltip.contains(QStringLiteral("2/2 requests, 20/5,000 input tokens in the last 24 h")),
        qPrintable(r->tooltip));
}

void TestDashboardLimits::tilesLayOutTheirTextFullyAt1280x720()
{
    // Three providers, one with every kind of limit, in the window at 1280×720: every label
    // of every tile is as wide as its text and lies inside the panel's visible part.
    makeHome(richLimits());
    ProviderLimits plain;
    plain.requests = 300;
    plain.tokens = 200000;
    plain.parallel = 6;
    QVERIFY(m_limiter->setLimits("search-api", plain, "test"));
    ProviderLimits gemini;
    gemini.requests = 15;
    gemini.tokens = 1000000;
    gemini.perDay.requests = 1500;
    gemini.dayReset = *DayReset::parse("00:00@America/Los_Angeles");
    QVERIFY(m_limiter->setLimits("gemini", gemini, "test"));
    MainWindow w(DashboardOptions { m_home, {}, m_dir->path() + QStringLiteral("/dashboard.ini") });
    w.resize(1280, 690);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS);
    w.resetLayout();
    auto* panel = w.findChild<CapacityPanel*>(QStringLiteral("capacityPanel"));
    QTRY_COMPARE_WITH_TIMEOUT(panel->providers().size(), 3, TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(
        panel->tileText(QStringLiteral("api")).contains(QStringLiteral("output tokens left")), TIMEOUT_MS);
    QApplication::processEvents();
    auto* viewport = panel->findChild<QScrollArea*>()->viewport();
    for (QFrame* tile : panel->findChildren<QFrame*>(QStringLiteral("capacityTile"))) {
        const QRect inViewport(tile->mapTo(viewport, QPoint(0, 0)), tile->size());
        QVERIFY2(viewport->rect().contains(inViewport),
            qPrintable(QStringLiteral("tile %1 at %2,%3 %4x%5 outside %6x%7")
                           .arg(tile->property("provider").toString())
                           .arg(inViewport.x())
                           .arg(inViewport.y())
                           .arg(inViewport.width())
                           .arg(inViewport.height())
                           .arg(viewport->width())
                           .arg(viewport->height())));
        for (QLabel* label : tile->findChildren<QLabel*>()) {
            if (!label->isVisible())
                continue;
            QVERIFY2(
                label->width() >= label->sizeHint().width() && label->height() >= label->sizeHint().height(),
                qPrintable(QStringLiteral("%1: %2x%3 < %4x%5")
                               .arg(label->text())
                               .arg(label->width())
                               .arg(label->height())
                               .arg(label->sizeHint().width())
                               .arg(label->sizeHint().height())));
            QVERIFY(tile->rect().contains(QRect(label->mapTo(tile, QPoint(0, 0)), label->size())));
        }
    }
    // And the tiles leave the charts their room.
    QVERIFY2(panel->height() <= 190, qPrintable(QString::number(panel->height())));
}

// ---------------------------------------------------------------------------------------------
// The limits table

void TestDashboardLimits::classIsShownWithItsPatterns()
{
    LimitsModel model;
    Tester t(&model);
    DashboardSnapshot s;
    QVERIFY(s.limits.set("api", richLimits()));
    model.setSnapshot(s);
    QCOMPARE(model.rowCount(), 3); // the provider and its two classes
    const int p = model.rowOf(QStringLiteral("api"));
    const int opus = model.rowOf(QStringLiteral("api/opus"));
    const int haiku = model.rowOf(QStringLiteral("api/claude-haiku"));
    QVERIFY(p >= 0 && opus >= 0 && haiku >= 0);
    auto cell = [&](int row, int column, int role = Qt::DisplayRole) {
        return model.index(row, column).data(role).toString();
    };
    QCOMPARE(cell(opus, LimitsModel::Class), QStringLiteral("opus"));
    QCOMPARE(cell(opus, LimitsModel::Models), QStringLiteral("claude-opus-4*, claude-opus-5*"));
    QCOMPARE(cell(opus, LimitsModel::Requests), QStringLiteral("10"));
    QCOMPARE(cell(opus, LimitsModel::InputTokens), QStringLiteral("12000"));
    QCOMPARE(cell(opus, LimitsModel::Tokens), QStringLiteral("—"));
    QCOMPARE(cell(opus, LimitsModel::RequestsPerDay), QStringLiteral("400"));
    QCOMPARE(cell(haiku, LimitsModel::Models), QStringLiteral("(the model claude-haiku)"));
    QCOMPARE(cell(haiku, LimitsModel::Models, Qt::EditRole), QString());
    QCOMPARE(cell(haiku, LimitsModel::Window), QStringLiteral("30 s"));
    // The provider's row: every metric, the day reset, headroom.
    QCOMPARE(cell(p, LimitsModel::InputTokens), QStringLiteral("30000"));
    QCOMPARE(cell(p, LimitsModel::OutputTokens), QStringLiteral("8000"));
    QCOMPARE(cell(p, LimitsModel::TokensPerDay), QStringLiteral("2000000"));
    QCOMPARE(cell(p, LimitsModel::InputTokensPerDay), QStringLiteral("—"));
    QCOMPARE(cell(p, LimitsModel::OutputTokensPerDay), QStringLiteral("400000"));
    QCOMPARE(cell(p, LimitsModel::DayResets), QStringLiteral("07:30@Europe/Paris"));
    QCOMPARE(cell(p, LimitsModel::Headroom), QStringLiteral("90"));
    QVERIFY(cell(p, LimitsModel::InputTokens, Qt::ToolTipRole).contains(QStringLiteral("27000")));
    // What a class does not have of its own is not editable on its row.
    QVERIFY(!(model.flags(model.index(opus, LimitsModel::DayResets)) & Qt::ItemIsEditable));
    QVERIFY(!(model.flags(model.index(opus, LimitsModel::Parallel)) & Qt::ItemIsEditable));
    QVERIFY(model.flags(model.index(opus, LimitsModel::Models)) & Qt::ItemIsEditable);
    QVERIFY(!(model.flags(model.index(p, LimitsModel::Models)) & Qt::ItemIsEditable));
    // A snapshot with the same limits changes nothing (no signal at all).
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.setSnapshot(s);
    QVERIFY(changed.isEmpty());
    // The tile's tooltip names each class with its patterns.
    CapacityModel capacity;
    capacity.setSnapshot(s, T0);
    const QString tip = capacity.row(QStringLiteral("api"))->tooltip;
    QVERIFY2(tip.contains(QStringLiteral("class opus (claude-opus-4*, claude-opus-5*): ")), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("model claude-haiku: ")), qPrintable(tip));
}

void TestDashboardLimits::editingInputTokensKeepsEverythingElse()
{
    const ProviderLimits before = richLimits();
    makeHome(before);
    START_CONTROLLER(c);
    LimitsModel* model = c->limits();
    QSignalSpy actions(c.get(), &DashboardController::actionFinished);
    const int row = model->rowOf(QStringLiteral("api"));
    QVERIFY(model->setData(model->index(row, LimitsModel::InputTokens), QStringLiteral("36000")));
    QVERIFY(actions.wait(TIMEOUT_MS));
    const ActionResult r = actions.takeFirst().at(0).value<ActionResult>();
    QVERIFY2(r.ok, qPrintable(r.message));
    QVERIFY2(
        r.message.contains(QStringLiteral("input tokens per window 30000 → 36000")), qPrintable(r.message));
    ProviderLimits expected = before;
    expected.inputTokens = 36000;
    QCOMPARE(written(), expected); // every other field, class and pattern exactly as it was
    QTRY_COMPARE_WITH_TIMEOUT(
        model->index(row, LimitsModel::InputTokens).data().toString(), QStringLiteral("36000"), TIMEOUT_MS);

    // Emptying a cell removes that limit (and asks first: a limit removed).
    QSignalSpy confirm(c.get(), &DashboardController::limitChangeNeedsConfirmation);
    QVERIFY(model->setData(model->index(row, LimitsModel::OutputTokens), QString()));
    QCOMPARE(confirm.size(), 1); // asked at once, on the GUI thread
    const auto change = confirm.takeFirst().at(0).value<LimitChange>();
    expected.outputTokens.reset();
    QCOMPARE(change.after, expected);
    c->applyLimitChange(change);
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(actions.takeFirst().at(0).value<ActionResult>().ok);
    QCOMPARE(written(), expected);
}

void TestDashboardLimits::editingAPerDayLimitAndTheDayReset()
{
    const ProviderLimits before = richLimits();
    makeHome(before);
    START_CONTROLLER(c);
    LimitsModel* model = c->limits();
    QSignalSpy actions(c.get(), &DashboardController::actionFinished);
    const int row = model->rowOf(QStringLiteral("api"));
    ProviderLimits expected = before;

    // A per-day limit set where there was none.
    QVERIFY(model->setData(model->index(row, LimitsModel::InputTokensPerDay), QStringLiteral("1500000")));
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(actions.takeFirst().at(0).value<ActionResult>().ok);
    expected.perDay.inputTokens = 1500000;
    QCOMPARE(written(), expected);
    QTRY_COMPARE_WITH_TIMEOUT(model->index(row, LimitsModel::InputTokensPerDay).data().toString(),
        QStringLiteral("1500000"), TIMEOUT_MS);

    // A per-day limit changed.
    QVERIFY(model->setData(model->index(row, LimitsModel::RequestsPerDay), QStringLiteral("6000")));
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(actions.takeFirst().at(0).value<ActionResult>().ok);
    expected.perDay.requests = 6000;
    QCOMPARE(written(), expected);
    QTRY_COMPARE_WITH_TIMEOUT(
        model->index(row, LimitsModel::RequestsPerDay).data().toString(), QStringLiteral("6000"), TIMEOUT_MS);

    // The day reset: a calendar day in another zone, then rolling.
    QVERIFY(model->setData(
        model->index(row, LimitsModel::DayResets), QStringLiteral("00:00@America/Los_Angeles")));
    QVERIFY(actions.wait(TIMEOUT_MS));
    const ActionResult r = actions.takeFirst().at(0).value<ActionResult>();
    QVERIFY2(r.ok, qPrintable(r.message));
    QVERIFY2(r.message.contains(QStringLiteral("day resets 07:30@Europe/Paris → 00:00@America/Los_Angeles")),
        qPrintable(r.message));
    expected.dayReset = *DayReset::parse("00:00@America/Los_Angeles");
    QCOMPARE(written(), expected);
    {
        QFile f(m_home + QStringLiteral("/limits.json"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(f.readAll().contains("\"00:00@America/Los_Angeles\""));
    }
    QTRY_COMPARE_WITH_TIMEOUT(model->index(row, LimitsModel::DayResets).data().toString(),
        QStringLiteral("00:00@America/Los_Angeles"), TIMEOUT_MS);
    QVERIFY(model->setData(model->index(row, LimitsModel::DayResets), QStringLiteral("rolling")));
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(actions.takeFirst().at(0).value<ActionResult>().ok);
    expected.dayReset = DayReset();
    QCOMPARE(written(), expected);
}

void TestDashboardLimits::editingAClassAndItsPatterns()
{
    const ProviderLimits before = richLimits();
    makeHome(before);
    START_CONTROLLER(c);
    LimitsModel* model = c->limits();
    QSignalSpy actions(c.get(), &DashboardController::actionFinished);
    const int opus = model->rowOf(QStringLiteral("api/opus"));
    ProviderLimits expected = before;

    QVERIFY(model->setData(model->index(opus, LimitsModel::OutputTokens), QStringLiteral("4000")));
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(actions.takeFirst().at(0).value<ActionResult>().ok);
    expected.models["opus"].outputTokens = 4000;
    QCOMPARE(written(), expected);

    QTRY_COMPARE_WITH_TIMEOUT(
        model->index(opus, LimitsModel::OutputTokens).data().toString(), QStringLiteral("4000"), TIMEOUT_MS);
    QVERIFY(model->setData(
        model->index(opus, LimitsModel::Models), QStringLiteral(" claude-opus-4* ,claude-opus-6*")));
    QVERIFY(actions.wait(TIMEOUT_MS));
    const ActionResult r = actions.takeFirst().at(0).value<ActionResult>();
    QVERIFY2(r.ok, qPrintable(r.message));
    expected.models["opus"].match = { "claude-opus-4*", "claude-opus-6*" };
    QCOMPARE(written(), expected);
    QTRY_COMPARE_WITH_TIMEOUT(model->index(opus, LimitsModel::Models).data().toString(),
        QStringLiteral("claude-opus-4*, claude-opus-6*"), TIMEOUT_MS);
}

void TestDashboardLimits::invalidValuesAreRefusedWithTheCoresWords()
{
    makeHome(richLimits());
    ProviderLimits onlyOne; // a provider and a class with one limit each
    onlyOne.requests = 5;
    onlyOne.models["x"] = ModelLimits { 3, std::nullopt, 60000 };
    QVERIFY(m_limiter->setLimits("solo", onlyOne, "test"));
    const QByteArray digest = limitsDigest();
    START_CONTROLLER(c);
    LimitsModel* model = c->limits();
    QSignalSpy actions(c.get(), &DashboardController::actionFinished);
    QSignalSpy refused(model, &LimitsModel::editRefused);
    const int row = model->rowOf(QStringLiteral("api"));
    const int opus = model->rowOf(QStringLiteral("api/opus"));
    auto lastRefusal = [&] { return refused.isEmpty() ? QString() : refused.last().at(1).toString(); };
    auto coreSays = [](const Result<std::int64_t>& r) { return QString::fromStdString(r.error().message); };

    // A count out of range or fractional: QuotaLimits::check's words, named as the CLI names it.
    QVERIFY(!model->setData(model->index(row, LimitsModel::InputTokens), QStringLiteral("1.5")));
    QCOMPARE(lastRefusal(),
        QStringLiteral("api: ")
            + coreSays(QuotaLimits::check(LimitField::InputTokens, 1.5, "--input-tokens")));
    QVERIFY(lastRefusal().contains(QStringLiteral("--input-tokens must be a whole number between 1 and")));
    QVERIFY(!model->setData(model->index(row, LimitsModel::OutputTokensPerDay), QStringLiteral("0")));
    QCOMPARE(lastRefusal(),
        QStringLiteral("api: ")
            + coreSays(QuotaLimits::check(LimitField::OutputTokens, 0, "--output-tokens-per-day")));
    QVERIFY(!model->setData(model->index(opus, LimitsModel::Window), QStringLiteral("604801")));
    QCOMPARE(lastRefusal(),
        QStringLiteral("api: ")
            + coreSays(QuotaLimits::check(LimitField::WindowSeconds, 604801, "--window")));
    QVERIFY(!model->setData(model->index(row, LimitsModel::Headroom), QStringLiteral("101")));
    QCOMPARE(lastRefusal(),
        QStringLiteral("api: ")
            + coreSays(QuotaLimits::check(LimitField::HeadroomPercent, 101, "--headroom")));
    QVERIFY(!model->setData(model->index(row, LimitsModel::Requests), QStringLiteral("many")));
    QVERIFY(lastRefusal().contains(QStringLiteral("--requests must be a whole number")));

    // A day reset: DayReset::parse's words, as `--day-resets` gives them.
    for (const char* bad : { "25:00", "00:00@Mars/Olympus_Mons" }) {
        QVERIFY(!model->setData(model->index(row, LimitsModel::DayResets), QString::fromLatin1(bad)));
        QCOMPARE(lastRefusal(),
            QStringLiteral("api: --day-resets: ")
                + QString::fromStdString(DayReset::parse(bad).error().message));
    }

    // A whole the core refuses (QuotaLimits::validate): a day below its window, a bad pattern.
    ProviderLimits swapped = richLimits();
    swapped.perDay.requests = 20; // below the 50 per window
    QVERIFY(!QuotaLimits::validate("api", swapped));
    QVERIFY(!model->setData(model->index(row, LimitsModel::RequestsPerDay), QStringLiteral("20")));
    QCOMPARE(lastRefusal(), QString::fromStdString(QuotaLimits::validate("api", swapped).error().message));
    ProviderLimits badPattern = richLimits();
    badPattern.models["opus"].match = { "claude-opus-4*", "" };
    QVERIFY(!model->setData(model->index(opus, LimitsModel::Models), QStringLiteral("claude-opus-4*,")));
    QCOMPARE(lastRefusal(), QString::fromStdString(QuotaLimits::validate("api", badPattern).error().message));

    // A class or provider left with no limit at all (as `limits set` refuses).
    QVERIFY(model->rowOf(QStringLiteral("solo/x")) >= 0);
    QVERIFY(!model->setData(
        model->index(model->rowOf(QStringLiteral("solo/x")), LimitsModel::Requests), QString()));
    QVERIFY2(lastRefusal().contains(QStringLiteral("no limit left")), qPrintable(lastRefusal()));
    QVERIFY(!model->setData(
        model->index(model->rowOf(QStringLiteral("solo")), LimitsModel::Requests), QString()));
    QVERIFY2(lastRefusal().contains(QStringLiteral("at least one of --requests")), qPrintable(lastRefusal()));

    // Nothing reached the worker; limits.json is byte for byte as it was.
    QTest::qWait(200);
    QVERIFY(actions.isEmpty());
    QCOMPARE(written(), richLimits());
    QCOMPARE(limitsDigest(), digest);
}

void TestDashboardLimits::backoffAndMaxHoldAreEditedAsTheCliSetsThem()
{
    const ProviderLimits before = richLimits();
    makeHome(before);
    START_CONTROLLER(c);
    LimitsModel* model = c->limits();
    QSignalSpy actions(c.get(), &DashboardController::actionFinished);
    QSignalSpy refused(model, &LimitsModel::editRefused);
    const int row = model->rowOf(QStringLiteral("api"));
    const int opus = model->rowOf(QStringLiteral("api/opus"));
    QCOMPARE(model->index(row, LimitsModel::BackoffBase).data().toString(), QStringLiteral("30 s"));
    QCOMPARE(model->index(row, LimitsModel::BackoffCap).data().toString(), QStringLiteral("600 s"));
    QCOMPARE(model->index(row, LimitsModel::MaxHold).data().toString(), QStringLiteral("120 s"));
    // A class has the provider's: shown so, not editable on its row.
    for (int column : { LimitsModel::BackoffBase, LimitsModel::BackoffCap, LimitsModel::MaxHold })
        QVERIFY(!(model->flags(model->index(opus, column)) & Qt::ItemIsEditable));

    ProviderLimits expected = before;
    // (Within half of the old values: a bigger change asks first, as any limit change does.)
    QVERIFY(model->setData(model->index(row, LimitsModel::BackoffBase), QStringLiteral("40.5")));
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(actions.takeFirst().at(0).value<ActionResult>().ok);
    expected.backoffBaseMs = 40500;
    QCOMPARE(written(), expected);
    QTRY_COMPARE_WITH_TIMEOUT(
        model->index(row, LimitsModel::BackoffBase).data().toString(), QStringLiteral("40.5 s"), TIMEOUT_MS);
    QVERIFY(model->setData(
        model->index(row, LimitsModel::MaxHold), QStringLiteral("150 s"))); // as the cell reads
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(actions.takeFirst().at(0).value<ActionResult>().ok);
    expected.maxHoldMs = 150000;
    QCOMPARE(written(), expected);

    // Out of range: the core's words under the CLI's option name; a base above the cap: validate's.
    auto lastRefusal = [&] { return refused.isEmpty() ? QString() : refused.last().at(1).toString(); };
    QVERIFY(!model->setData(model->index(row, LimitsModel::BackoffCap), QStringLiteral("0")));
    QCOMPARE(lastRefusal(),
        QStringLiteral("api: ")
            + QString::fromStdString(
                QuotaLimits::check(LimitField::BackoffCapSeconds, 0, "--backoff-cap").error().message));
    QVERIFY(!model->setData(model->index(row, LimitsModel::MaxHold), QStringLiteral("soon")));
    QVERIFY2(lastRefusal().contains(QStringLiteral("--max-hold must be a number of seconds")),
        qPrintable(lastRefusal()));
    ProviderLimits above = expected;
    above.backoffBaseMs = 1000 * 1000;
    QVERIFY(!QuotaLimits::validate("api", above));
    QVERIFY(!model->setData(model->index(row, LimitsModel::BackoffBase), QStringLiteral("1000")));
    QCOMPARE(lastRefusal(), QString::fromStdString(QuotaLimits::validate("api", above).error().message));
    QCOMPARE(written(), expected);
}

void TestDashboardLimits::addAndRemoveAClassFromTheWindow()
{
    const ProviderLimits before = richLimits();
    makeHome(before);
    MainWindow w(DashboardOptions { m_home, {}, m_dir->path() + QStringLiteral("/dashboard.ini") });
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS);
    LimitsModel* model = w.controller()->limits();
    QTRY_COMPARE_WITH_TIMEOUT(model->rowCount(), 3, TIMEOUT_MS);
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);

    // The limits tab and its menu.
    auto* tabs = w.findChild<QTabWidget*>(QStringLiteral("providersTabs"));
    QVERIFY(tabs);
    auto* view = w.findChild<KeyedTableView*>(QStringLiteral("limitsView"));
    QVERIFY(view);
    auto menu = w.limitsMenu(QStringLiteral("api/opus"));
    QVERIFY(menu->findChild<QAction*>(QStringLiteral("actionAddClass")));
    QVERIFY(menu->findChild<QAction*>(QStringLiteral("actionRemoveClass")));
    QVERIFY(!w.limitsMenu(QStringLiteral("api"))->findChild<QAction*>(QStringLiteral("actionRemoveClass")));

    // Add: the prompt's answer, checked as the cells are.
    w.setClassPromptHandler([](const QString& provider) -> std::optional<LimitsModel::NewClass> {
        if (provider != QLatin1String("api"))
            return std::nullopt;
        LimitsModel::NewClass n;
        n.name = QStringLiteral("sonnet");
        n.patterns = QStringLiteral("claude-sonnet-4*");
        n.values.insert(LimitsModel::Requests, QStringLiteral("20"));
        n.values.insert(LimitsModel::OutputTokensPerDay, QStringLiteral("100000"));
        n.values.insert(LimitsModel::Window, QString()); // the provider's
        return n;
    });
    w.addClassTo(QStringLiteral("api"));
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(actions.takeFirst().at(0).value<ActionResult>().ok);
    ProviderLimits expected = before;
    ModelLimits sonnet { 20, std::nullopt, before.windowMs };
    sonnet.perDay.outputTokens = 100000;
    sonnet.match = { "claude-sonnet-4*" };
    expected.models["sonnet"] = sonnet;
    QCOMPARE(written(), expected);
    QCOMPARE(tabs->currentWidget(), static_cast<QWidget*>(view));
    QTRY_VERIFY_WITH_TIMEOUT(model->rowOf(QStringLiteral("api/sonnet")) >= 0, TIMEOUT_MS);

    // A prompt answer the core refuses: the window says why, nothing is written.
    w.setClassPromptHandler([](const QString&) -> std::optional<LimitsModel::NewClass> {
        LimitsModel::NewClass n;
        n.name = QStringLiteral("bad name");
        n.values.insert(LimitsModel::Requests, QStringLiteral("5"));
        return n;
    });
    QSignalSpy refused(model, &LimitsModel::editRefused);
    w.addClassTo(QStringLiteral("api"));
    QCOMPARE(refused.size(), 1);
    QVERIFY(refused.first().at(1).toString().contains(QStringLiteral("may only hold")));

    // Remove: asks first (its limits go with it); No keeps it, Yes removes it.
    QStringList asked;
    bool answer = false;
    w.setConfirmHandler([&](const QString&, const QString& text) {
        asked.append(text);
        return answer;
    });
    w.removeClass(QStringLiteral("api"), QStringLiteral("opus"));
    QTRY_COMPARE_WITH_TIMEOUT(asked.size(), 1, TIMEOUT_MS);
    QVERIFY2(asked.first().contains(QStringLiteral("class opus removed")), qPrintable(asked.first()));
    QTest::qWait(200);
    QCOMPARE(written(), expected);
    answer = true;
    w.removeClass(QStringLiteral("api"), QStringLiteral("opus"));
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(actions.takeFirst().at(0).value<ActionResult>().ok);
    expected.models.erase("opus");
    QCOMPARE(written(), expected);
    QTRY_COMPARE_WITH_TIMEOUT(model->rowOf(QStringLiteral("api/opus")), -1, TIMEOUT_MS);
}

QTEST_MAIN(TestDashboardLimits)
#include "tst_dashboardlimits.moc"
