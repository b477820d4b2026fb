// Who holds a parallel slot, and for how long — across real processes and real pid
// namespaces: the command of `tollgate run` dies with it (a SIGKILLed run leaves no command
// running without a slot), a holder in another pid namespace keeps its slot by renewing a
// lease and loses it when it stops, and a command that does not exist spends nothing.
// The evidence is taken outside Tollgate: the commands' own marker files and /proc.

#include "backend/localquotabackend.h"
#include "base/systemclock.h"
#include "history/historyreader.h"
#include "store/filequotastore.h"
#include "system/processprobe.h"
#include "testsupport.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <csignal>
#include <unistd.h>

class TestHolders final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void cleanup();
    void killedRunTakesItsCommandAlong_data();
    void killedRunTakesItsCommandAlong();
    void missingCommandSpendsNothing();
    void aSlotForAPidThatDoesNotRunSpendsNothing();
    void aSlotTakenInACommandSubstitutionIsTheScripts_data();
    void aSlotTakenInACommandSubstitutionIsTheScripts();
    void theKeeperChangesNothingForTheCommand();
    void retryFilesOfRunsKilledWholeAreRemovedLater();
    void holderInAnotherPidNamespaceKeepsItsSlotWhileItRenews();
    void holderInAnotherTimeNamespaceIsNotTakenForDead();
    void anotherPidNamespaceIsAnotherHost();
    void runningHoldersTakeBackTheSlotsOfALostState();
    void aSlotHandedToAWaiterWhoseLeaveFailedIsGivenBackNextTime();
    void aSlotHandedToAWaiterWhoseLeaveFailedIsGivenBackWhenItsBackendGoes();

private:
    struct Ran
    {
        int code = -1;
        QByteArray out;
        QByteArray err;
    };
    QStringList withHome(QStringList args) const
    {
        args.insert(std::min<qsizetype>(1, args.size()), QStringLiteral("--home"));
        args.insert(std::min<qsizetype>(2, args.size()), m_home);
        return args;
    }
    Ran cli(const QStringList& args) const;
    QProcess* start(const QString& program, const QStringList& args, const QStringList& env = {});
    QJsonObject providerStatus(const QString& provider) const;
    int waitingCount(const QString& provider) const
    {
        return providerStatus(provider).value(QStringLiteral("queue")).toArray().size();
    }
    std::vector<tollgate::HistoryEvent> history() const;
    // Pids (as this test sees them) whose argv is exactly `argv`, or starts with it.
    static std::vector<qint64> pidsOf(const QByteArrayList& argv, bool prefix = false);
    static bool gone(qint64 pid)
    {
        return tollgate::ProcessProbe().liveness(pid, std::nullopt) == tollgate::Liveness::Dead;
    }
    // A sleep whose argument names it uniquely, so the test can find it in /proc.
    QString uniqueSleep() { return QStringLiteral("3600.%1%2").arg(::getpid()).arg(++m_counter); }
    static bool canUnsharePid();
    // A library waiter of this process that a release handed the slot of `api` (parallel 1)
    // while it waited, and whose leave then failed (another process held state.lock through
    // it): its backend in `out`, one leave pending, the slot still its own.
    void handedSlotWithItsLeavePending(std::unique_ptr<tollgate::LocalQuotaBackend>& out);
    QStringList slotCallers(const QString& provider) const;
    // The history's "given back" release and the give-up of `caller`, both there.
    bool gaveBackAndGaveUp(const std::string& caller) const;

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
    std::vector<std::unique_ptr<QProcess>> m_procs;
    std::vector<qint64> m_leftovers; // commands to kill should a run not take them along
    int m_counter = 0;
    tollgate::SystemClock m_clock;
    tollgate::ProcessProbe m_probe;
};

void TestHolders::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->path() + QStringLiteral("/home");
}

void TestHolders::cleanup()
{
    for (auto& p : m_procs) {
        if (p->state() != QProcess::NotRunning) {
            p->kill();
            p->waitForFinished(5000);
        }
    }
    m_procs.clear();
    for (qint64 pid : m_leftovers) {
        if (!gone(pid))
            ::kill(static_cast<pid_t>(pid), SIGKILL);
    }
    m_leftovers.clear();
}

TestHolders::Ran TestHolders::cli(const QStringList& args) const
{
    QProcess p;
    p.start(QStringLiteral(TOLLGATE_CLI_PATH), withHome(args));
    if (!p.waitForFinished(120000))
        qFatal("tollgate did not finish");
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
        p.readAllStandardError() };
}

QProcess* TestHolders::start(const QString& program, const QStringList& args, const QStringList& env)
{
    auto p = std::make_unique<QProcess>();
    if (!env.isEmpty()) {
        QStringList e = QProcess::systemEnvironment();
        e << env;
        p->setEnvironment(e);
    }
    p->start(program, args);
    p->waitForStarted();
    m_procs.push_back(std::move(p));
    return m_procs.back().get();
}

QJsonObject TestHolders::providerStatus(const QString& provider) const
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

std::vector<tollgate::HistoryEvent> TestHolders::history() const
{
    tollgate::HistoryReader reader(m_home.toStdString());
    auto b = reader.poll();
    return b ? b->events : std::vector<tollgate::HistoryEvent> {};
}

std::vector<qint64> TestHolders::pidsOf(const QByteArrayList& argv, bool prefix)
{
    std::vector<qint64> out;
    const QByteArray want = argv.join('\0');
    for (const QString& entry : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        bool ok = false;
        const qint64 pid = entry.toLongLong(&ok);
        if (!ok)
            continue;
        QFile f(QStringLiteral("/proc/%1/cmdline").arg(pid));
        if (!f.open(QIODevice::ReadOnly))
            continue;
        QByteArray cmd = f.readAll();
        if (cmd.endsWith('\0'))
            cmd.chop(1);
        if (cmd == want || (prefix && cmd.startsWith(want + '\0')))
            out.push_back(pid);
    }
    return out;
}

// `fence=$(tollgate acquire --slot ... 2>/dev/null)`: with the redirection bash runs tollgate
// in a subshell that exits as soon as tollgate does. The slot is the script's (it makes the
// call after), not the subshell's: with --parallel 1 nobody else is admitted while the script
// goes on, and the slot is reclaimed once the script ends. A subshell left running by itself
// (`( ... ) &`, its script gone) whose output goes to the same pipe as the script's keeps the
// slot as its own, as before.
void TestHolders::aSlotTakenInACommandSubstitutionIsTheScripts_data()
{
    QTest::addColumn<QString>("script"); // $0 the CLI, $1 the home, $2 a file for the answer, $3 "go"
    QTest::addColumn<bool>("scriptHolds"); // else the subshell
    const QString acquire = QStringLiteral("\"$0\" acquire api --caller s --slot --timeout 20 --home \"$1\"");
    const QString waitGo = QStringLiteral("while [ ! -e \"$3\" ]; do sleep 0.05; done");
    QTest::newRow("$(... 2>/dev/null)")
        << QStringLiteral("out=$(%1 2>/dev/null) || exit 3; echo \"$out\" > \"$2\"; %2").arg(acquire, waitGo) << true;
    QTest::newRow("$(... | cat)")
        << QStringLiteral("out=$(%1 | cat) || exit 3; echo \"$out\" > \"$2\"; %2").arg(acquire, waitGo) << true;
    QTest::newRow("$($(...))")
        << QStringLiteral("out=$(echo $(%1 2>/dev/null)) || exit 3; echo \"$out\" > \"$2\"; %2").arg(acquire, waitGo)
        << true;
    QTest::newRow("( ... ) & exit")
        << QStringLiteral("( %1 > \"$2.part\" && mv \"$2.part\" \"$2\"; %2 ) & exit 0").arg(acquire, waitGo) << false;
}

void TestHolders::aSlotTakenInACommandSubstitutionIsTheScripts()
{
    QFETCH(QString, script);
    QFETCH(bool, scriptHolds);
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"), QStringLiteral("--requests"),
                     QStringLiteral("1000"), QStringLiteral("--window"), QStringLiteral("60"), QStringLiteral("--parallel"),
                     QStringLiteral("1") })
                 .code,
        0);
    const QString got = m_dir->path() + QStringLiteral("/got");
    const QString go = m_dir->path() + QStringLiteral("/go");
    QProcess* sh = start(QStringLiteral("bash"),
        { QStringLiteral("-c"), script, QStringLiteral(TOLLGATE_CLI_PATH), m_home, got, go });
    QTRY_VERIFY_WITH_TIMEOUT(QFileInfo(got).size() > 0, 30000);
    QVERIFY2(QFile(got).open(QIODevice::ReadOnly), qPrintable(got));
    const auto slots = providerStatus(QStringLiteral("api")).value(QStringLiteral("slots")).toArray();
    QCOMPARE(slots.size(), 1);
    const qint64 holder = slots.first().toObject().value(QStringLiteral("pid")).toInteger();
    if (scriptHolds) {
        QCOMPARE(holder, sh->processId());
    } else {
        QVERIFY(holder != sh->processId());
        QTRY_VERIFY_WITH_TIMEOUT(sh->state() == QProcess::NotRunning, 30000);
    }
    QVERIFY(!gone(holder));
    // Held: nobody else is admitted while the holder runs (the subshell that ran tollgate is gone).
    const Ran second = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("t"), QStringLiteral("--slot"), QStringLiteral("--timeout"), QStringLiteral("0.5"),
        QStringLiteral("--pid"), QString::number(::getpid()) });
    QVERIFY2(second.code == 1, second.out + second.err);
    QFile goFile(go);
    QVERIFY(goFile.open(QIODevice::WriteOnly));
    goFile.close();
    QTRY_VERIFY_WITH_TIMEOUT(gone(holder), 30000);
    const Ran third = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("t"), QStringLiteral("--slot"), QStringLiteral("--timeout"), QStringLiteral("20"),
        QStringLiteral("--pid"), QString::number(::getpid()) });
    QVERIFY2(third.code == 0, third.out + third.err);
}

bool TestHolders::canUnsharePid()
{
    QProcess p;
    p.start(QStringLiteral("unshare"),
        { QStringLiteral("--pid"), QStringLiteral("--fork"), QStringLiteral("--mount-proc"),
            QStringLiteral("true") });
    return p.waitForStarted(10000) && p.waitForFinished(10000) && p.exitStatus() == QProcess::NormalExit
        && p.exitCode() == 0;
}

// Issue defect 5: with --parallel 1, SIGKILL of a `tollgate run` must not leave its command
// running while the next run is admitted — nor any process of the command's: the `sleep` of a
// shell waiting for it, or one that made itself a session of its own. A SIGTERM that `run`
// passes on ends the shell; the sleep must not run on either.
void TestHolders::killedRunTakesItsCommandAlong_data()
{
    QTest::addColumn<QString>("shape"); // how the command runs its sleep; %1 is the sleep's argument
    QTest::addColumn<int>("signal");
    QTest::newRow("the command itself, SIGKILL") << QStringLiteral("exec sleep %1") << int(SIGKILL);
    QTest::newRow("a shell's child, SIGKILL") << QStringLiteral("sleep %1; true") << int(SIGKILL);
    QTest::newRow("a new session's process, SIGKILL") << QStringLiteral("setsid sleep %1 & wait") << int(SIGKILL);
    QTest::newRow("a shell's child, SIGTERM passed on") << QStringLiteral("sleep %1; true") << int(SIGTERM);
}

void TestHolders::killedRunTakesItsCommandAlong()
{
    QFETCH(QString, shape);
    QFETCH(int, signal);
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--parallel"), QStringLiteral("1") })
                 .code,
        0);
    const QString tag = uniqueSleep();
    // The run's retry-after file goes to $TMPDIR, and goes away with the killed run.
    const QString tmp = m_dir->path() + QStringLiteral("/tmp");
    QVERIFY(QDir().mkpath(tmp));
    QProcess* first = start(QStringLiteral(TOLLGATE_CLI_PATH),
        withHome({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("first"), QStringLiteral("--"), QStringLiteral("sh"), QStringLiteral("-c"),
            shape.arg(tag) }),
        { QStringLiteral("TMPDIR=") + tmp });
    QTRY_VERIFY_WITH_TIMEOUT(!pidsOf({ "sleep", tag.toUtf8() }).empty(), 30000);
    const qint64 command = pidsOf({ "sleep", tag.toUtf8() }).front();
    m_leftovers.push_back(command);

    // The second run waits for the slot; its command records whether the first command is
    // still alive (not gone and not a zombie) at the moment it starts.
    const QString seen = m_dir->path() + QStringLiteral("/seen");
    QProcess* second = start(QStringLiteral(TOLLGATE_CLI_PATH),
        withHome({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("second"), QStringLiteral("--timeout"), QStringLiteral("60"), QStringLiteral("--"),
            QStringLiteral("sh"), QStringLiteral("-c"),
            QStringLiteral("s=$(cut -d' ' -f3 /proc/$1/stat 2>/dev/null); "
                           "if [ -n \"$s\" ] && [ \"$s\" != Z ]; then echo overlap > \"$0\"; else echo alone "
                           "> \"$0\"; fi"),
            seen, QString::number(command) }));
    QTRY_COMPARE_WITH_TIMEOUT(waitingCount(QStringLiteral("api")), 1, 30000);
    QVERIFY(!QFile::exists(seen));

    // SIGKILL: no chance to release or to stop its command; SIGTERM: passed on to the shell.
    ::kill(static_cast<pid_t>(first->processId()), signal);
    QVERIFY(first->waitForFinished(10000));
    QTRY_VERIFY2_WITH_TIMEOUT(gone(command), "the command's sleep outlived its run", 10000);
    const auto leftFiles = [&] { return QDir(tmp).entryList(QDir::Files | QDir::NoDotAndDotDot); };
    QTRY_VERIFY2_WITH_TIMEOUT(leftFiles().isEmpty(), qPrintable(leftFiles().join(QLatin1Char(' '))), 10000);

    QVERIFY(second->waitForFinished(60000));
    QCOMPARE(second->exitCode(), 0);
    QFile f(seen);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll().trimmed(), QByteArray("alone"));
}

// The keeper between `run` and the command must not show: the command gets SIGPIPE as
// tollgate got it (a `yes | head` ends quietly), and orphans of its tree that end are reaped
// at once rather than piling up as zombies under the keeper (a long job that double-forks
// would fill the pid table).
void TestHolders::theKeeperChangesNothingForTheCommand()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--parallel"), QStringLiteral("1") })
                 .code,
        0);
    const auto run = [&](const QString& script) {
        return cli({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("k"),
            QStringLiteral("--"), QStringLiteral("sh"), QStringLiteral("-c"), script });
    };
    const Ran pipe = run(QStringLiteral("yes | head -1 >/dev/null; grep SigIgn /proc/self/status"));
    QVERIFY2(pipe.code == 0, pipe.err.constData());
    QVERIFY2(!pipe.err.contains("Broken pipe"), pipe.err.constData());
    const QByteArray ignored = pipe.out.mid(pipe.out.indexOf(':') + 1).trimmed();
    QVERIFY2((ignored.toULongLong(nullptr, 16) & (1ULL << (SIGPIPE - 1))) == 0, pipe.out.constData());

    // 50 orphans that end at once; then up to 10 s for the keeper to have reaped them all.
    const Ran zombies = run(QStringLiteral(
        "for i in $(seq 50); do (true &); done; "
        "for i in $(seq 200); do z=$(ps --ppid $PPID -o stat= | grep -c Z); [ \"$z\" = 0 ] && break; sleep 0.05; done; "
        "echo \"zombies=$z\""));
    QVERIFY2(zombies.code == 0, zombies.err.constData());
    QCOMPARE(zombies.out.trimmed(), QByteArray("zombies=0"));
}

// A run whose runner and keeper were SIGKILLed together (kill -9 of its process group) leaves
// its retry-after file; the next run of the same user removes it — only a regular file of
// ours named by a gone runner of this pid namespace: not a live runner's, not another
// namespace's, not a symbolic link, not another name.
void TestHolders::retryFilesOfRunsKilledWholeAreRemovedLater()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--parallel"), QStringLiteral("1") })
                 .code,
        0);
    const QString tmp = m_dir->path() + QStringLiteral("/tmp");
    QVERIFY(QDir().mkpath(tmp));
    const QString ns = QString::number(tollgate::ProcessProbe().pidNamespace());
    const QString dead = QString::number(TestSupport::deadPid());
    const auto plant = [&](const QString& name) {
        QFile f(tmp + QLatin1Char('/') + name);
        QVERIFY(f.open(QIODevice::WriteOnly));
    };
    plant(QStringLiteral("tollgate-retry-after-%1-%2-AbCdEf").arg(ns, dead)); // orphaned
    plant(QStringLiteral("tollgate-retry-after-%1-%2-AbCdEf").arg(ns).arg(::getpid())); // a live runner
    plant(QStringLiteral("tollgate-retry-after-1-%1-AbCdEf").arg(dead)); // another pid namespace
    plant(QStringLiteral("other-%1").arg(dead));
    QVERIFY(QFile::link(QStringLiteral("/etc/hostname"),
        tmp + QStringLiteral("/tollgate-retry-after-%1-%2-link").arg(ns, dead)));
    QProcess* run = start(QStringLiteral(TOLLGATE_CLI_PATH),
        withHome({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("s"),
            QStringLiteral("--"), QStringLiteral("true") }),
        { QStringLiteral("TMPDIR=") + tmp });
    QVERIFY(run->waitForFinished(60000));
    QCOMPARE(run->exitCode(), 0);
    QStringList left = QDir(tmp).entryList(QDir::Files | QDir::System | QDir::NoDotAndDotDot);
    left.sort();
    QStringList expected { QStringLiteral("other-%1").arg(dead),
        QStringLiteral("tollgate-retry-after-1-%1-AbCdEf").arg(dead),
        QStringLiteral("tollgate-retry-after-%1-%2-AbCdEf").arg(ns).arg(::getpid()),
        QStringLiteral("tollgate-retry-after-%1-%2-link").arg(ns, dead) };
    expected.sort();
    QCOMPARE(left, expected);
}

// `acquire --slot --pid` of a process that does not run here (a typo, a pid above pid_max):
// the slot would be reclaimed by the next command, after a request was spent. Refused first.
void TestHolders::aSlotForAPidThatDoesNotRunSpendsNothing()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("5"), QStringLiteral("--parallel"),
                     QStringLiteral("1") })
                 .code,
        0);
    QProcess ended;
    ended.start(QStringLiteral("true"), QStringList {});
    QVERIFY(ended.waitForFinished(10000));
    const qint64 deadPid = ended.processId() > 0 ? ended.processId() : 0;
    QFile pidMax(QStringLiteral("/proc/sys/kernel/pid_max"));
    QVERIFY(pidMax.open(QIODevice::ReadOnly));
    const qint64 aboveMax = pidMax.readAll().trimmed().toLongLong() + 1;
    QVERIFY(aboveMax > 1);
    for (const qint64 pid : { deadPid, aboveMax }) {
        if (pid <= 0 || pid > INT32_MAX || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
            continue; // (the dead one's pid was taken again meanwhile)
        const Ran r = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("t"), QStringLiteral("--slot"), QStringLiteral("--timeout"), QStringLiteral("0"),
            QStringLiteral("--pid"), QString::number(pid) });
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("--pid " + QByteArray::number(pid) + ": no such process"), r.err.constData());
    }
    const QJsonObject api = providerStatus(QStringLiteral("api"));
    QCOMPARE(api.value(QStringLiteral("admitted_total")).toInt(-1), 0);
    QCOMPARE(api.value(QStringLiteral("slots")).toArray().size(), qsizetype(0));
    // A pid that runs is taken, as before.
    const Ran held = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("t"), QStringLiteral("--slot"), QStringLiteral("--timeout"), QStringLiteral("0"),
        QStringLiteral("--pid"), QString::number(::getpid()) });
    QVERIFY2(held.code == 0, held.out + held.err);
    QCOMPARE(
        providerStatus(QStringLiteral("api")).value(QStringLiteral("slots")).toArray().size(), qsizetype(1));
}

// `run` resolves its command before it asks for anything: a missing or non-executable
// command spends no request, no tokens and no slot.
void TestHolders::missingCommandSpendsNothing()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("1"), QStringLiteral("--window"),
                     QStringLiteral("600"), QStringLiteral("--tokens"), QStringLiteral("2000"),
                     QStringLiteral("--parallel"), QStringLiteral("1") })
                 .code,
        0);
    QCOMPARE(cli({ QStringLiteral("status") }).code, 0); // the state exists from here on
    const auto stateBytes = [&] {
        QFile f(m_home + QStringLiteral("/state.bin"));
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray("(unreadable)");
    };
    const QByteArray before = stateBytes();
    const std::size_t eventsBefore = history().size();

    const QString notExecutable = m_dir->path() + QStringLiteral("/data.txt");
    {
        QFile f(notExecutable);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("echo hi\n");
    }
    // A script whose "#!" names an interpreter that does not exist fails in execve as surely.
    const QString badInterpreter = m_dir->path() + QStringLiteral("/bad-interpreter.sh");
    {
        QFile f(badInterpreter);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("#!/nonexistent/tollgate-test-shell -e\necho hi\n");
        f.close();
        QVERIFY(f.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner));
    }
    struct Case
    {
        QString command;
        int code;
    };
    for (const Case& c : { Case { QStringLiteral("tollgate-test-no-such-command"), 127 },
             Case { m_dir->path() + QStringLiteral("/missing/cmd"), 127 }, Case { notExecutable, 126 },
             Case { m_dir->path(), 126 }, Case { badInterpreter, 127 } }) {
        auto r = cli({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("x"), QStringLiteral("--tokens"), QStringLiteral("2000"),
            QStringLiteral("--timeout"), QStringLiteral("0"), QStringLiteral("--"), c.command });
        QVERIFY2(r.code == c.code,
            qPrintable(
                QStringLiteral("%1: exit %2, %3").arg(c.command).arg(r.code).arg(QString::fromUtf8(r.err))));
        QVERIFY2(r.err.contains(c.command.toUtf8()), r.err.constData());
    }
    QCOMPARE(stateBytes(), before);
    QCOMPARE(history().size(), eventsBefore);
    // The whole quota is still there.
    auto ok = cli({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("y"), QStringLiteral("--tokens"), QStringLiteral("2000"), QStringLiteral("--timeout"),
        QStringLiteral("0"), QStringLiteral("--"), QStringLiteral("true") });
    QVERIFY2(ok.code == 0, ok.err.constData());
}

// Two containers on one machine are two hosts: the same machine id, another pid namespace,
// another host id (what decides whether a holder's pid may be probed).
void TestHolders::anotherPidNamespaceIsAnotherHost()
{
    if (!canUnsharePid())
        QSKIP("cannot create a pid namespace here (unshare --pid --fork --mount-proc failed: needs root or "
              "user namespaces)");
    auto hostOf = [&](const QStringList& prefix) {
        QProcess p;
        p.start(prefix.isEmpty() ? QStringLiteral(TOLLGATE_CLI_PATH) : prefix.first(),
            (prefix.isEmpty() ? QStringList() : prefix.mid(1) + QStringList { QStringLiteral(TOLLGATE_CLI_PATH) })
                + QStringList { QStringLiteral("status"), QStringLiteral("--json"), QStringLiteral("--home"), m_home });
        if (!p.waitForFinished(30000))
            return QString();
        const auto doc = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
        return doc.value(QStringLiteral("host")).toObject().value(QStringLiteral("id")).toString();
    };
    const QString here = hostOf({});
    const QString again = hostOf({});
    const QString there = hostOf({ QStringLiteral("unshare"), QStringLiteral("--pid"), QStringLiteral("--fork"),
        QStringLiteral("--mount-proc") });
    QVERIFY2(!here.isEmpty() && !there.isEmpty(), qPrintable(here + QLatin1Char('|') + there));
    QCOMPARE(again, here); // stable
    QVERIFY(here != there);
    QCOMPARE(here.section(QLatin1Char('-'), 0, 0), there.section(QLatin1Char('-'), 0, 0)); // one machine
    QCOMPARE(here.section(QLatin1Char('-'), 0, 0).size(), 32);
}

// A time namespace (a container restored by CRIU, `unshare --time`) shifts the start times
// that /proc/PID/stat shows by the reader's boottime offset: a holder started in one must not
// look like a reused pid (a younger process) to a caller in another — with --parallel 1 that
// caller would reclaim the live holder's slot and run beside it.
void TestHolders::holderInAnotherTimeNamespaceIsNotTakenForDead()
{
    {
        QProcess p;
        p.start(QStringLiteral("unshare"),
            { QStringLiteral("--time"), QStringLiteral("--boottime"), QStringLiteral("3600"), QStringLiteral("--fork"),
                QStringLiteral("true") });
        if (!p.waitForFinished(10000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0)
            QSKIP("cannot create a time namespace here (unshare --time needs root and Linux 5.6)");
    }
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--parallel"), QStringLiteral("1") })
                 .code,
        0);
    const QString tag = uniqueSleep();
    start(QStringLiteral("unshare"),
        { QStringLiteral("--time"), QStringLiteral("--boottime"), QStringLiteral("3600"), QStringLiteral("--fork"),
            QStringLiteral(TOLLGATE_CLI_PATH), QStringLiteral("run"), QStringLiteral("--home"), m_home,
            QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("in-time-ns"), QStringLiteral("--"),
            QStringLiteral("sleep"), tag });
    QTRY_VERIFY_WITH_TIMEOUT(!pidsOf({ "sleep", tag.toUtf8() }).empty(), 30000);
    const qint64 command = pidsOf({ "sleep", tag.toUtf8() }).front();
    m_leftovers.push_back(command);

    // Here, in the initial time namespace: the slot is the live holder's, so no room.
    const QString marker = m_dir->path() + QStringLiteral("/ran");
    auto here = cli({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("here"),
        QStringLiteral("--timeout"), QStringLiteral("1"), QStringLiteral("--"), QStringLiteral("sh"),
        QStringLiteral("-c"), QStringLiteral("echo ran > \"$0\""), marker });
    QCOMPARE(here.code, 1);
    QVERIFY2(!QFile::exists(marker), "a caller in another time namespace took the live holder for dead");
    QVERIFY(!gone(command));
    // And status, judging the same way, shows it alive.
    const auto doc = QJsonDocument::fromJson(cli({ QStringLiteral("status"), QStringLiteral("--json") }).out).object();
    const QJsonArray slots
        = doc.value(QStringLiteral("providers")).toArray()[0].toObject().value(QStringLiteral("slots")).toArray();
    QCOMPARE(slots.size(), 1);
    QCOMPARE(slots[0].toObject().value(QStringLiteral("caller")).toString(), QStringLiteral("in-time-ns"));
}

// Issue defect 11: a pid from another pid namespace means nothing here. A `run` in namespace
// B must not reclaim the slot of a live `run` in namespace A (whose pid does not exist in
// B), and must get it once A stops renewing its lease.
void TestHolders::holderInAnotherPidNamespaceKeepsItsSlotWhileItRenews()
{
    if (!canUnsharePid())
        QSKIP("cannot create a pid namespace here (unshare --pid --fork --mount-proc failed: needs root or "
              "user "
              "namespaces)");
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--parallel"), QStringLiteral("1") })
                 .code,
        0);
    const QString cliPath = QStringLiteral(TOLLGATE_CLI_PATH);
    // Holder A, in its own pid namespace: sh is pid 1 there, tollgate pid 2, which no
    // process in namespace B has. TOLLGATE_TEST_LEASE_MS shortens its lease (tests only).
    const QString tag = uniqueSleep();
    start(QStringLiteral("unshare"),
        { QStringLiteral("--pid"), QStringLiteral("--fork"), QStringLiteral("--mount-proc"),
            QStringLiteral("sh"), QStringLiteral("-c"), QStringLiteral("\"$@\"; exit $?"),
            QStringLiteral("sh"), cliPath, QStringLiteral("run"), QStringLiteral("--home"), m_home,
            QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("in-ns-a"),
            QStringLiteral("--"), QStringLiteral("sleep"), tag },
        { QStringLiteral("TOLLGATE_TEST_LEASE_MS=1500") });
    QTRY_VERIFY_WITH_TIMEOUT(!pidsOf({ "sleep", tag.toUtf8() }).empty(), 30000);
    const qint64 commandA = pidsOf({ "sleep", tag.toUtf8() }).front();
    m_leftovers.push_back(commandA);
    // The runner and its command's keeper (a forked copy, the same command line): the runner
    // is the one whose parent is not the other.
    const auto copies
        = pidsOf({ cliPath.toUtf8(), "run", "--home", m_home.toUtf8(), "api", "--caller", "in-ns-a" }, true);
    QCOMPARE(copies.size(), std::size_t(2));
    std::vector<qint64> runA;
    for (qint64 pid : copies) {
        if (std::find(copies.begin(), copies.end(), TestSupport::parentPid(pid)) == copies.end())
            runA.push_back(pid);
    }
    QCOMPARE(runA.size(), std::size_t(1));

    const auto runInB = [&](const QString& caller, const QString& timeout, const QString& marker) {
        return start(QStringLiteral("unshare"),
            { QStringLiteral("--pid"), QStringLiteral("--fork"), QStringLiteral("--mount-proc"), cliPath,
                QStringLiteral("run"), QStringLiteral("--home"), m_home, QStringLiteral("api"),
                QStringLiteral("--caller"), caller, QStringLiteral("--timeout"), timeout,
                QStringLiteral("--"), QStringLiteral("sh"), QStringLiteral("-c"),
                QStringLiteral("echo ran > \"$0\""), marker });
    };
    // 1. While A lives and renews, B waits for several lease lengths and is not admitted.
    const QString markerB1 = m_dir->path() + QStringLiteral("/b1");
    QProcess* b1 = runInB(QStringLiteral("in-ns-b"), QStringLiteral("5"), markerB1);
    QVERIFY(b1->waitForFinished(60000));
    QVERIFY2(!QFile::exists(markerB1), "namespace B ran its command while A held the only slot");
    QCOMPARE(b1->exitCode(), 1);
    QVERIFY(!gone(commandA));

    // 2. A's run is SIGKILLed: its command dies with it, its lease runs out, B gets the slot.
    ::kill(static_cast<pid_t>(runA.front()), SIGKILL);
    QTRY_VERIFY2_WITH_TIMEOUT(gone(commandA), "A's command outlived its run", 10000);
    const QString markerB2 = m_dir->path() + QStringLiteral("/b2");
    QProcess* b2 = runInB(QStringLiteral("in-ns-b2"), QStringLiteral("30"), markerB2);
    QVERIFY(b2->waitForFinished(60000));
    QVERIFY2(b2->exitCode() == 0, b2->readAllStandardError().constData());
    QVERIFY(QFile::exists(markerB2));
    bool reclaimed = false;
    for (const auto& e : history())
        reclaimed = reclaimed || (e.type == tollgate::EventType::Reclaim && e.caller == "in-ns-a");
    QVERIFY(reclaimed);
}

// Issue 27, item 2, on a directory home: state.bin removed while two `run`s hold both slots
// (--parallel 2, a 2 s window). The next transaction starts conservatively, with placeholders
// in both slots. Before, they expired after one window and a third command ran beside the two.
// Now they hold for the maximum hold time and the runs take their slots back as they renew
// (LocalQuotaBackend::renewSlot, QuotaPolicy::reestablish).
void TestHolders::runningHoldersTakeBackTheSlotsOfALostState()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--window"),
                     QStringLiteral("2"), QStringLiteral("--parallel"), QStringLiteral("2") })
                 .code,
        0);
    const QString cliPath = QStringLiteral(TOLLGATE_CLI_PATH);
    for (const char* who : { "held-a", "held-b" }) {
        start(cliPath,
            withHome({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
                QString::fromLatin1(who), QStringLiteral("--"), QStringLiteral("sleep"), uniqueSleep() }),
            { QStringLiteral("TOLLGATE_TEST_LEASE_MS=1500") });
    }
    auto callers = [&] {
        QStringList out;
        for (const auto& s : providerStatus(QStringLiteral("api")).value(QStringLiteral("slots")).toArray())
            out << s.toObject().value(QStringLiteral("caller")).toString();
        out.sort();
        return out;
    };
    const QStringList both { QStringLiteral("held-a"), QStringLiteral("held-b") };
    QTRY_COMPARE_WITH_TIMEOUT(callers(), both, 20000);
    QVERIFY(QFile::remove(m_home + QStringLiteral("/state.bin")));
    // Waits for three windows: the placeholders outlast them and the holders take their slots back.
    const QString marker = m_dir->path() + QStringLiteral("/ran");
    const auto r = cli({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("newcomer"), QStringLiteral("--timeout"), QStringLiteral("6"), QStringLiteral("--"),
        QStringLiteral("sh"), QStringLiteral("-c"), QStringLiteral("echo ran > \"$0\""), marker });
    QVERIFY2(!QFile::exists(marker), "a third command ran at --parallel 2 after the state was lost");
    QCOMPARE(r.code, 1);
    QTRY_COMPARE_WITH_TIMEOUT(callers(), both, 10000);
}

// A library client (the proxy, the clients) queued for a slot gives up, and its leave fails:
// another process holds state.lock past the leave's wait. A release had handed it the slot
// meanwhile (QuotaPolicy::handOff). Before, that slot stayed with the live process until it
// exited (its pid is alive by the probe). Now the leave is kept and done in the backend's next
// transaction: the slot is given back, with the history's "given back" and the give-up.
QStringList TestHolders::slotCallers(const QString& provider) const
{
    QStringList out;
    for (const auto& s : providerStatus(provider).value(QStringLiteral("slots")).toArray())
        out << s.toObject().value(QStringLiteral("caller")).toString();
    return out;
}

bool TestHolders::gaveBackAndGaveUp(const std::string& caller) const
{
    using tollgate::EventType;
    bool givenBack = false;
    bool gaveUp = false;
    for (const auto& e : history()) {
        givenBack = givenBack
            || (e.type == EventType::Release && e.caller == caller
                && e.reason.find("given back") != std::string::npos);
        gaveUp = gaveUp || (e.type == EventType::GaveUp && e.caller == caller);
    }
    return givenBack && gaveUp;
}

void TestHolders::handedSlotWithItsLeavePending(std::unique_ptr<tollgate::LocalQuotaBackend>& out)
{
    using namespace tollgate;
    if (QStandardPaths::findExecutable(QStringLiteral("flock")).isEmpty())
        QSKIP("flock(1) (util-linux) is not installed");
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--window"),
                     QStringLiteral("60"), QStringLiteral("--parallel"), QStringLiteral("1") })
                 .code,
        0);
    QProcess* holder = start(QStringLiteral(TOLLGATE_CLI_PATH),
        withHome({ QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("holder"), QStringLiteral("--"), QStringLiteral("sleep"), uniqueSleep() }));
    QTRY_COMPARE_WITH_TIMEOUT(
        slotCallers(QStringLiteral("api")), QStringList { QStringLiteral("holder") }, 20000);

    auto store = FileQuotaStore::open(m_home.toStdString(), m_clock);
    QVERIFY2(store, store ? "" : store.error().message.c_str());
    auto backend = std::make_unique<LocalQuotaBackend>(std::move(*store), m_clock, m_probe);
    AdmitStep step;
    step.request.provider = "api";
    step.request.caller = "gives-up";
    step.request.wantsSlot = true;
    step.request.takesHandOff = true; // as QuotaLimiter sets it: its own slot, a renewed lease
    step.request.leaseMs = 20000;
    step.request.pid = ProcessProbe::selfPid();
    step.request.waiterPid = step.request.pid;
    step.request.pidNs = m_probe.pidNamespace();
    step.request.startTicks = m_probe.startTicks(step.request.pid).value_or(0);
    step.request.waiterStartTicks = step.request.startTicks;
    step.startMs = m_clock.unixMs();
    step.request.deadlineMs = step.startMs + 600000;
    step.enqueue = true;
    auto queued = backend->admit(step);
    QVERIFY2(queued, queued ? "" : queued.error().message.c_str());
    QVERIFY(!queued->decision.admitted);
    QVERIFY(queued->decision.ticket != 0);
    step.ticket = queued->decision.ticket;

    // The holder's command ends (SIGTERM, passed on): its release hands the slot to us.
    ::kill(static_cast<pid_t>(holder->processId()), SIGTERM);
    QVERIFY(holder->waitForFinished(60000));
    QTRY_COMPARE_WITH_TIMEOUT(
        slotCallers(QStringLiteral("api")), QStringList { QStringLiteral("gives-up") }, 20000);

    // Another process holds state.lock: the leave waits its floor and fails. (-o: the lock is
    // flock's own, not its command's, so it goes when flock is killed.)
    QProcess* locker = start(QStringLiteral("flock"),
        { QStringLiteral("-o"), m_home + QStringLiteral("/state.lock"), QStringLiteral("sh"),
            QStringLiteral("-c"), QStringLiteral("echo locked; exec sleep 600") });
    QVERIFY(locker->waitForReadyRead(30000));
    QCOMPARE(locker->readLine().trimmed(), QByteArray("locked"));
    step.storeWait.deadline = std::chrono::steady_clock::now();
    const auto left = backend->leaveQueue(step, true, "slots (deadline)");
    QVERIFY(!left);
    QCOMPARE(backend->pendingLeaves(), std::size_t(1));
    locker->kill();
    QVERIFY(locker->waitForFinished(30000));
    QCOMPARE(slotCallers(QStringLiteral("api")),
        QStringList { QStringLiteral("gives-up") }); // still ours, for now
    out = std::move(backend);
}

void TestHolders::aSlotHandedToAWaiterWhoseLeaveFailedIsGivenBackNextTime()
{
    std::unique_ptr<tollgate::LocalQuotaBackend> backend;
    handedSlotWithItsLeavePending(backend);
    if (!backend)
        return; // failed or skipped there
    // The next operation of this backend, whatever it is, does the leave first.
    QVERIFY(backend->reportSuccess("api", "gives-up"));
    QCOMPARE(slotCallers(QStringLiteral("api")), QStringList {});
    QCOMPARE(backend->pendingLeaves(), std::size_t(0));
    QVERIFY(gaveBackAndGaveUp("gives-up"));
}

void TestHolders::aSlotHandedToAWaiterWhoseLeaveFailedIsGivenBackWhenItsBackendGoes()
{
    std::unique_ptr<tollgate::LocalQuotaBackend> backend;
    handedSlotWithItsLeavePending(backend);
    if (!backend)
        return;
    // No next operation: the backend goes while this process lives on (as the proxy's pool
    // drops one). Its last try gives the slot back.
    backend.reset();
    QCOMPARE(slotCallers(QStringLiteral("api")), QStringList {});
    QVERIFY(gaveBackAndGaveUp("gives-up"));
}

QTEST_GUILESS_MAIN(TestHolders)
#include "tst_holders.moc"
