// `tollgate demo` as a user runs it: simulated callers are real processes going through the
// real protocol, the simulated provider's lower quota makes real 429s happen, and Ctrl-C
// (SIGINT) stops every caller cleanly, with every slot given back.

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "history/historyreader.h"
#include "store/filequotastore.h"

#include <QProcess>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>
#include <csignal>

using namespace tollgate;

class TestDemo final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void stormsHappenAndCtrlCStopsCleanly();
};

void TestDemo::stormsHappenAndCtrlCStopsCleanly()
{
    QTemporaryDir dir;
    const QString home = dir.path() + QStringLiteral("/home");
    QProcess demo;
    demo.start(QStringLiteral(TOLLGATE_CLI_PATH), { QStringLiteral("demo"), QStringLiteral("--home"), home });
    QVERIFY(demo.waitForStarted());

    HistoryReader reader(home.toStdString());
    QSet<QString> callers;
    QSet<qint64> pids;
    int rateLimited = 0;
    auto poll = [&] {
        if (auto batch = reader.poll()) {
            for (const auto& e : batch->events) {
                if (e.type == EventType::Admit) {
                    callers.insert(QString::fromStdString(e.caller));
                    pids.insert(e.pid);
                } else if (e.type == EventType::RateLimited) {
                    ++rateLimited;
                }
            }
        }
        return callers.size() >= 3 && rateLimited >= 1;
    };
    // The provider allows 40 requests a minute against a limit of 60: a 429 comes within
    // the first minute (typically after 10-15 s).
    QTRY_VERIFY_WITH_TIMEOUT(poll(), 60000);
    QCOMPARE(demo.state(), QProcess::Running);

    ::kill(static_cast<pid_t>(demo.processId()), SIGINT);
    QVERIFY(demo.waitForFinished(15000));
    QCOMPARE(demo.exitStatus(), QProcess::NormalExit);
    QCOMPARE(demo.exitCode(), 0);
    const QByteArray out = demo.readAllStandardOutput();
    QVERIFY(out.contains("tollgate-dashboard --home"));
    QVERIFY(out.contains("stopped"));

    const ProcessProbe probe;
    for (qint64 pid : pids)
        QCOMPARE(probe.liveness(pid, std::nullopt), Liveness::Dead);
    const SystemClock clock;
    auto store = FileQuotaStore::open(home.toStdString(), clock);
    QVERIFY(store);
    QuotaLimiter limiter(**store, clock, probe);
    auto snap = limiter.snapshot();
    QVERIFY(snap);
    const ProviderState* p = snap->state.provider("demo-api");
    QVERIFY(p);
    QVERIFY(p->slots.empty());
    QVERIFY(p->queue.empty());
}

QTEST_GUILESS_MAIN(TestDemo)
#include "tst_demo.moc"
