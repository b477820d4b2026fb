// The shared quota across real processes. Every guarantee is checked from evidence kept
// outside Tollgate (the workers' own logs, the commands' own timestamps) and, where it adds
// precision, also from Tollgate's history.

#include "backend/storefactory.h"
#include "helpers/redisserver.h"
#include "history/historyreader.h"
#include "testsupport.h"

#include <QDateTime>
#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <map>
#include <set>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

class TestQuotaProcesses final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void initTestCase_data();
    void init();
    void cleanup();
    void eightProcessesNeverOverrunWindowTokensOrSlots();
    void killedHoldersSlotsAreReclaimed();
    void a429MakesEveryProcessWaitPastRetryAfter();
    void pauseIsRefusedAtOnceAndNobodyIsAdmittedUntilResume();
    void windowFullPastTheTimeoutIsRefusedAtOnceNamingTheTime();
    void waitersAreAdmittedInArrivalOrder();
    void raisedLimitAdmitsWaitingCallers();
    void killedOrInterruptedWaiterLeavesNoGhost();
    void corruptStateIsSetAsideWithLimitsKept();
    void signalWhileWaitingForTheStoreLockAdmitsNothing_data();
    void signalWhileWaitingForTheStoreLockAdmitsNothing();
    void storeLockWaitEndsAtTheCommandsOwnTimeout_data();
    void storeLockWaitEndsAtTheCommandsOwnTimeout();

private:
    struct Ran
    {
        int code = -1;
        QByteArray out;
        QByteArray err;
    };
    QStringList withHome(QStringList args) const
    {
        // right after the command word: anything after "--" belongs to the command run
        args.insert(std::min<qsizetype>(1, args.size()), QStringLiteral("--home"));
        args.insert(std::min<qsizetype>(2, args.size()), m_home);
        return args;
    }
    Ran cli(const QStringList& args) const;
    QProcess* startCli(const QStringList& args);
    QJsonObject providerStatus(const QString& provider) const;
    int waitingCount(const QString& provider) const
    {
        return providerStatus(provider).value(QStringLiteral("queue")).toArray().size();
    }
    static qint64 nowMs() { return QDateTime::currentMSecsSinceEpoch(); }
    static qint64 fileTimeMs(const QString& path);
    std::vector<tollgate::HistoryEvent> history() const;
    // A small /proc file's text ("" when it cannot be read).
    static QByteArray procFile(qint64 pid, const char* name)
    {
        const int fd = ::open(
            QStringLiteral("/proc/%1/%2").arg(pid).arg(QLatin1String(name)).toLocal8Bit().constData(),
            O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return {};
        char buf[512];
        const ssize_t n = ::read(fd, buf, sizeof buf);
        ::close(fd);
        return n > 0 ? QByteArray(buf, static_cast<qsizetype>(n)) : QByteArray();
    }
    // Whether `pid` sleeps in a futex wait now: how a command waits for state.lock (the lock
    // queue, core/store/lockqueue.h). /proc/PID/syscall starts with the number of the system
    // call the process is blocked in, but says "running" when it cannot catch the process
    // asleep (its sleeps there are 1 ms each); wchan names the kernel's futex wait then.
    static bool sleepsOnFutex(qint64 pid)
    {
        const QByteArray nr = procFile(pid, "syscall").split(' ').value(0);
        bool ok = false;
        return (nr.toLong(&ok) == SYS_futex && ok) || procFile(pid, "wchan").startsWith("futex");
    }
    // Polls until `pid` is once seen asleep on a futex, for at most 30 s (not QTRY: it
    // evaluates its condition once more after the loop, and the process wakes every ms).
    static bool seenOnFutex(qint64 pid)
    {
        QDeadlineTimer deadline(30000);
        while (!sleepsOnFutex(pid)) {
            if (deadline.hasExpired())
                return false;
            QTest::qWait(5);
        }
        return true;
    }
    // Whether `pid` still runs (has not exited, reaped or not): the state in /proc/PID/stat.
    static bool stillRuns(qint64 pid)
    {
        const QByteArray stat = procFile(pid, "stat");
        const qsizetype at = stat.lastIndexOf(") ");
        return at >= 0 && at + 2 < stat.size() && stat[at + 2] != 'Z' && stat[at + 2] != 'X';
    }
    // state.lock held by the test itself, as by a process stopped inside its transaction.
    struct StateLockHeld
    {
        int fd = -1;
        explicit StateLockHeld(const QString& home)
            : fd(::open((home + QStringLiteral("/state.lock")).toLocal8Bit().constData(), O_RDWR | O_CLOEXEC))
        {
            if (fd >= 0 && ::flock(fd, LOCK_EX) != 0) {
                ::close(fd);
                fd = -1;
            }
        }
        ~StateLockHeld() { release(); }
        void release()
        {
            if (fd >= 0)
                ::close(fd);
            fd = -1;
        }
    };
    static QByteArray fileBytes(const QString& path)
    {
        QFile f(path);
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
    std::vector<std::unique_ptr<QProcess>> m_procs;
    std::unique_ptr<RedisServer> m_redis; // when scripts/test.sh shares none
    int m_homes = 0;
};

void TestQuotaProcesses::initTestCase_data()
{
    // Every behaviour on a directory home and on a Redis home (the same processes, the same
    // assertions: only the home string differs).
    QTest::addColumn<bool>("redis");
    QTest::newRow("file") << false;
    QTest::newRow("redis") << true;
}

void TestQuotaProcesses::init()
{
    QFETCH_GLOBAL(bool, redis);
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->path() + QStringLiteral("/home");
    if (redis) {
        const auto home = RedisServer::testHome(m_redis, QStringLiteral("proc"), ++m_homes);
        if (!home.skip.isEmpty())
            QSKIP(qPrintable(home.skip));
        QVERIFY2(home.failure.isEmpty(), qPrintable(home.failure));
        m_home = QString::fromStdString(home.url);
    }
}

void TestQuotaProcesses::cleanup()
{
    for (auto& p : m_procs) {
        if (p->state() != QProcess::NotRunning) {
            p->kill();
            p->waitForFinished(5000);
        }
    }
    m_procs.clear();
}

TestQuotaProcesses::Ran TestQuotaProcesses::cli(const QStringList& args) const
{
    QProcess p;
    p.start(QStringLiteral(TOLLGATE_CLI_PATH), withHome(args));
    if (!p.waitForFinished(120000))
        qFatal("tollgate did not finish");
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
        p.readAllStandardError() };
}

QProcess* TestQuotaProcesses::startCli(const QStringList& args)
{
    auto p = std::make_unique<QProcess>();
    p->start(QStringLiteral(TOLLGATE_CLI_PATH), withHome(args));
    p->waitForStarted();
    m_procs.push_back(std::move(p));
    return m_procs.back().get();
}

QJsonObject TestQuotaProcesses::providerStatus(const QString& provider) const
{
    const auto r = cli({ QStringLiteral("status"), QStringLiteral("--json") });
    const auto providers
        = QJsonDocument::fromJson(r.out).object().value(QStringLiteral("providers")).toArray();
    for (const auto& p : providers) {
        if (p.toObject().value(QStringLiteral("provider")).toString() == provider)
            return p.toObject();
    }
    return {};
}

qint64 TestQuotaProcesses::fileTimeMs(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll().trimmed().toLongLong() : -1;
}

std::vector<tollgate::HistoryEvent> TestQuotaProcesses::history() const
{
    auto reader = tollgate::StoreFactory::openReader(m_home.toStdString());
    if (!reader)
        return {};
    auto b = (*reader)->history()->poll();
    return b ? b->events : std::vector<tollgate::HistoryEvent> {};
}

void TestQuotaProcesses::eightProcessesNeverOverrunWindowTokensOrSlots()
{
    const qint64 windowUs = 500000;
    const int maxRequests = 12, maxTokens = 3000, maxParallel = 3;
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QString::number(maxRequests), QStringLiteral("--window"),
                     QStringLiteral("0.5"), QStringLiteral("--tokens"), QString::number(maxTokens),
                     QStringLiteral("--parallel"), QString::number(maxParallel) })
                 .code,
        0);
    const int workers = 8, iterations = 10;
    std::vector<std::unique_ptr<QProcess>> procs;
    for (int w = 0; w < workers; ++w) {
        auto p = std::make_unique<QProcess>();
        p->start(QStringLiteral(TOLLGATE_QUOTAWORKER_PATH),
            { m_home, QStringLiteral("api"), QStringLiteral("w%1").arg(w), QString::number(iterations),
                m_dir->path() + QStringLiteral("/w%1.log").arg(w), QString::number(1000 + w),
                QStringLiteral("400"), QStringLiteral("40") });
        procs.push_back(std::move(p));
    }
    using Call = TestSupport::WorkerCall;
    std::vector<Call> calls;
    for (int w = 0; w < workers; ++w) {
        QVERIFY(procs[w]->waitForFinished(120000));
        QVERIFY2(procs[w]->exitCode() == 0, procs[w]->readAllStandardError().constData());
        const auto log = TestSupport::readWorkerLog(m_dir->path() + QStringLiteral("/w%1.log").arg(w));
        QVERIFY(log.opened);
        calls.insert(calls.end(), log.calls.begin(), log.calls.end());
    }
    QCOMPARE(calls.size(), std::size_t(workers * iterations));

    // 1. From the workers' logs: admission i happened within [asked_i, admitted_i]. A set of
    //    admissions is a certain overrun if all of them fit inside one window-length interval
    //    whatever their exact times: max(admitted) - min(asked) < window.
    std::sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) { return a.asked < b.asked; });
    for (std::size_t i = 0; i < calls.size(); ++i) {
        int count = 0;
        qint64 tokens = 0;
        for (std::size_t j = i; j < calls.size(); ++j) {
            if (calls[j].admitted < calls[i].asked + windowUs) {
                ++count;
                tokens += calls[j].tokens;
            }
        }
        QVERIFY2(count <= maxRequests,
            qPrintable(QStringLiteral("%1 admissions surely within one window").arg(count)));
        QVERIFY2(tokens <= maxTokens,
            qPrintable(QStringLiteral("%1 tokens surely within one window").arg(tokens)));
    }
    // 2. Parallel: each logged hold [admitted, released] lies inside the real slot tenure.
    std::vector<std::pair<qint64, int>> edges;
    for (const auto& c : calls) {
        edges.emplace_back(c.admitted, +1);
        edges.emplace_back(c.released, -1);
    }
    const int peak = TestSupport::peakOverlap(std::move(edges));
    QVERIFY2(peak <= maxParallel, qPrintable(QStringLiteral("%1 calls in flight at once").arg(peak)));
    QVERIFY(peak >= 1);

    // 3. From Tollgate's history, to the millisecond: every logged fence was admitted, and no
    //    window-length interval holds more than the limits.
    std::vector<tollgate::HistoryEvent> admits;
    for (const auto& e : history()) {
        if (e.type == tollgate::EventType::Admit && e.provider == "api")
            admits.push_back(e);
    }
    QCOMPARE(admits.size(), calls.size());
    std::set<quint64> fences;
    for (const auto& e : admits)
        fences.insert(e.fence);
    for (const auto& c : calls)
        QVERIFY(fences.count(c.fence));
    std::sort(admits.begin(), admits.end(), [](const auto& a, const auto& b) { return a.timeMs < b.timeMs; });
    int waited = 0;
    for (std::size_t i = 0; i < admits.size(); ++i) {
        waited += admits[i].waitedMs > 0 ? 1 : 0;
        int count = 0;
        qint64 tokens = 0;
        for (std::size_t j = i; j < admits.size() && admits[j].timeMs < admits[i].timeMs + windowUs / 1000;
             ++j) {
            ++count;
            tokens += admits[j].tokens;
        }
        QVERIFY2(count <= maxRequests,
            qPrintable(QStringLiteral("history: %1 admissions in one window").arg(count)));
        QVERIFY2(
            tokens <= maxTokens, qPrintable(QStringLiteral("history: %1 tokens in one window").arg(tokens)));
    }
    QVERIFY2(waited > 10, "the limits never made anyone wait: the test did not exercise them");
}

void TestQuotaProcesses::killedHoldersSlotsAreReclaimed()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--parallel"), QStringLiteral("2") })
                 .code,
        0);
    std::vector<QProcess*> victims;
    for (int i = 0; i < 2; ++i) {
        const QString pidFile = m_dir->path() + QStringLiteral("/victim%1.pid").arg(i);
        victims.push_back(startCli({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("victim%1").arg(i), QStringLiteral("--"), QStringLiteral("sh"),
            QStringLiteral("-c"), QStringLiteral("echo $$ > \"$0\"; exec sleep 600"), pidFile }));
        QTRY_VERIFY_WITH_TIMEOUT(fileTimeMs(pidFile) > 0, 30000);
    }
    QCOMPARE(providerStatus(QStringLiteral("api")).value(QStringLiteral("slots")).toArray().size(), 2);
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("x"), QStringLiteral("--slot"), QStringLiteral("--timeout"),
                     QStringLiteral("0") })
                 .code,
        1);
    for (int i = 0; i < 2; ++i) {
        // SIGKILL tollgate itself first: no chance to release (its command dies with it). Killing
        // the command first would let tollgate see it exit and release the slot normally.
        victims[i]->kill();
        QVERIFY(victims[i]->waitForFinished(10000));
        ::kill(
            static_cast<pid_t>(fileTimeMs(m_dir->path() + QStringLiteral("/victim%1.pid").arg(i))), SIGKILL);
    }
    for (int i = 0; i < 2; ++i) {
        auto r = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("next%1").arg(i), QStringLiteral("--slot"), QStringLiteral("--timeout"),
            QStringLiteral("20") });
        QVERIFY2(r.code == 0, r.err.constData());
    }
    int reclaimed = 0;
    for (const auto& e : history())
        reclaimed += e.type == tollgate::EventType::Reclaim ? 1 : 0;
    QCOMPARE(reclaimed, 2);
}

void TestQuotaProcesses::a429MakesEveryProcessWaitPastRetryAfter()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("1000"), QStringLiteral("--window"),
                     QStringLiteral("60"), QStringLiteral("--backoff-base"), QStringLiteral("0.2") })
                 .code,
        0);
    const qint64 before429 = nowMs();
    QCOMPARE(cli({ QStringLiteral("report-429"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("reporter"), QStringLiteral("--retry-after"), QStringLiteral("1.5") })
                 .code,
        0);
    std::vector<QProcess*> callers;
    for (int i = 0; i < 4; ++i) {
        callers.push_back(startCli({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("c%1").arg(i), QStringLiteral("--timeout"), QStringLiteral("30"),
            QStringLiteral("--"), QStringLiteral("sh"), QStringLiteral("-c"),
            QStringLiteral("date +%s%3N > \"$0\""), m_dir->path() + QStringLiteral("/ran%1").arg(i) }));
    }
    for (int i = 0; i < 4; ++i) {
        QVERIFY(callers[i]->waitForFinished(60000));
        QCOMPARE(callers[i]->exitCode(), 0);
        // the command runs after its admission, so its clock reading bounds the admission
        const qint64 ran = fileTimeMs(m_dir->path() + QStringLiteral("/ran%1").arg(i));
        QVERIFY2(ran >= before429 + 1500,
            qPrintable(QStringLiteral("ran %1 ms after the 429").arg(ran - before429)));
    }
    qint64 at429 = 0;
    for (const auto& e : history()) {
        if (e.type == tollgate::EventType::RateLimited)
            at429 = e.timeMs;
        if (e.type == tollgate::EventType::Admit)
            QVERIFY(e.timeMs >= at429 + 1500);
    }
}

// A pause has no end in time, so waiting cannot end it (issue 26 item 3): every caller hears
// at once, with the pause's reason, and can fall back; nothing runs until a resume.
void TestQuotaProcesses::pauseIsRefusedAtOnceAndNobodyIsAdmittedUntilResume()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("1000"), QStringLiteral("--window"),
                     QStringLiteral("60") })
                 .code,
        0);
    QCOMPARE(
        cli({ QStringLiteral("pause"), QStringLiteral("--reason"), QStringLiteral("maintenance") }).code, 0);
    std::vector<QProcess*> callers;
    for (int i = 0; i < 3; ++i) {
        callers.push_back(startCli({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("c%1").arg(i), QStringLiteral("--timeout"), QStringLiteral("600"),
            QStringLiteral("--"), QStringLiteral("sh"), QStringLiteral("-c"),
            QStringLiteral("date +%s%3N > \"$0\""), m_dir->path() + QStringLiteral("/ran%1").arg(i) }));
    }
    for (int i = 0; i < 3; ++i) {
        QVERIFY(callers[i]->waitForFinished(120000)); // not the 600 s: nothing waits
        QCOMPARE(callers[i]->exitCode(), 1);
        const QByteArray err = callers[i]->readAllStandardError();
        QVERIFY2(err.contains("paused: maintenance") && err.contains("no known end"), err.constData());
        QVERIFY(!QFile::exists(m_dir->path() + QStringLiteral("/ran%1").arg(i)));
    }
    QCOMPARE(waitingCount(QStringLiteral("api")), 0);
    int gaveUp = 0;
    for (const auto& e : history()) {
        if (e.type == tollgate::EventType::GaveUp && e.reason == "paused (no known end)")
            ++gaveUp;
    }
    QCOMPARE(gaveUp, 3); // recorded as a caller that gave up at its deadline is
    const Ran json = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("j"), QStringLiteral("--timeout"), QStringLiteral("600"), QStringLiteral("--json") });
    QCOMPARE(json.code, 1);
    const QJsonObject refusal = QJsonDocument::fromJson(json.out).object();
    QVERIFY2(refusal.value(QStringLiteral("paused")).toBool(), json.out.constData());
    QVERIFY2(refusal.value(QStringLiteral("retry_at_ms")).isNull(), json.out.constData()); // no time ends it
    QCOMPARE(refusal.value(QStringLiteral("code")).toInt(), 1);

    QCOMPARE(cli({ QStringLiteral("resume") }).code, 0);
    const Ran after = cli({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("c0"), QStringLiteral("--timeout"), QStringLiteral("60"), QStringLiteral("--"),
        QStringLiteral("sh"), QStringLiteral("-c"), QStringLiteral("date +%s%3N > \"$0\""),
        m_dir->path() + QStringLiteral("/ran0") });
    QCOMPARE(after.code, 0);
    QVERIFY(QFile::exists(m_dir->path() + QStringLiteral("/ran0")));
}

// Issue 25 item 6: the window is full for a minute and the caller's --timeout is 5 s. Waiting
// cannot end well: it hears at once (exit 1) when the room comes, and can fall back.
void TestQuotaProcesses::windowFullPastTheTimeoutIsRefusedAtOnceNamingTheTime()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("1"), QStringLiteral("--window"),
                     QStringLiteral("60") })
                 .code,
        0);
    const qint64 before = nowMs();
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("first"), QStringLiteral("--timeout"), QStringLiteral("0") })
                 .code,
        0);
    const Ran refused = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("late"), QStringLiteral("--timeout"), QStringLiteral("5"), QStringLiteral("--json") });
    QCOMPARE(refused.code, 1);
    const QJsonObject doc = QJsonDocument::fromJson(refused.out).object();
    const QString error = doc.value(QStringLiteral("error")).toString();
    QVERIFY2(error.contains(QStringLiteral("provider 'api' has no room before "))
            && error.contains(QStringLiteral("past this call's deadline"))
            && error.contains(QStringLiteral("window")),
        refused.out.constData());
    QCOMPARE(doc.value(QStringLiteral("code")).toInt(), 1);
    QCOMPARE(doc.value(QStringLiteral("reason")).toString(), QStringLiteral("window"));
    QVERIFY(!doc.value(QStringLiteral("paused")).toBool());
    // When the first admission leaves the window: a minute after it (and a bucket or two).
    const qint64 retryAt = doc.value(QStringLiteral("retry_at_ms")).toInteger(-1);
    QVERIFY2(retryAt >= before + 60000 && retryAt <= nowMs() + 66000, refused.out.constData());
    const QString named
        = QDateTime::fromMSecsSinceEpoch(retryAt, Qt::UTC).toString(QStringLiteral("HH:mm:ss"));
    QVERIFY2(
        error.contains(named + QStringLiteral(" UTC")), qPrintable(error + QStringLiteral(" / ") + named));
    QVERIFY2(refused.err.contains("has no room before"), refused.err.constData());

    // run says the same (without --json, on stderr) and runs nothing.
    const Ran run = cli(
        { QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("late"),
            QStringLiteral("--timeout"), QStringLiteral("5"), QStringLiteral("--"), QStringLiteral("sh"),
            QStringLiteral("-c"), QStringLiteral("touch \"$0\""), m_dir->path() + QStringLiteral("/ran") });
    QCOMPARE(run.code, 1);
    QVERIFY2(run.err.contains("has no room before") && run.err.contains("past this call's deadline"),
        run.err.constData());
    QVERIFY(!QFile::exists(m_dir->path() + QStringLiteral("/ran")));
    QCOMPARE(waitingCount(QStringLiteral("api")), 0);
    int gaveUp = 0;
    for (const auto& e : history()) {
        if (e.type == tollgate::EventType::GaveUp && e.caller == "late"
            && e.reason == "window (no room before the deadline)")
            ++gaveUp;
    }
    QCOMPARE(gaveUp, 2);
}

void TestQuotaProcesses::waitersAreAdmittedInArrivalOrder()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--parallel"), QStringLiteral("1") })
                 .code,
        0);
    // The test process itself holds the only slot.
    auto held = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("holder"), QStringLiteral("--slot"), QStringLiteral("--json") });
    QCOMPARE(held.code, 0);
    const qint64 fence
        = QJsonDocument::fromJson(held.out).object().value(QStringLiteral("fence")).toInteger();
    const QString order = m_dir->path() + QStringLiteral("/order");
    std::vector<QProcess*> waiters;
    for (int i = 0; i < 4; ++i) {
        waiters.push_back(startCli({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("w%1").arg(i), QStringLiteral("--timeout"), QStringLiteral("60"),
            QStringLiteral("--"), QStringLiteral("sh"), QStringLiteral("-c"),
            QStringLiteral("echo $TOLLGATE_CALLER >> \"$0\""), order }));
        QTRY_COMPARE_WITH_TIMEOUT(waitingCount(QStringLiteral("api")), i + 1, 30000);
    }
    QCOMPARE(cli({ QStringLiteral("release"), QStringLiteral("api"), QStringLiteral("--fence"),
                     QString::number(fence) })
                 .code,
        0);
    for (auto* w : waiters) {
        QVERIFY(w->waitForFinished(60000));
        QCOMPARE(w->exitCode(), 0);
    }
    QFile f(order);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), QByteArray("w0\nw1\nw2\nw3\n"));
}

void TestQuotaProcesses::raisedLimitAdmitsWaitingCallers()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("1"), QStringLiteral("--window"),
                     QStringLiteral("300") })
                 .code,
        0);
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("first") })
                 .code,
        0);
    QProcess* waiter
        = startCli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("second"), QStringLiteral("--timeout"), QStringLiteral("600") });
    QTRY_COMPARE_WITH_TIMEOUT(waitingCount(QStringLiteral("api")), 1, 30000);
    QCOMPARE(waiter->state(), QProcess::Running);
    // The window is 300 s, within the waiter's 600 s (room that comes only after its deadline
    // is refused at once), and it must be admitted within 60 s: only the new limit can do that.
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("2") })
                 .code,
        0);
    QVERIFY(waiter->waitForFinished(60000));
    QCOMPARE(waiter->exitCode(), 0);
}

void TestQuotaProcesses::killedOrInterruptedWaiterLeavesNoGhost()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--parallel"), QStringLiteral("1") })
                 .code,
        0);
    auto held = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("holder"), QStringLiteral("--slot"), QStringLiteral("--json") });
    const qint64 fence
        = QJsonDocument::fromJson(held.out).object().value(QStringLiteral("fence")).toInteger();
    QProcess* killed = startCli({ QStringLiteral("acquire"), QStringLiteral("api"),
        QStringLiteral("--caller"), QStringLiteral("killed"), QStringLiteral("--slot"),
        QStringLiteral("--timeout"), QStringLiteral("600") });
    QTRY_COMPARE_WITH_TIMEOUT(waitingCount(QStringLiteral("api")), 1, 30000);
    QProcess* interrupted = startCli({ QStringLiteral("acquire"), QStringLiteral("api"),
        QStringLiteral("--caller"), QStringLiteral("interrupted"), QStringLiteral("--slot"),
        QStringLiteral("--timeout"), QStringLiteral("600") });
    QTRY_COMPARE_WITH_TIMEOUT(waitingCount(QStringLiteral("api")), 2, 30000);
    killed->kill();
    QVERIFY(killed->waitForFinished(10000));
    ::kill(static_cast<pid_t>(interrupted->processId()), SIGINT); // Ctrl-C
    QVERIFY(interrupted->waitForFinished(10000));
    QCOMPARE(interrupted->exitCode(), 128 + SIGINT);

    // A new waiter behind the dead one's entry still gets the slot when it is released.
    QProcess* next = startCli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("next"), QStringLiteral("--slot"), QStringLiteral("--timeout"),
        QStringLiteral("30") });
    QTRY_VERIFY_WITH_TIMEOUT(
        providerStatus(QStringLiteral("api")).value(QStringLiteral("waiting")).toInt() >= 1, 30000);
    QCOMPARE(cli({ QStringLiteral("release"), QStringLiteral("api"), QStringLiteral("--fence"),
                     QString::number(fence) })
                 .code,
        0);
    QVERIFY(next->waitForFinished(30000));
    QCOMPARE(next->exitCode(), 0);
    QCOMPARE(waitingCount(QStringLiteral("api")), 0);
    bool cancelledRecorded = false;
    for (const auto& e : history())
        cancelledRecorded
            = cancelledRecorded || (e.type == tollgate::EventType::GaveUp && e.caller == "interrupted");
    QVERIFY(cancelledRecorded);
}

void TestQuotaProcesses::corruptStateIsSetAsideWithLimitsKept()
{
    QFETCH_GLOBAL(bool, redis);
    if (redis)
        QSKIP("state.bin is a directory home's file (a Redis home's lost state: tst_redisfaults)");
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("5"), QStringLiteral("--window"),
                     QStringLiteral("600") })
                 .code,
        0);
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("a") })
                 .code,
        0);
    {
        QFile f(m_home + QStringLiteral("/state.bin"));
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write("{ this is not a state }");
    }
    // status only reads: it reports the corrupt file and leaves it exactly where it is
    auto r = cli({ QStringLiteral("status") });
    QCOMPARE(r.code, 3);
    QVERIFY2(r.err.contains((m_home + QStringLiteral("/state.bin")).toUtf8()), r.err.constData());
    QVERIFY(QDir(m_home).entryList({ QStringLiteral("state.bin.corrupt-*") }).isEmpty());
    // the first transaction sets it aside, names both files and exits 3
    auto first = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("b"), QStringLiteral("--timeout"), QStringLiteral("0") });
    QCOMPARE(first.code, 3);
    QVERIFY2(first.err.contains("state.bin.corrupt-"), first.err.constData());
    const auto aside = QDir(m_home).entryList({ QStringLiteral("state.bin.corrupt-*") });
    QCOMPARE(aside.size(), 1);
    auto shown = cli({ QStringLiteral("limits"), QStringLiteral("show") });
    QCOMPARE(shown.code, 0);
    QVERIFY2(shown.out.contains("api: 5 requests per 600s"), shown.out.constData());
    // conservative: the lost window counts as full
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("b"), QStringLiteral("--timeout"), QStringLiteral("0") })
                 .code,
        1);
}

void TestQuotaProcesses::signalWhileWaitingForTheStoreLockAdmitsNothing_data()
{
    QTest::addColumn<bool>("run");
    QTest::addColumn<int>("signal");
    QTest::newRow("acquire, SIGTERM") << false << SIGTERM;
    QTest::newRow("run, SIGINT") << true << SIGINT;
    QTest::newRow("acquire, SIGHUP") << false << SIGHUP;
}

void TestQuotaProcesses::signalWhileWaitingForTheStoreLockAdmitsNothing()
{
    // A signal while `acquire`/`run` waits for state.lock (held by a process stopped in its
    // transaction, here the test) ends the wait at once, as one in the quota's queue does:
    // exit 128+N, nothing admitted, state.bin untouched, the command not run. It must not be
    // swallowed until the lock comes free (then admitted) or the store gives up (exit 3).
    QFETCH_GLOBAL(bool, redis);
    if (redis)
        QSKIP("state.lock is a directory home's file");
    QFETCH(bool, run);
    QFETCH(int, signal);
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("100") })
                 .code,
        0);
    const QString marker = m_dir->path() + QStringLiteral("/ran");
    const QString statePath = m_home + QStringLiteral("/state.bin");
    const QByteArray stateBefore = fileBytes(statePath);
    StateLockHeld lock(m_home);
    QVERIFY(lock.fd >= 0);
    QProcess* waiter = startCli(run
            ? QStringList { QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
                QStringLiteral("waiter"), QStringLiteral("--"), QStringLiteral("touch"), marker }
            : QStringList { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                QStringLiteral("waiter") });
    const qint64 pid = waiter->processId();
    QVERIFY(pid > 0);
    QVERIFY(seenOnFutex(pid)); // waiting for state.lock
    QCOMPARE(::kill(static_cast<pid_t>(pid), signal), 0);
    // The lock stays held until the command has ended.
    QVERIFY(waiter->waitForFinished(60000));
    QCOMPARE(waiter->exitStatus(), QProcess::NormalExit);
    QVERIFY2(waiter->exitCode() == 128 + signal, waiter->readAllStandardError().constData());
    QCOMPARE(fileBytes(statePath), stateBefore);
    lock.release();
    QVERIFY(!QFile::exists(marker));
    for (const auto& e : history())
        QVERIFY(!(e.type == tollgate::EventType::Admit && e.caller == "waiter"));
    QCOMPARE(waitingCount(QStringLiteral("api")), 0);
    // The home works on.
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("after") })
                 .code,
        0);
}

void TestQuotaProcesses::storeLockWaitEndsAtTheCommandsOwnTimeout_data()
{
    QTest::addColumn<QString>("timeout");
    QTest::newRow("a try") << QStringLiteral("0"); // waits FileQuotaStore::MIN_LOCK_WAIT
    QTest::newRow("2 s") << QStringLiteral("2");
}

void TestQuotaProcesses::storeLockWaitEndsAtTheCommandsOwnTimeout()
{
    // `acquire --timeout T` waits for a held state.lock until its own deadline (at least the
    // store's floor), not the store's 10 s; a lock still held then is the store's failure
    // (exit 3, "did not answer"), not a refusal. Judged by order, not durations: `report-ok`
    // waits with the store's own 10 s and already waits when the acquire starts, so the
    // acquire must end first, while the test still holds the lock.
    QFETCH_GLOBAL(bool, redis);
    if (redis)
        QSKIP("state.lock is a directory home's file");
    QFETCH(QString, timeout);
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("100") })
                 .code,
        0);
    StateLockHeld lock(m_home);
    QVERIFY(lock.fd >= 0);
    QProcess* patient = startCli({ QStringLiteral("report-ok"), QStringLiteral("api"),
        QStringLiteral("--caller"), QStringLiteral("patient") });
    const qint64 patientPid = patient->processId();
    QVERIFY(patientPid > 0);
    QVERIFY(seenOnFutex(patientPid));
    const Ran r = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("try"), QStringLiteral("--timeout"), timeout });
    QVERIFY2(stillRuns(patientPid), "the acquire waited as long as the store's own timeout");
    QVERIFY2(r.code == 3, r.err.constData());
    QVERIFY2(r.err.contains("did not answer") && r.err.contains("state.lock"), r.err.constData());
    lock.release();
    QVERIFY(patient->waitForFinished(60000));
    QCOMPARE(patient->exitCode(), 0);
    for (const auto& e : history())
        QVERIFY(!(e.type == tollgate::EventType::Admit && e.caller == "try"));
}

QTEST_GUILESS_MAIN(TestQuotaProcesses)
#include "tst_quotaprocesses.moc"
