// Pausing in the window stops a separate process's `tollgate acquire`: a pause has no known
// end, so the caller is answered at once (exit 1, "paused", nothing queued; issue 26 item 3)
// rather than held until its --timeout; resuming in the window lets the next one through. The
// caller is the real CLI binary. On a directory home and on a Redis home.

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
    void pauseInWindowStopsTheCliUntilResumed_data();
    void pauseInWindowStopsTheCliUntilResumed();

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

void TestPauseCrossProcess::pauseInWindowStopsTheCliUntilResumed_data()
{
    QTest::addColumn<bool>("redis");
    QTest::newRow("directory home") << false;
    QTest::newRow("redis home") << true;
}

void TestPauseCrossProcess::pauseInWindowStopsTheCliUntilResumed()
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

    auto acquire = [&](QProcess& cli) {
        cli.start(QStringLiteral(TOLLGATE_CLI_PATH),
            { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                QStringLiteral("cron-job"), QStringLiteral("--timeout"), QStringLiteral("60"),
                QStringLiteral("--home"), home });
        return cli.waitForStarted() && cli.waitForFinished(TIMEOUT_MS)
            && cli.exitStatus() == QProcess::NormalExit;
    };
    QProcess paused;
    QVERIFY(acquire(paused));
    QCOMPARE(paused.exitCode(), 1);
    const QByteArray said = paused.readAllStandardError();
    QVERIFY2(said.contains("is paused") && said.contains("no known end"), said.constData());
    QVERIFY(!waiterQueued(limiter, paused.processId(), WaitReason::Paused));
    auto s = limiter.snapshot();
    QVERIFY(s && s->state.provider("api") && s->state.provider("api")->queue.empty());

    w.findChild<QAction*>(QStringLiteral("actionResumeAll"))->trigger();
    QVERIFY(actions.wait(TIMEOUT_MS));
    QVERIFY(actions.last().at(0).value<ActionResult>().ok);
    QProcess resumed;
    QVERIFY(acquire(resumed));
    QCOMPARE(resumed.exitCode(), 0);
    QVERIFY(resumed.readAllStandardOutput().contains("admitted provider=api"));
}

QTEST_MAIN(TestPauseCrossProcess)
#include "tst_pausecrossprocess.moc"
