// Two "hosts" sharing one Redis home: each is its own network and pid namespace (with its own
// /proc), joined to a private "lab" network namespace by a veth pair; redis-server listens in
// the lab. Nothing here touches the machine's own network. Callers are the real CLI, run
// inside each host with nsenter, so their pids, pid namespaces — and so their host ids — are
// those of the host.
//
// Shown: callers of both hosts share one quota with no window or parallel overrun; a
// redis-server stall longer than the slot lease lets no caller of one host run beside the other
// host's holders; killing every process of one host (its pid namespace's init) gives its slots
// back to the other host within one lease. Skipped, saying why, where namespaces cannot be made (not root, no
// CAP_SYS_ADMIN, no iproute2).

#include "helpers/redisserver.h"
#include "testsupport.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <algorithm>
#include <csignal>
#include <unistd.h>

namespace {

constexpr int TIMEOUT_MS = 60000;

using Ran = TestSupport::Ran;

Ran run(const QString& program, const QStringList& args, int limitMs = TIMEOUT_MS)
{
    return TestSupport::run(program, args, limitMs);
}

// A namespace kept alive by a `sleep` under `unshare`; `pid` is a process inside it (the
// sleep, pid 1 of a new pid namespace).
struct Namespace
{
    std::unique_ptr<QProcess> unshare;
    qint64 pid = 0;

    bool start(const QStringList& what, QString& why)
    {
        unshare = std::make_unique<QProcess>();
        unshare->start(QStringLiteral("unshare"),
            what
                + QStringList { QStringLiteral("--fork"), QStringLiteral("--kill-child"),
                    QStringLiteral("sleep"), QStringLiteral("3600") });
        if (!unshare->waitForStarted(10000)) {
            why = QStringLiteral("unshare did not start");
            return false;
        }
        // The child (the sleep) appears in /proc/<unshare>/task/<unshare>/children.
        const QString children = QStringLiteral("/proc/%1/task/%1/children").arg(unshare->processId());
        for (int i = 0; i < 1000 && pid == 0; ++i) {
            if (unshare->state() != QProcess::Running) {
                why = QString::fromLocal8Bit(unshare->readAllStandardError()).trimmed();
                return false;
            }
            QFile f(children);
            if (f.open(QIODevice::ReadOnly))
                pid = f.readAll().trimmed().split(' ').value(0).toLongLong();
            if (pid == 0)
                QThread::msleep(10); // poll with a deadline (10 s): the fork is a moment away
        }
        if (pid == 0)
            why = QStringLiteral("unshare made no child");
        return pid != 0;
    }
    void kill()
    {
        if (pid > 0)
            ::kill(static_cast<pid_t>(pid), SIGKILL); // init of a pid namespace: all of it dies
        if (unshare) {
            unshare->waitForFinished(10000);
            unshare.reset();
        }
        pid = 0;
    }
    ~Namespace() { kill(); }
};

} // namespace

class TestRedisMultiHost final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void cleanupTestCase();
    void twoHostsShareOneQuotaWithoutOverrun();
    void aServerStallUnderParallelOverrunsNothing();
    void aSilentHeadIsPassedWithinSecondsAndKeepsItsPlace();
    void killingAHostReleasesItsSlotsWithinOneLease();

private:
    // The nsenter arguments that run the CLI inside host `h` (0 or 1) with m_home. TMPDIR: a
    // run's retry-after file, which nobody may remove once its host is killed whole.
    QStringList inHost(int h, const QStringList& tollgateArgs) const
    {
        return QStringList { QStringLiteral("-t"), QString::number(m_hosts[h].pid), QStringLiteral("-n"),
            QStringLiteral("-p"), QStringLiteral("-m"), QStringLiteral("--"), QStringLiteral("env"),
            QStringLiteral("TOLLGATE_HOME=") + m_home, QStringLiteral("TMPDIR=") + m_dir.path(),
            QStringLiteral(TOLLGATE_CLI_PATH) }
        + tollgateArgs;
    }
    Ran tollgate(int h, const QStringList& args, int limitMs = TIMEOUT_MS) const
    {
        return run(QStringLiteral("nsenter"), inHost(h, args), limitMs);
    }
    QJsonObject status(int h) const
    {
        const Ran r = tollgate(h, { QStringLiteral("status"), QStringLiteral("--json") });
        return QJsonDocument::fromJson(r.out).object();
    }
    bool setup(QString& why);

    Namespace m_lab;
    Namespace m_hosts[2];
    std::unique_ptr<QProcess> m_redis;
    QString m_home;
    QTemporaryDir m_dir;
    int m_homes = 0;
};

bool TestRedisMultiHost::setup(QString& why)
{
    if (::geteuid() != 0) {
        why = QStringLiteral("needs root to make network and pid namespaces");
        return false;
    }
    for (const char* tool : { "unshare", "nsenter", "ip" }) {
        if (QStandardPaths::findExecutable(QString::fromLatin1(tool)).isEmpty()
            && !QFile::exists(QStringLiteral("/usr/sbin/") + QLatin1String(tool))
            && !QFile::exists(QStringLiteral("/sbin/") + QLatin1String(tool))) {
            why = QStringLiteral("%1 is not installed (util-linux, iproute2)").arg(QLatin1String(tool));
            return false;
        }
    }
    if (RedisServer::binary().isEmpty()) {
        why = QStringLiteral("redis-server is not installed");
        return false;
    }
    if (!m_lab.start({ QStringLiteral("--net") }, why))
        return false;
    auto inLab = [&](const QStringList& args) {
        return run(QStringLiteral("nsenter"),
            QStringList {
                QStringLiteral("-t"), QString::number(m_lab.pid), QStringLiteral("-n"), QStringLiteral("--") }
                + args);
    };
    if (inLab({ QStringLiteral("ip"), QStringLiteral("link"), QStringLiteral("set"), QStringLiteral("lo"),
                  QStringLiteral("up") })
            .code
        != 0) {
        why = QStringLiteral("cannot configure a network namespace");
        return false;
    }
    for (int h = 0; h < 2; ++h) {
        if (!m_hosts[h].start(
                { QStringLiteral("--net"), QStringLiteral("--pid"), QStringLiteral("--mount-proc") }, why))
            return false;
        const QString lab = QStringLiteral("10.77.%1.1").arg(h + 1);
        const QString host = QStringLiteral("10.77.%1.2").arg(h + 1);
        const QString veth = QStringLiteral("tg%1").arg(h);
        Ran r = inLab({ QStringLiteral("ip"), QStringLiteral("link"), QStringLiteral("add"), veth,
            QStringLiteral("type"), QStringLiteral("veth"), QStringLiteral("peer"), QStringLiteral("name"),
            QStringLiteral("eth0"), QStringLiteral("netns"), QString::number(m_hosts[h].pid) });
        if (r.code != 0) {
            why = QStringLiteral("cannot make a veth pair: ") + QString::fromLocal8Bit(r.err).trimmed();
            return false;
        }
        inLab({ QStringLiteral("ip"), QStringLiteral("addr"), QStringLiteral("add"),
            lab + QStringLiteral("/24"), QStringLiteral("dev"), veth });
        inLab({ QStringLiteral("ip"), QStringLiteral("link"), QStringLiteral("set"), veth,
            QStringLiteral("up") });
        for (const QStringList& cmd :
            { QStringList { QStringLiteral("ip"), QStringLiteral("addr"), QStringLiteral("add"),
                  host + QStringLiteral("/24"), QStringLiteral("dev"), QStringLiteral("eth0") },
                QStringList { QStringLiteral("ip"), QStringLiteral("link"), QStringLiteral("set"),
                    QStringLiteral("eth0"), QStringLiteral("up") },
                QStringList { QStringLiteral("ip"), QStringLiteral("link"), QStringLiteral("set"),
                    QStringLiteral("lo"), QStringLiteral("up") } }) {
            r = run(QStringLiteral("nsenter"),
                QStringList { QStringLiteral("-t"), QString::number(m_hosts[h].pid), QStringLiteral("-n"),
                    QStringLiteral("--") }
                    + cmd);
            if (r.code != 0) {
                why = QStringLiteral("cannot configure a host's network: ")
                    + QString::fromLocal8Bit(r.err).trimmed();
                return false;
            }
        }
    }
    // redis-server in the lab, on both veth addresses (nsenter execs it: its pid is ours to kill).
    m_redis = std::make_unique<QProcess>();
    m_redis->start(QStringLiteral("nsenter"),
        { QStringLiteral("-t"), QString::number(m_lab.pid), QStringLiteral("-n"), QStringLiteral("--"),
            RedisServer::binary(), QStringLiteral("--bind"), QStringLiteral("10.77.1.1 10.77.2.1"),
            QStringLiteral("--port"), QStringLiteral("6379"), QStringLiteral("--save"), QString(),
            QStringLiteral("--appendonly"), QStringLiteral("no"), QStringLiteral("--dir"), m_dir.path(),
            QStringLiteral("--protected-mode"), QStringLiteral("no"), QStringLiteral("--maxmemory-policy"),
            QStringLiteral("noeviction") });
    if (!m_redis->waitForStarted(10000)) {
        why = QStringLiteral("redis-server did not start");
        return false;
    }
    return true;
}

void TestRedisMultiHost::initTestCase()
{
    QVERIFY(m_dir.isValid());
    QString why;
    if (!setup(why)) {
        cleanupTestCase();
        QSKIP(qPrintable(QStringLiteral("namespaces cannot be made here: ") + why));
    }
}

void TestRedisMultiHost::cleanupTestCase()
{
    if (m_redis) {
        m_redis->kill();
        m_redis->waitForFinished(10000);
        m_redis.reset();
    }
    for (auto& h : m_hosts)
        h.kill();
    m_lab.kill(); // its veth ends go with it
}

void TestRedisMultiHost::twoHostsShareOneQuotaWithoutOverrun()
{
    // Host 0 reaches Redis at 10.77.1.1, host 1 at 10.77.2.1: one server, one home.
    m_home = QStringLiteral("redis://10.77.1.1:6379?prefix=share%1").arg(++m_homes);
    QElapsedTimer ready;
    ready.start();
    Ran r;
    for (;;) { // redis-server is up a moment after it started: poll with a deadline
        r = tollgate(0,
            { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                QStringLiteral("--requests"), QStringLiteral("8"), QStringLiteral("--window"),
                QStringLiteral("600"), QStringLiteral("--parallel"), QStringLiteral("2") });
        if (r.code != 3 || ready.elapsed() > 10000)
            break;
        QThread::msleep(50);
    }
    QVERIFY2(r.code == 0, r.err.constData());
    const QString log = m_dir.path() + QStringLiteral("/share.log");
    // Six callers per host; each holds its slot for a while and logs when it starts and ends.
    std::vector<std::unique_ptr<QProcess>> callers;
    for (int h = 0; h < 2; ++h) {
        for (int i = 0; i < 6; ++i) {
            QString home = m_home;
            if (h == 1)
                home.replace(QStringLiteral("10.77.1.1"), QStringLiteral("10.77.2.1"));
            auto p = std::make_unique<QProcess>();
            QStringList args = inHost(h, {});
            args.replaceInStrings(QRegularExpression(QStringLiteral("^TOLLGATE_HOME=.*")),
                QStringLiteral("TOLLGATE_HOME=") + home);
            args << QStringLiteral("run") << QStringLiteral("api") << QStringLiteral("--caller")
                 << QStringLiteral("h%1-%2").arg(h).arg(i) << QStringLiteral("--timeout")
                 << QStringLiteral("8") << QStringLiteral("--") << QStringLiteral("sh")
                 << QStringLiteral("-c")
                 << QStringLiteral(
                        "echo \"+ $(date +%s%N)\" >> %1; sleep 0.3; echo \"- $(date +%s%N)\" >> %1")
                        .arg(log);
            p->start(QStringLiteral("nsenter"), args);
            QVERIFY(p->waitForStarted(10000));
            callers.push_back(std::move(p));
        }
    }
    int admitted = 0;
    int refused = 0;
    for (auto& p : callers) {
        QVERIFY(p->waitForFinished(TIMEOUT_MS));
        if (p->exitCode() == 0)
            ++admitted;
        else if (p->exitCode() == 1)
            ++refused; // timed out waiting: the window was used up
        else
            QFAIL(p->readAllStandardError().constData());
    }
    // The window holds 8 for both hosts together: exactly 8 ran, the other 4 were refused.
    QCOMPARE(admitted, 8);
    QCOMPARE(refused, 4);
    // Never more than 2 at once across both hosts.
    QFile f(log);
    QVERIFY(f.open(QIODevice::ReadOnly));
    std::vector<std::pair<qint64, int>> edges;
    for (const QByteArray& line : f.readAll().split('\n')) {
        if (line.size() > 2)
            edges.emplace_back(line.mid(2).toLongLong(), line[0] == '+' ? 1 : -1);
    }
    QCOMPARE(edges.size(), std::size_t(16));
    const int most = TestSupport::peakOverlap(edges);
    QVERIFY2(most <= 2, qPrintable(QStringLiteral("%1 held a slot at once").arg(most)));
    // Host 1 sees the same home through its own address.
    m_home.replace(QStringLiteral("10.77.1.1"), QStringLiteral("10.77.2.1"));
    const QJsonArray providers = status(1).value(QStringLiteral("providers")).toArray();
    QCOMPARE(providers.at(0).toObject().value(QStringLiteral("used_requests")).toInt(), 8);
}

// Issue 27, item 1: `--parallel 2`; host 0 holds both slots with two `run`s; host 1 loops
// `run -- (log a line)`; redis-server is stopped (SIGSTOP) for longer than the slot lease. The
// leases run on the server's clock, which runs on meanwhile. Before, host 1's first call after
// the stall found both leases run out and ran its command beside host 0's two. The holders'
// runners are stopped through the stall and a moment after it, so that host 1's calls are the
// first served (the race a looping caller wins against a renewal every few seconds). The lease
// is 3 s (TOLLGATE_TEST_LEASE_MS) and the stall 8 s, nearly three leases, to keep the test short
// (the 35 s stall of a 30 s lease is the same, ten times slower).
void TestRedisMultiHost::aServerStallUnderParallelOverrunsNothing()
{
    m_home = QStringLiteral("redis://10.77.1.1:6379?prefix=stall%1").arg(++m_homes);
    QElapsedTimer ready;
    ready.start();
    Ran r;
    for (;;) { // redis-server may still be starting (this test run alone): poll with a deadline
        r = tollgate(0,
            { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                QStringLiteral("--requests"), QStringLiteral("100000"), QStringLiteral("--parallel"),
                QStringLiteral("2") });
        if (r.code != 3 || ready.elapsed() > 10000)
            break;
        QThread::msleep(50);
    }
    QVERIFY2(r.code == 0, r.err.constData());
    const QByteArray tag = QByteArray("stall-holder-") + QByteArray::number(::getpid());
    std::vector<std::unique_ptr<QProcess>> holders;
    for (int i = 0; i < 2; ++i) {
        auto p = std::make_unique<QProcess>();
        QStringList args = inHost(0,
            { QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
                QString::fromLatin1(tag), QStringLiteral("--timeout"), QStringLiteral("10"),
                QStringLiteral("--"), QStringLiteral("sleep"), QStringLiteral("600") });
        args.insert(args.indexOf(QStringLiteral("env")) + 1, QStringLiteral("TOLLGATE_TEST_LEASE_MS=3000"));
        p->start(QStringLiteral("nsenter"), args);
        QVERIFY(p->waitForStarted(10000));
        holders.push_back(std::move(p));
    }
    const QString homeB = QString(m_home).replace(QStringLiteral("10.77.1.1"), QStringLiteral("10.77.2.1"));
    auto slotsFromB = [&] {
        const QString saved = m_home;
        m_home = homeB;
        const QJsonObject s = status(1);
        m_home = saved;
        QStringList callers;
        for (const auto& slot : s.value(QStringLiteral("providers"))
                                    .toArray()
                                    .at(0)
                                    .toObject()
                                    .value(QStringLiteral("slots"))
                                    .toArray())
            callers << slot.toObject().value(QStringLiteral("caller")).toString();
        return callers;
    };
    const QStringList both { QString::fromLatin1(tag), QString::fromLatin1(tag) };
    QTRY_COMPARE_WITH_TIMEOUT(slotsFromB(), both, 20000);
    // The runners (and their keepers) of host 0, as this namespace numbers them.
    std::vector<pid_t> runners;
    for (const QString& entry : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        QFile f(QStringLiteral("/proc/%1/cmdline").arg(entry));
        if (!f.open(QIODevice::ReadOnly))
            continue;
        const QByteArray cmd = f.readAll();
        if (cmd.startsWith(QByteArray(TOLLGATE_CLI_PATH) + '\0') && cmd.contains(tag))
            runners.push_back(static_cast<pid_t>(entry.toLongLong()));
    }
    QVERIFY(!runners.empty());

    // Host 1's loop: a try after another until told to stop; each command that runs logs a line.
    const QString log = m_dir.path() + QStringLiteral("/stall.log");
    const QString stop = m_dir.path() + QStringLiteral("/stall.stop");
    QProcess loop;
    loop.start(QStringLiteral("nsenter"),
        { QStringLiteral("-t"), QString::number(m_hosts[1].pid), QStringLiteral("-n"), QStringLiteral("-p"),
            QStringLiteral("-m"), QStringLiteral("--"), QStringLiteral("env"),
            QStringLiteral("TOLLGATE_HOME=") + homeB, QStringLiteral("TMPDIR=") + m_dir.path(),
            QStringLiteral("sh"), QStringLiteral("-c"),
            QStringLiteral("n=0; while [ ! -e \"$1\" ]; do \"$2\" run api --caller b --timeout 0 -- sh -c "
                           "'echo ran >> \"$0\"' \"$3\" 2>/dev/null; n=$((n+1)); done; echo $n"),
            QStringLiteral("sh"), stop, QStringLiteral(TOLLGATE_CLI_PATH), log });
    QVERIFY(loop.waitForStarted(10000));

    for (pid_t pid : runners)
        ::kill(pid, SIGSTOP);
    const pid_t redis = static_cast<pid_t>(m_redis->processId());
    ::kill(redis, SIGSTOP);
    QTest::qWait(8000); // the stall under test
    ::kill(redis, SIGCONT);
    QTest::qWait(1500); // host 1's tries come first
    for (pid_t pid : runners)
        ::kill(pid, SIGCONT);
    QTest::qWait(3000); // and go on beside the renewals again
    QFile(stop).open(QIODevice::WriteOnly);
    QVERIFY(loop.waitForFinished(TIMEOUT_MS));
    const int tries = loop.readAllStandardOutput().trimmed().toInt();
    QVERIFY2(tries > 3, qPrintable(QStringLiteral("host 1 tried %1 times").arg(tries)));
    QVERIFY2(!QFile::exists(log), "host 1 ran a third command beside host 0's two after the stall");
    QCOMPARE(slotsFromB(), both);
    for (pid_t pid : runners)
        ::kill(pid, SIGKILL); // each keeper takes its command along
    for (auto& p : holders)
        p->waitForFinished(10000);
}

// Issue 27, item 6: the head of the queue, on host 1, stops answering (SIGSTOP: its
// connection stays open, so its wake-up still reaches a subscriber, as when its host dies
// with the connection up). A slot frees: the waiter behind it, on host 0, must not sit out
// the head's lease (180 s; it was 15 s, and a free slot sat idle that long): it is admitted
// within its --timeout of 10 s. The silent head keeps its place: resumed, it is admitted
// before a caller that queued after it.
void TestRedisMultiHost::aSilentHeadIsPassedWithinSecondsAndKeepsItsPlace()
{
    m_home = QStringLiteral("redis://10.77.1.1:6379?prefix=head%1").arg(++m_homes);
    const QString homeB = QString(m_home).replace(QStringLiteral("10.77.1.1"), QStringLiteral("10.77.2.1"));
    Ran r = tollgate(0,
        { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
            QStringLiteral("--requests"), QStringLiteral("100000"), QStringLiteral("--parallel"),
            QStringLiteral("1") });
    QVERIFY2(r.code == 0, r.err.constData());
    auto provider = [&] { return status(0).value(QStringLiteral("providers")).toArray().at(0).toObject(); };
    auto start = [&](int h, const QString& caller, const QString& timeout, const QStringList& command) {
        auto p = std::make_unique<QProcess>();
        QString saved = m_home;
        if (h == 1)
            m_home = homeB;
        p->start(QStringLiteral("nsenter"),
            inHost(h,
                QStringList { QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
                    caller, QStringLiteral("--timeout"), timeout, QStringLiteral("--") }
                    + command));
        m_home = saved;
        return p;
    };
    auto holdSlot = [&](const QString& caller) {
        return start(0, caller, QStringLiteral("30"), { QStringLiteral("sleep"), QStringLiteral("600") });
    };
    auto fenceOf = [&](const QString& caller) -> qint64 {
        for (const auto& s : provider().value(QStringLiteral("slots")).toArray())
            if (s.toObject().value(QStringLiteral("caller")).toString() == caller)
                return s.toObject().value(QStringLiteral("fence")).toInteger();
        return 0;
    };
    auto release = [&](const QString& caller) {
        const Ran rel = tollgate(0,
            { QStringLiteral("release"), QStringLiteral("api"), QStringLiteral("--fence"),
                QString::number(fenceOf(caller)) });
        return rel.code == 0;
    };
    auto waiting = [&] { return provider().value(QStringLiteral("waiting")).toInt(); };
    // nsenter forks the command into the host's pid namespace: the command is its child.
    auto commandPid = [](const QProcess& p) -> pid_t {
        QFile f(QStringLiteral("/proc/%1/task/%1/children").arg(p.processId()));
        return f.open(QIODevice::ReadOnly)
            ? static_cast<pid_t>(f.readAll().trimmed().split(' ').value(0).toInt())
            : 0;
    };
    auto holder = holdSlot(QStringLiteral("holder"));
    QVERIFY(holder->waitForStarted(10000));
    QTRY_VERIFY_WITH_TIMEOUT(fenceOf(QStringLiteral("holder")) != 0, 20000);

    auto head = start(1, QStringLiteral("head"), QStringLiteral("120"), { QStringLiteral("true") });
    QVERIFY(head->waitForStarted(10000));
    QTRY_COMPARE_WITH_TIMEOUT(waiting(), 1, 20000);
    pid_t headPid = 0;
    QTRY_VERIFY_WITH_TIMEOUT((headPid = commandPid(*head)) > 0, 10000);
    auto second = start(0, QStringLiteral("second"), QStringLiteral("10"), { QStringLiteral("true") });
    QVERIFY(second->waitForStarted(10000));
    QTRY_COMPARE_WITH_TIMEOUT(waiting(), 2, 20000);

    QCOMPARE(::kill(headPid, SIGSTOP), 0);
    QVERIFY(release(QStringLiteral("holder")));
    QVERIFY2(second->waitForFinished(60000), "the second waiter never ended");
    QVERIFY2(second->exitCode() == 0, second->readAllStandardError().constData());
    QVERIFY2(head->state() == QProcess::Running, "the stopped head ended");

    // The head is still queued, first; a newcomer queues behind it. Resumed, the head is
    // admitted first when the slot frees.
    auto holder2 = holdSlot(QStringLiteral("holder2"));
    QTRY_VERIFY_WITH_TIMEOUT(fenceOf(QStringLiteral("holder2")) != 0, 20000);
    auto third = start(0, QStringLiteral("third"), QStringLiteral("60"), { QStringLiteral("true") });
    QTRY_COMPARE_WITH_TIMEOUT(waiting(), 2, 20000);
    // nsenter stops itself when its child stops (and continues it when continued): both.
    QCOMPARE(::kill(static_cast<pid_t>(head->processId()), SIGCONT), 0);
    QCOMPARE(::kill(headPid, SIGCONT), 0);
    QVERIFY(release(QStringLiteral("holder2")));
    if (!head->waitForFinished(60000)) {
        const Ran h = tollgate(0, { QStringLiteral("history") });
        const Ran st = tollgate(0, { QStringLiteral("status") });
        QFAIL(qPrintable(QStringLiteral("the resumed head never ended: ")
            + QString::fromLocal8Bit(
                head->readAllStandardError() + "\n" + st.out + "\n" + h.out.right(3000))));
    }
    QVERIFY2(head->exitCode() == 0, head->readAllStandardError().constData());
    QVERIFY2(third->waitForFinished(60000), "the third waiter never ended");
    QVERIFY2(third->exitCode() == 0, third->readAllStandardError().constData());
    r = tollgate(0, { QStringLiteral("history"), QStringLiteral("--json") });
    QStringList admitted;
    for (const auto& v : QJsonDocument::fromJson(r.out).array()) {
        const QJsonObject e = v.toObject();
        if (e.value(QStringLiteral("type")).toString() == QStringLiteral("admit"))
            admitted << e.value(QStringLiteral("caller")).toString();
    }
    QCOMPARE(admitted,
        (QStringList { QStringLiteral("holder"), QStringLiteral("second"), QStringLiteral("holder2"),
            QStringLiteral("head"), QStringLiteral("third") }));
    for (auto* p : { holder.get(), holder2.get() }) {
        p->kill(); // nsenter; its `run` holds a released slot, gone with host 0 in the next test
        p->waitForFinished(10000);
    }
}

void TestRedisMultiHost::killingAHostReleasesItsSlotsWithinOneLease()
{
    m_home = QStringLiteral("redis://10.77.1.1:6379?prefix=kill%1").arg(++m_homes);
    Ran r = tollgate(0,
        { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
            QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
            QStringLiteral("2") });
    QVERIFY2(r.code == 0, r.err.constData());
    // Host 0 takes both slots with `run` (which renews a 30 s lease) and hangs on to them.
    std::vector<std::unique_ptr<QProcess>> holders;
    for (int i = 0; i < 2; ++i) {
        auto p = std::make_unique<QProcess>();
        p->start(QStringLiteral("nsenter"),
            inHost(0,
                { QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
                    QStringLiteral("doomed"), QStringLiteral("--timeout"), QStringLiteral("10"),
                    QStringLiteral("--"), QStringLiteral("sleep"), QStringLiteral("600") }));
        QVERIFY(p->waitForStarted(10000));
        holders.push_back(std::move(p));
    }
    const QString homeB = QString(m_home).replace(QStringLiteral("10.77.1.1"), QStringLiteral("10.77.2.1"));
    auto slotsHeld = [&] {
        QString saved = m_home;
        m_home = homeB;
        const QJsonObject s = status(1);
        m_home = saved;
        return s.value(QStringLiteral("providers"))
            .toArray()
            .at(0)
            .toObject()
            .value(QStringLiteral("slots"))
            .toArray();
    };
    QTRY_COMPARE_WITH_TIMEOUT(slotsHeld().size(), 2, 20000);
    // From host 1 the holders are another host's: held by their lease, not judged by pid.
    m_home = homeB;
    r = tollgate(1,
        { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("b"),
            QStringLiteral("--slot"), QStringLiteral("--timeout"), QStringLiteral("0") });
    QCOMPARE(r.code, 1);

    // Every process of host 0 dies at once (its pid namespace's init is killed).
    m_hosts[0].kill();
    for (auto& p : holders)
        p->waitForFinished(10000);
    // A waiter on host 1 gets a slot once the dead host's lease ran out: within one lease
    // (30 s), well inside its own deadline.
    r = tollgate(1,
        { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("b"),
            QStringLiteral("--slot"), QStringLiteral("--timeout"), QStringLiteral("45") },
        90000);
    QVERIFY2(r.code == 0, r.err.constData());
    // ... because host 1 judged them by their lease, as the history says.
    r = tollgate(1, { QStringLiteral("history"), QStringLiteral("--json") });
    QVERIFY2(r.out.contains("lease expired"), r.out.right(2000).constData());
}

QTEST_GUILESS_MAIN(TestRedisMultiHost)
#include "tst_redismultihost.moc"
