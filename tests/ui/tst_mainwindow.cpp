// The dashboard window under QT_QPA_PLATFORM=offscreen: empty (missing home, then appearing),
// live, and corrupt states; actions triggered from the window; storm alerts as a banner when
// there is no tray; settings that persist.

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "capacitymodel.h"
#include "dashboardcontroller.h"
#include "eventsmodel.h"
#include "holdersmodel.h"
#include "mainwindow.h"
#include "providersmodel.h"
#include "ratelimitchart.h"
#include "store/filequotastore.h"
#include "traycontroller.h"
#include "usagechart.h"

#include <QAction>
#include <QApplication>
#include <QCryptographicHash>
#include <QFile>
#include <QFrame>
#include <QLabel>
#include <QSignalSpy>
#include <QStackedWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

using namespace tollgate;
using namespace tollgate::ui;

class TestMainWindow final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void emptyStateOnMissingHome();
    void liveState();
    void corruptStateShowsBanner();
    void corruptLimitsSayEveryCommandRefuses();
    void windowActionsReachCore();
    void f2EditsTheSelectedCellOnly();
    void theUsageChartNeverSumsProvidersLimits();
    void anErrorLooksLikeOneAndGoesWhenItsCauseDoes();
    void helpListsEveryShortcut();
    void stormShowsOneBannerWithoutTray();
    void settingsPersist();

private:
    void makeHome();
    [[nodiscard]] DashboardOptions options() const;

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
    SystemClock m_clock;
    ProcessProbe m_probe;
    std::unique_ptr<FileQuotaStore> m_store;
    std::unique_ptr<QuotaLimiter> m_limiter;
};

namespace {

constexpr int TIMEOUT_MS = 10000;

bool hasDarkPixels(const QImage& img)
{
    for (int y = 0; y < img.height(); y += 2) {
        for (int x = 0; x < img.width(); x += 2) {
            if (qGray(img.pixel(x, y)) < 100)
                return true;
        }
    }
    return false;
}

} // namespace

#define OPEN_WINDOW(w)                                                                                       \
    MainWindow w(options());                                                                                 \
    w.show();                                                                                                \
    QVERIFY(QTest::qWaitForWindowExposed(&w));                                                               \
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS)

void TestMainWindow::init()
{
    m_limiter.reset();
    m_store.reset();
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->path() + QStringLiteral("/home");
}

DashboardOptions TestMainWindow::options() const
{
    return DashboardOptions { m_home, {}, m_dir->path() + QStringLiteral("/dashboard.ini") };
}

void TestMainWindow::makeHome()
{
    auto store = FileQuotaStore::open(m_home.toStdString(), m_clock);
    QVERIFY(store);
    m_store = std::move(store).value();
    m_limiter = std::make_unique<QuotaLimiter>(*m_store, m_clock, m_probe);
    ProviderLimits l;
    l.requests = 60;
    l.parallel = 2;
    QVERIFY(m_limiter->setLimits("api", l, "test"));
}

void TestMainWindow::emptyStateOnMissingHome()
{
    OPEN_WINDOW(w);
    auto* empty = w.findChild<QLabel*>(QStringLiteral("emptyState"));
    auto* stack = w.findChild<QStackedWidget*>();
    QVERIFY(empty && stack);
    QVERIFY(stack->currentWidget()->isAncestorOf(empty));
    QVERIFY(empty->text().contains(QStringLiteral("No callers yet")));
    QVERIFY(empty->text().contains(m_home));
    QVERIFY(empty->text().contains(QStringLiteral("tollgate demo")));
    QVERIFY(!QFileInfo::exists(m_home));
    QVERIFY(hasDarkPixels(w.grab().toImage()));

    // The home appears later (a first caller): the window switches to the live view.
    makeHome();
    QTRY_VERIFY_WITH_TIMEOUT(!stack->currentWidget()->isAncestorOf(empty), TIMEOUT_MS);
}

void TestMainWindow::liveState()
{
    makeHome();
    for (const char* caller : { "indexer", "indexer", "indexer", "chat" }) {
        AdmitRequest r;
        r.provider = "api";
        r.caller = caller;
        r.tokens = 100;
        QVERIFY(m_limiter->acquire(r, m_clock.now()));
    }
    QVERIFY(m_limiter->report429("api", "indexer", std::nullopt));
    OPEN_WINDOW(w);
    auto* stack = w.findChild<QStackedWidget*>();
    QCOMPARE(stack->currentWidget()->objectName(), QStringLiteral("dashboardPage"));
    auto* providers = w.findChild<QTableView*>(QStringLiteral("providersView"));
    QVERIFY(providers);
    QTRY_COMPARE_WITH_TIMEOUT(providers->model()->rowCount(), 1, TIMEOUT_MS);
    QCOMPARE(providers->model()->index(0, ProvidersModel::RequestsUsed).data().toString(),
        QStringLiteral("4 / 60 (7%)"));
    auto* callers = w.findChild<QTableView*>(QStringLiteral("callersView"));
    QTRY_COMPARE_WITH_TIMEOUT(callers->model()->rowCount(), 2, TIMEOUT_MS);
    QCOMPARE(callers->model()->index(0, 0).data().toString(), QStringLiteral("indexer")); // the biggest first
    auto* usage = w.findChild<UsageChart*>(QStringLiteral("usageChart"));
    QTRY_COMPARE_WITH_TIMEOUT(
        usage->bandNames(), QStringList({ QStringLiteral("indexer"), QStringLiteral("chat") }), TIMEOUT_MS);
    auto* rate = w.findChild<RateLimitChart*>(QStringLiteral("rateLimitChart"));
    QCOMPARE(rate->totalShown(), 1);
    QVERIFY(rate->markersShown() >= 1); // the limits change
    auto* events = w.findChild<QTableView*>(QStringLiteral("eventsView"));
    QTRY_VERIFY_WITH_TIMEOUT(events->model()->rowCount() >= 6, TIMEOUT_MS);
    QVERIFY(!w.findChild<QLabel*>(QStringLiteral("corruptBanner"))->isVisible());
    const QImage img = w.grab().toImage();
    QVERIFY(img.width() >= 600 && img.height() >= 400);
    QVERIFY(hasDarkPixels(img));

    // Live: another process's change reaches the window.
    QVERIFY(m_limiter->pause("api", "from elsewhere", "test"));
    QTRY_VERIFY_WITH_TIMEOUT(providers->model()
                                 ->index(0, ProvidersModel::Paused)
                                 .data()
                                 .toString()
                                 .contains(QStringLiteral("from elsewhere")),
        TIMEOUT_MS);
}

void TestMainWindow::corruptStateShowsBanner()
{
    makeHome();
    QVERIFY(m_limiter->pause("api", "", "test"));
    m_limiter.reset();
    m_store.reset();
    const QString state = m_home + QStringLiteral("/state.bin");
    {
        QFile f(state);
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(QByteArray(3000, '\x7f'));
    }
    OPEN_WINDOW(w);
    auto* banner = w.findChild<QLabel*>(QStringLiteral("corruptBanner"));
    QVERIFY(banner);
    QTRY_VERIFY_WITH_TIMEOUT(banner->isVisible(), TIMEOUT_MS);
    QVERIFY(banner->text().contains(state));
    QVERIFY(hasDarkPixels(w.grab().toImage()));
    QFile f(state);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), QByteArray(3000, '\x7f'));
    QCOMPARE(QDir(m_home).entryList({ QStringLiteral("state.bin.corrupt-*") }).size(), 0);
    QVERIFY(banner->text().contains(QStringLiteral("moves a corrupt state aside")));
}

// Corrupt limits are never moved aside: the banner said the next command would (it refuses).
void TestMainWindow::corruptLimitsSayEveryCommandRefuses()
{
    makeHome();
    AdmitRequest call;
    call.provider = "api";
    call.caller = "indexer";
    QVERIFY(m_limiter->acquire(call, m_clock.now()));
    m_limiter.reset();
    m_store.reset();
    const QString limits = m_home + QStringLiteral("/limits.json");
    {
        QFile f(limits);
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write("{\"providers\": {\"api\": {\"requests\": ");
    }
    OPEN_WINDOW(w);
    auto* banner = w.findChild<QLabel*>(QStringLiteral("corruptBanner"));
    QVERIFY(banner);
    QTRY_VERIFY_WITH_TIMEOUT(banner->isVisible(), TIMEOUT_MS);
    QVERIFY(banner->text().contains(limits));
    QVERIFY2(banner->text().contains(QStringLiteral("refuses")), qPrintable(banner->text()));
    QVERIFY(!banner->text().contains(QStringLiteral("moves a corrupt state aside")));
    // The provider's tile agrees: not "no limit, next call: now" in green.
    QTRY_VERIFY_WITH_TIMEOUT(w.capacity()->row(QStringLiteral("api")), TIMEOUT_MS);
    QCOMPARE(w.capacity()->row(QStringLiteral("api"))->level, CapacityModel::Level::Blocked);
    QCOMPARE(w.capacity()->row(QStringLiteral("api"))->headline, QStringLiteral("LIMITS CORRUPT"));
}

// Issue 28, item 1: F2 edited the requests limit whichever cell was selected (a user fixing
// tokens set requests). It edits the selected cell; on a cell that is no limit it says so.
void TestMainWindow::f2EditsTheSelectedCellOnly()
{
    makeHome();
    OPEN_WINDOW(w);
    auto* view = w.findChild<QTableView*>(QStringLiteral("providersView"));
    QVERIFY(view);
    QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 1, TIMEOUT_MS);
    auto* f2 = w.findChild<QAction*>(QStringLiteral("actionEditLimit"));
    QVERIFY(f2);
    QCOMPARE(f2->shortcut(), QKeySequence(Qt::Key_F2));
    // The editor that opened, and the cell it edits.
    auto editorColumn = [&]() -> int {
        QWidget* focus = QApplication::focusWidget();
        if (!focus || !view->viewport()->isAncestorOf(focus))
            return -1;
        return view->indexAt(focus->geometry().center()).column();
    };
    view->setCurrentIndex(view->model()->index(0, ProvidersModel::TokenLimit));
    f2->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(editorColumn(), static_cast<int>(ProvidersModel::TokenLimit), TIMEOUT_MS);
    QCOMPARE(view->currentIndex().column(), static_cast<int>(ProvidersModel::TokenLimit));
    QTest::keyClick(QApplication::focusWidget(), Qt::Key_Escape); // nothing changed

    // A cell that is no limit (requests used): no editor, and the window says what to do.
    view->setFocus();
    view->setCurrentIndex(view->model()->index(0, ProvidersModel::RequestsUsed));
    f2->trigger();
    QCOMPARE(editorColumn(), -1);
    auto* banner = w.findChild<QLabel*>(QStringLiteral("messageBannerText"));
    QVERIFY(banner);
    QVERIFY2(banner->text().contains(QStringLiteral("Select the limit to edit")), qPrintable(banner->text()));
    QCOMPARE(m_limiter->limits()->find("api")->tokens, std::optional<std::int64_t> {});
}

// Issue 28, item 2: the per-caller chart stacks every provider's callers, and its limit line
// was the sum of their limits: "70 per 30 s" for 40/min and 100/min, a limit that exists
// nowhere. One provider: its limit; two: no line.
void TestMainWindow::theUsageChartNeverSumsProvidersLimits()
{
    makeHome(); // api: 60 requests a minute
    OPEN_WINDOW(w);
    auto* usage = w.findChild<UsageChart*>(QStringLiteral("usageChart"));
    QVERIFY(usage);
    QTRY_VERIFY_WITH_TIMEOUT(usage->limitLineValue() > 0, TIMEOUT_MS);
    ProviderLimits other;
    other.requests = 100;
    QVERIFY(m_limiter->setLimits("other", other, "test"));
    QTRY_COMPARE_WITH_TIMEOUT(
        w.controller()->snapshot().limits.providers().size(), std::size_t(2), TIMEOUT_MS);
    QTRY_COMPARE_WITH_TIMEOUT(usage->limitLineValue(), 0.0, TIMEOUT_MS);
}

// Issue 28, item 5: "there is no Tollgate home … yet" stayed on top of the live data after the
// home appeared, in the pale blue of a success. It is shown as an error, and goes when the
// home appears.
void TestMainWindow::anErrorLooksLikeOneAndGoesWhenItsCauseDoes()
{
    OPEN_WINDOW(w);
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);
    w.findChild<QAction*>(QStringLiteral("actionPauseAll"))->trigger();
    QVERIFY(actions.wait(TIMEOUT_MS));
    auto* banner = w.findChild<QFrame*>(QStringLiteral("messageBanner"));
    QVERIFY(banner);
    QTRY_VERIFY_WITH_TIMEOUT(banner->isVisible(), TIMEOUT_MS);
    const QString text = w.findChild<QLabel*>(QStringLiteral("messageBannerText"))->text();
    QVERIFY2(text.contains(QStringLiteral("no Tollgate home")), qPrintable(text));
    QVERIFY(banner->property("error").toBool());
    QVERIFY2(banner->styleSheet().contains(QStringLiteral("#fde2e1")), qPrintable(banner->styleSheet()));

    makeHome(); // a first caller
    QTRY_VERIFY_WITH_TIMEOUT(!banner->isVisible(), TIMEOUT_MS);
}

// Issue 28, item 10: no Help menu, no list of shortcuts. Help → Keyboard shortcuts (F1) lists
// every action that has one, from the actions themselves.
void TestMainWindow::helpListsEveryShortcut()
{
    OPEN_WINDOW(w);
    auto* help = w.findChild<QAction*>(QStringLiteral("actionShortcuts"));
    QVERIFY(help);
    QCOMPARE(help->shortcut(), QKeySequence(Qt::Key_F1));
    const QString text = w.shortcutsText();
    for (const QString& line : { QStringLiteral("F2\tEdit limit"), QStringLiteral("F5\tRefresh"),
             QStringLiteral("F1\tKeyboard shortcuts"), QStringLiteral("Ctrl+Shift+K\tClean stale"),
             QStringLiteral("Alt+O\tChoose the provider shown"),
             QStringLiteral("+ / -\tZoom the focused chart") })
        QVERIFY2(text.contains(line), qPrintable(text));
}

void TestMainWindow::windowActionsReachCore()
{
    makeHome();
    OPEN_WINDOW(w);
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);
    w.findChild<QAction*>(QStringLiteral("actionPauseAll"))->trigger();
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(m_limiter->snapshot()->state.pausedAll);
    w.findChild<QAction*>(QStringLiteral("actionResumeAll"))->trigger();
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(!m_limiter->snapshot()->state.pausedAll);

    // Pause one provider with a reason, through the prompt.
    w.setPauseHandler(
        [](const QStringList& providers, const QString&) -> std::optional<MainWindow::PauseChoice> {
            return MainWindow::PauseChoice { providers.value(0), QStringLiteral("quota review") };
        });
    w.findChild<QAction*>(QStringLiteral("actionPause"))->trigger();
    QVERIFY(actions.wait(TIMEOUT_MS));
    QCOMPARE(m_limiter->snapshot()->state.provider("api")->pauseReason, std::string("quota review"));

    // Reset backoff asks first; refusing does nothing.
    QVERIFY(m_limiter->report429("api", "x", std::nullopt));
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->providers()->inBackoff(QStringLiteral("api")), TIMEOUT_MS);
    w.selectProvider(QStringLiteral("api"));
    QStringList asked;
    w.setConfirmHandler([&asked](const QString&, const QString& text) {
        asked.append(text);
        return false;
    });
    actions.clear();
    w.findChild<QAction*>(QStringLiteral("actionResetBackoff"))->trigger();
    QCOMPARE(asked.size(), 1);
    QVERIFY(asked.first().contains(QStringLiteral("api")));
    QVERIFY(m_limiter->snapshot()->state.provider("api")->backoffUntilMs > 0);
    w.setConfirmHandler([](const QString&, const QString&) { return true; });
    w.findChild<QAction*>(QStringLiteral("actionResetBackoff"))->trigger();
    QVERIFY(actions.wait(TIMEOUT_MS));
    QCOMPARE(m_limiter->snapshot()->state.provider("api")->backoffUntilMs, std::int64_t(0));

    // Force-release of a live holder names the pid and command line before doing it.
    AdmitRequest r;
    r.provider = "api";
    r.caller = "me";
    r.wantsSlot = true;
    r.pid = ProcessProbe::selfPid();
    QVERIFY(m_limiter->resume("api", "test"));
    auto permit = m_limiter->acquire(r, m_clock.now());
    QVERIFY(permit);
    permit->detach();
    const QString key = QStringLiteral("slot:api:%1").arg(permit->fence());
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->holders()->rowCount() == 1, TIMEOUT_MS);
    w.selectHolder(key);
    asked.clear();
    w.setConfirmHandler([&asked](const QString&, const QString& text) {
        asked.append(text);
        return true;
    });
    actions.clear();
    w.findChild<QAction*>(QStringLiteral("actionRelease"))->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(m_limiter->snapshot()->state.provider("api")->slots.empty(), TIMEOUT_MS);
    QCOMPARE(asked.size(), 1);
    QVERIFY(asked.first().contains(QString::number(ProcessProbe::selfPid())));
    QVERIFY(asked.first().contains(QStringLiteral("tst_mainwindow")));

    // An invalid limit edit shows why, in the window.
    auto* model = w.controller()->providers();
    QVERIFY(!model->setData(model->index(0, ProvidersModel::Window), QStringLiteral("-1")));
    auto* message = w.findChild<QFrame*>(QStringLiteral("messageBanner"));
    QVERIFY(message->isVisible());
    // In the core's words (the same as the CLI's and limits.json's).
    const QString banner = w.findChild<QLabel*>(QStringLiteral("messageBannerText"))->text();
    QVERIFY2(banner.contains(QString::fromStdString(
                 QuotaLimits::check(LimitField::WindowSeconds, -1, "window").error().message)),
        qPrintable(banner));
}

void TestMainWindow::stormShowsOneBannerWithoutTray()
{
    makeHome();
    OPEN_WINDOW(w);
    QVERIFY(!w.tray()->available()); // offscreen has no tray
    auto* banner = w.findChild<QFrame*>(QStringLiteral("alertBanner"));
    auto* text = w.findChild<QLabel*>(QStringLiteral("alertBannerText"));
    QVERIFY(banner && text && !banner->isVisible());
    QSignalSpy storms(w.controller(), &DashboardController::stormStarted);
    for (const char* caller : { "indexer", "chat", "indexer" })
        QVERIFY(m_limiter->report429("api", caller, std::nullopt));
    QTRY_VERIFY_WITH_TIMEOUT(banner->isVisible(), TIMEOUT_MS);
    QVERIFY(text->text().contains(QStringLiteral("api")));
    QVERIFY(
        text->text().contains(QStringLiteral("indexer")) && text->text().contains(QStringLiteral("chat")));
    for (int i = 0; i < 4; ++i)
        QVERIFY(m_limiter->report429("api", "more", std::nullopt));
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->events()->rowCount() >= 8, TIMEOUT_MS);
    QCOMPARE(storms.count(), 1);
    QCOMPARE(w.controller()->trayState(), TrayState::Storm);
}

void TestMainWindow::settingsPersist()
{
    QSize saved;
    {
        DashboardSettings s(options().settingsPath);
        s.setStorm(5, 30);
        s.setLockDirs({ m_dir->path() });
        s.sync();
    }
    {
        OPEN_WINDOW(w);
        QCOMPARE(w.controller()->storms().threshold(), 5);
        QCOMPARE(w.controller()->storms().windowMs(), qint64(30000));
        QCOMPARE(w.controller()->lockDirs(), QStringList({ m_dir->path() }));
        // A size that fits the offscreen screen (800×600): a larger one is clamped onto it.
        w.resize(711, 477);
        saved = w.size();
    }
    DashboardSettings s(options().settingsPath);
    QVERIFY(!s.geometry().isEmpty());
    MainWindow again(options());
    QCOMPARE(again.size(), saved);
    // Lock directories from the command line win, and are remembered.
    DashboardOptions o = options();
    o.lockDirs = { QStringLiteral("/tmp") };
    MainWindow third(o);
    QCOMPARE(third.controller()->lockDirs(), QStringList({ QStringLiteral("/tmp") }));
    QCOMPARE(DashboardSettings(o.settingsPath).lockDirs(), QStringList({ QStringLiteral("/tmp") }));
}

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
