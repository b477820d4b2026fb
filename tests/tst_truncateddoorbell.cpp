// A doorbell truncated under running processes (`: > HOME/doorbell`, as any process of the
// user may do): nobody dies of it (the SIGBUS of its mapping is answered, see SharedMapping),
// the flock on state.lock still keeps every guarantee, and the processes open the doorbell
// again (growing it back) so that waiters are woken again.

#include "testsupport.h"

#include <QDeadlineTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

class TestTruncatedDoorbell final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void cleanup();
    void aQueuedWaiterLivesAndIsAdmitted_data();
    void aQueuedWaiterLivesAndIsAdmitted();
    void aWaiterForTheStateLockLivesAndGetsIt();
    void repeatedTruncationUnderContention();

private:
    QStringList withHome(QStringList args) const
    {
        args.insert(1, QStringLiteral("--home"));
        args.insert(2, m_home);
        return args;
    }
    int cli(const QStringList& args) const
    {
        QProcess p;
        p.start(QStringLiteral(TOLLGATE_CLI_PATH), withHome(args));
        if (!p.waitForFinished(120000))
            qFatal("tollgate did not finish");
        return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    }
    QProcess* start(const QString& program, const QStringList& args)
    {
        TestSupport::Child p(new QProcess);
        p->start(program, args);
        p->waitForStarted();
        m_procs.push_back(std::move(p));
        return m_procs.back().get();
    }
    QProcess* startCli(const QStringList& args)
    {
        return start(QStringLiteral(TOLLGATE_CLI_PATH), withHome(args));
    }
    int waitingCount() const
    {
        QProcess p;
        p.start(QStringLiteral(TOLLGATE_CLI_PATH),
            withHome({ QStringLiteral("status"), QStringLiteral("--json") }));
        if (!p.waitForFinished(120000))
            qFatal("tollgate did not finish");
        const auto providers = QJsonDocument::fromJson(p.readAllStandardOutput())
                                   .object()
                                   .value(QStringLiteral("providers"))
                                   .toArray();
        for (const auto& v : providers) {
            if (v.toObject().value(QStringLiteral("provider")).toString() == QStringLiteral("api"))
                return static_cast<int>(v.toObject().value(QStringLiteral("queue")).toArray().size());
        }
        return -1;
    }
    QString bell() const { return m_home + QStringLiteral("/doorbell"); }
    bool truncateBell() const { return ::truncate(bell().toLocal8Bit().constData(), 0) == 0; }
    qint64 bellSize() const { return QFileInfo(bell()).size(); }
    // Whether `pid` maps HOME/doorbell now (a truncation answered in that process replaced
    // its mapping with private pages, which /proc/PID/maps shows without a file name).
    bool mapsBell(qint64 pid) const
    {
        QFile maps(QStringLiteral("/proc/%1/maps").arg(pid));
        return maps.open(QIODevice::ReadOnly) && maps.readAll().contains(QFile::encodeName(bell()) + '\n');
    }
    // Whether `pid` sleeps in a futex wait now (how the lock queue waits): /proc/PID/syscall
    // starts with the number of the system call it is blocked in; wchan names the kernel's
    // futex wait when the former cannot catch it asleep.
    static bool sleepsOnFutex(qint64 pid)
    {
        QFile syscall(QStringLiteral("/proc/%1/syscall").arg(pid));
        QFile wchan(QStringLiteral("/proc/%1/wchan").arg(pid));
        bool ok = false;
        const long nr
            = syscall.open(QIODevice::ReadOnly) ? syscall.readAll().split(' ').value(0).toLong(&ok) : -1;
        return (ok && nr == SYS_futex)
            || (wchan.open(QIODevice::ReadOnly) && wchan.readAll().startsWith("futex"));
    }
    static QString ended(QProcess* p)
    {
        return p->exitStatus() == QProcess::CrashExit
            ? QStringLiteral("died by signal %1").arg(p->exitCode())
            : QStringLiteral("exited with %1: %2")
                  .arg(p->exitCode())
                  .arg(QString::fromLocal8Bit(p->readAllStandardError()));
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
    std::vector<TestSupport::Child> m_procs; // killed and reaped when cleared
};

void TestTruncatedDoorbell::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->path() + QStringLiteral("/home");
}

void TestTruncatedDoorbell::cleanup()
{
    m_procs.clear();
}

void TestTruncatedDoorbell::aQueuedWaiterLivesAndIsAdmitted_data()
{
    // The window full for longer than anyone waits here, until its limit is raised (a pause
    // would do too, but a paused provider is refused at once: it has no known end); else the
    // only slot is held by another process.
    QTest::addColumn<bool>("windowFull");
    QTest::newRow("window full") << true;
    QTest::newRow("only slot held") << false;
}

void TestTruncatedDoorbell::aQueuedWaiterLivesAndIsAdmitted()
{
    QFETCH(bool, windowFull);
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                 QStringLiteral("--requests"), windowFull ? QStringLiteral("1") : QStringLiteral("1000"),
                 QStringLiteral("--window"), windowFull ? QStringLiteral("600") : QStringLiteral("60"),
                 QStringLiteral("--parallel"), QStringLiteral("1") }),
        0);
    QProcess* holder = nullptr;
    if (windowFull) {
        QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("filler"), QStringLiteral("--timeout"), QStringLiteral("0") }),
            0);
    } else {
        // Holds the slot until its standard input closes; says so once its command runs.
        holder = startCli({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("holder"), QStringLiteral("--"), QStringLiteral("sh"), QStringLiteral("-c"),
            QStringLiteral("echo holding; cat") });
        QByteArray said;
        QTRY_VERIFY_WITH_TIMEOUT((said += holder->readAllStandardOutput()).contains("holding"), 30000);
    }
    std::vector<QProcess*> waiters;
    for (int i = 0; i < 2; ++i) {
        waiters.push_back(startCli({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("w%1").arg(i), QStringLiteral("--timeout"), QStringLiteral("3600"),
            QStringLiteral("--"), QStringLiteral("true") }));
    }
    QTRY_COMPARE_WITH_TIMEOUT(waitingCount(), 2, 30000);
    for (int round = 0; round < 3; ++round) {
        QVERIFY(truncateBell());
        // A waiter looks at the store every 250 ms at most: it meets the truncated mapping,
        // lives, and opens the doorbell again, which grows it back (status does not open it).
        QDeadlineTimer deadline(30000);
        while (bellSize() != 4096) {
            for (QProcess* w : waiters)
                QVERIFY2(w->state() == QProcess::Running, qPrintable(ended(w)));
            QVERIFY2(!deadline.hasExpired(), "nobody opened the truncated doorbell again");
            QTest::qWait(5);
        }
    }
    for (QProcess* w : waiters)
        QVERIFY2(w->state() == QProcess::Running, qPrintable(ended(w)));
    QCOMPARE(waitingCount(), 2);
    if (windowFull) {
        QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("1000") }),
            0);
    } else {
        holder->closeWriteChannel();
        QVERIFY(holder->state() == QProcess::NotRunning || holder->waitForFinished(30000));
        QVERIFY2(holder->exitStatus() == QProcess::NormalExit && holder->exitCode() == 0,
            qPrintable(ended(holder)));
    }
    for (QProcess* w : waiters) {
        QVERIFY(w->state() == QProcess::NotRunning || w->waitForFinished(30000));
        QVERIFY2(w->exitStatus() == QProcess::NormalExit && w->exitCode() == 0, qPrintable(ended(w)));
    }
}

void TestTruncatedDoorbell::aWaiterForTheStateLockLivesAndGetsIt()
{
    // A process waiting for state.lock sleeps in the lock queue (futex waits on the doorbell's
    // words, a few ms each): truncated under it, it lives and takes the lock once it is free.
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                 QStringLiteral("--requests"), QStringLiteral("1000"), QStringLiteral("--window"),
                 QStringLiteral("60") }),
        0);
    const int lockFd
        = ::open(QFile::encodeName(m_home + QStringLiteral("/state.lock")).constData(), O_RDWR | O_CLOEXEC);
    QVERIFY(lockFd >= 0);
    QVERIFY(::flock(lockFd, LOCK_EX) == 0);
    QProcess* waiter = startCli({ QStringLiteral("acquire"), QStringLiteral("api"),
        QStringLiteral("--caller"), QStringLiteral("w"), QStringLiteral("--timeout"), QStringLiteral("60") });
    // In the lock queue: seen asleep on a futex (its sleeps there are a few ms each).
    QDeadlineTimer queued(30000);
    while (!sleepsOnFutex(waiter->processId())) {
        QVERIFY2(waiter->state() == QProcess::Running, qPrintable(ended(waiter)));
        QVERIFY2(!queued.hasExpired(), "the waiter was never seen waiting for state.lock");
        QTest::qWait(1);
    }
    // Until the waiter met the truncation (its mapping is private pages now), or died of it.
    // Truncated again whenever it is whole: the waiter may have opened it again (grown it)
    // before it queued for the lock.
    QDeadlineTimer deadline(30000);
    while (waiter->state() == QProcess::Running
        && (!QFileInfo::exists(bell()) || bellSize() != 0 || mapsBell(waiter->processId()))) {
        QVERIFY2(!deadline.hasExpired(), "the waiter never looked at the truncated doorbell");
        if (bellSize() == 4096)
            QVERIFY(truncateBell());
        QTest::qWait(1);
    }
    QVERIFY2(waiter->state() == QProcess::Running, qPrintable(ended(waiter)));
    ::close(lockFd);
    QVERIFY(waiter->state() == QProcess::NotRunning || waiter->waitForFinished(30000));
    QVERIFY2(
        waiter->exitStatus() == QProcess::NormalExit && waiter->exitCode() == 0, qPrintable(ended(waiter)));
}

void TestTruncatedDoorbell::repeatedTruncationUnderContention()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                 QStringLiteral("--requests"), QStringLiteral("100000"), QStringLiteral("--window"),
                 QStringLiteral("60"), QStringLiteral("--parallel"), QStringLiteral("1") }),
        0);
    const int workers = 4, iterations = 25;
    std::vector<QProcess*> procs;
    for (int w = 0; w < workers; ++w) {
        procs.push_back(start(QStringLiteral(TOLLGATE_QUOTAWORKER_PATH),
            { m_home, QStringLiteral("api"), QStringLiteral("w%1").arg(w), QString::number(iterations),
                m_dir->path() + QStringLiteral("/w%1.log").arg(w), QString::number(7000 + w),
                QStringLiteral("0"), QStringLiteral("4") }));
    }
    auto running = [&] {
        return std::any_of(
            procs.begin(), procs.end(), [](QProcess* p) { return p->state() == QProcess::Running; });
    };
    // Truncate, wait until a worker opened it again (or all are done), and again.
    int truncations = 0;
    QDeadlineTimer deadline(120000);
    while (running()) {
        QVERIFY2(!deadline.hasExpired(), "the workers did not finish");
        if (bellSize() == 4096) {
            QVERIFY(truncateBell());
            ++truncations;
        }
        QTest::qWait(2);
    }
    std::vector<std::pair<qint64, int>> edges;
    int calls = 0;
    for (int w = 0; w < workers; ++w) {
        QVERIFY(procs[w]->state() == QProcess::NotRunning || procs[w]->waitForFinished(30000));
        QVERIFY2(procs[w]->exitStatus() == QProcess::NormalExit && procs[w]->exitCode() == 0,
            qPrintable(QStringLiteral("worker %1 %2").arg(w).arg(ended(procs[w]))));
        const auto log = TestSupport::readWorkerLog(m_dir->path() + QStringLiteral("/w%1.log").arg(w));
        QVERIFY(log.opened);
        for (const auto& c : log.calls) {
            edges.emplace_back(c.admitted, +1);
            edges.emplace_back(c.released, -1);
            ++calls;
        }
    }
    QCOMPARE(calls, workers * iterations);
    QVERIFY2(truncations >= 3,
        qPrintable(QStringLiteral("only %1 truncations: the test did not exercise them").arg(truncations)));
    const int peak = TestSupport::peakOverlap(std::move(edges));
    QVERIFY2(peak == 1, qPrintable(QStringLiteral("%1 holders of the only slot at once").arg(peak)));
}

QTEST_GUILESS_MAIN(TestTruncatedDoorbell)
#include "tst_truncateddoorbell.moc"
