// Real multi-process exclusion: several lockworker processes hammer one lock file; each
// checks, independently of the lock, that nobody else is inside while it holds it.

#include "testsupport.h"

#include <QDir>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <memory>
#include <vector>

// Iterations per worker. Under a sanitizer every lock operation, and the fork of each child a
// storm abandons a lock with (the sanitizer's shadow mappings are copied), costs five times
// what it does in the normal build; scripts/test.sh's ASan phase is there for memory errors in
// the lock code, which a third of the iterations reaches as well (they still count over a
// thousand wins and hundreds of stale takeovers, far above the floors below). The normal build
// runs them all.
#ifdef TOLLGATE_TEST_SANITIZED
constexpr int ITERATION_SHARE = 3;
#else
constexpr int ITERATION_SHARE = 1;
#endif

class TestLockProcesses final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void hammerHasNoOverlaps();
    void staleTakeoverStormHasNoOverlaps();

private:
    struct Totals
    {
        long wins = 0, overlaps = 0, mismatches = 0, lost = 0, takeovers = 0, abandoned = 0;
    };
    static Totals runWorkers(const QString& mode, const QString& path, int workers, int iterations);
};

TestLockProcesses::Totals TestLockProcesses::runWorkers(
    const QString& mode, const QString& path, int workers, int iterations)
{
    std::vector<std::unique_ptr<QProcess>> procs;
    for (int i = 0; i < workers; ++i) {
        auto p = std::make_unique<QProcess>();
        p->start(QStringLiteral(TOLLGATE_LOCKWORKER_PATH), { mode, path, QString::number(iterations) });
        procs.push_back(std::move(p));
    }
    Totals t;
    static const QRegularExpression re(QStringLiteral(
        "wins=(\\d+) overlaps=(\\d+) mismatches=(\\d+) lost=(\\d+) takeovers=(\\d+) abandoned=(\\d+)"));
    for (auto& p : procs) {
        if (!p->waitForFinished(240000) || p->exitCode() != 0) {
            qWarning("worker failed: %s", p->readAllStandardError().constData());
            t.overlaps = -1;
            continue;
        }
        const auto m = re.match(QString::fromUtf8(p->readAllStandardOutput()));
        if (!m.hasMatch()) {
            t.overlaps = -1;
            continue;
        }
        t.wins += m.captured(1).toLong();
        t.overlaps += m.captured(2).toLong();
        t.mismatches += m.captured(3).toLong();
        t.lost += m.captured(4).toLong();
        t.takeovers += m.captured(5).toLong();
        t.abandoned += m.captured(6).toLong();
    }
    return t;
}

void TestLockProcesses::hammerHasNoOverlaps()
{
    QTemporaryDir dir;
    const QString path = dir.path() + QStringLiteral("/hammer.lock");
    const auto t = runWorkers(QStringLiteral("hammer"), path, 8, 15000 / ITERATION_SHARE);
    qInfo(
        "hammer: %ld wins, %ld overlaps, %ld mismatches, %ld lost", t.wins, t.overlaps, t.mismatches, t.lost);
    QVERIFY(t.wins > 100); // the test must actually exercise the lock
    QCOMPARE(t.overlaps, 0L);
    QCOMPARE(t.mismatches, 0L);
    QCOMPARE(t.lost, 0L);
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden), QStringList {});
}

void TestLockProcesses::staleTakeoverStormHasNoOverlaps()
{
    QTemporaryDir dir;
    const QString path = dir.path() + QStringLiteral("/storm.lock");
    const auto t = runWorkers(QStringLiteral("storm"), path, 6, 3000 / ITERATION_SHARE);
    qInfo("storm: %ld wins, %ld stale takeovers, %ld abandoned locks, %ld overlaps, %ld mismatches, %ld lost",
        t.wins, t.takeovers, t.abandoned, t.overlaps, t.mismatches, t.lost);
    QVERIFY(t.takeovers > 20); // many dead holders' locks were actually contended for
    QCOMPARE(t.overlaps, 0L);
    QCOMPARE(t.mismatches, 0L);
    QCOMPARE(t.lost, 0L);
    // nothing left but (perhaps) the last dead child's lock: no temp files, no marker
    const auto left = QDir(dir.path()).entryList(QDir::Files | QDir::Hidden);
    QVERIFY2(
        left.isEmpty() || left == QStringList { QStringLiteral("storm.lock") }, qPrintable(left.join(u' ')));
}

QTEST_GUILESS_MAIN(TestLockProcesses)
#include "tst_lockprocesses.moc"
