// Pausing in the window makes a separate process's `tollgate acquire` wait; resuming in the
// window lets it through. The waiter is the real CLI binary; that it waits is observed in
// the shared state (it is queued, waiting because of the pause), not by timing. On a
// directory home and on a Redis home (where the window hears of the waiter through pub/sub,
// and the waiter of the resume through its ring subscription).

#include "backend/quotalimiter.h"
#include "backend/storefactory.h"
#include "base/systemclock.h"
#include "dashboardcontroller.h"
#include "helpers/redisserver.h"
#include "mainwindow.h"

#include <QAction>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using namespace tollgate;
using namespace tollgate::ui;

class TestPauseCrossProcess final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void pauseInWindowMakesCliWait_data();
    void pauseInWindowMakesCliWait();

private:
    std::unique_ptr<RedisServer> m_redis; // when scripts/test.sh shares none
};

namespace {

constexpr int TIMEOUT_MS = 15000;

bool waiterQueued(QuotaLimiter& limiter, qint64 pid, WaitReason reason)
{
    auto s = limiter.snapshot();
    if (!s)
        return false;
    const ProviderState* p = s->state.provider("api");
    if (!p)
        return false;
    return std::any_of(p->queue.begin(), p->queue.end(),
        [&](const Waiter& w) { return w.pid == pid && w.reason == reason; });
}

} // namespace

void TestPauseCrossProcess::pauseInWindowMakesCliWait_data()
{
    QTest::addColumn<bool>("redis");
    QTest::newRow("directory home") << false;
    QTest::newRow("redis home") << true;
}

void TestPauseCrossProcess::pauseInWindowMakesCliWait()
{
    QFETCH(bool, redis);
    QTemporaryDir dir;
    QString home = dir.path() + QStringLiteral("/home");
    if (redis) {
        const auto redisHome = RedisServer::testHome(m_redis, QStringLiteral("pause"), 1);
        if (!redisHome.skip.isEmpty())
            QSKIP(qPrintable(redisHome.skip));
        QVERIFY2(redisHome.failure.isEmpty(), qPrintable(redisHome.failure));
        home = QString::fromStdString(redisHome.url);
    }
    SystemClock clock;
    ProcessProbe probe;
    auto store = StoreFactory::openBackend(home.toStdString(), clock, probe);
    QVERIFY2(store, store ? "" : store.error().describe().c_str());
    QuotaLimiter limiter(**store, clock, probe);
    ProviderLimits l;
    l.requests = 1000;
    QVERIFY(limiter.setLimits("api", l, "test"));

    MainWindow w(DashboardOptions { home, {}, dir.path() + QStringLiteral("/dashboard.ini") });
    w.show();
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS);
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);
    w.findChild<QAction*>(QStringLiteral("actionPauseAll"))->trigger();
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(actions.first().at(0).value<ActionResult>().ok);

    QProcess cli;
    cli.start(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("cron-job"), QStringLiteral("--timeout"), QStringLiteral("60"),
            QStringLiteral("--home"), home });
    QVERIFY(cli.waitForStarted());
    const qint64 pid = cli.processId();
    QTRY_VERIFY_WITH_TIMEOUT(waiterQueued(limiter, pid, WaitReason::Paused), TIMEOUT_MS);
    QCOMPARE(cli.state(), QProcess::Running);
    // The window shows it waiting too.
    QTRY_COMPARE_WITH_TIMEOUT(w.controller()->snapshot().state.provider("api")
            ? w.controller()->snapshot().state.provider("api")->queue.size()
            : 0,
        std::size_t(1), TIMEOUT_MS);

    w.findChild<QAction*>(QStringLiteral("actionResumeAll"))->trigger();
    QVERIFY(cli.waitForFinished(TIMEOUT_MS));
    QCOMPARE(cli.exitStatus(), QProcess::NormalExit);
    QCOMPARE(cli.exitCode(), 0);
    QVERIFY(cli.readAllStandardOutput().contains("admitted provider=api"));
}

QTEST_MAIN(TestPauseCrossProcess)
#include "tst_pausecrossprocess.moc"
