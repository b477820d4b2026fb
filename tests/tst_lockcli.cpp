// `tollgate lock ...` as a user runs it: separate processes, exit codes, messages, JSON.

#include "testsupport.h"

#include <QCoreApplication>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>
#include <csignal>
#include <cstring>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

class TestLockCli final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void tryAcquireRecordsParentAsHolder();
    void secondTryIsRefusedNamingHolder();
    void releaseOnlyByHolder();
    void statusJsonIsValidWithQuotesInTag();
    void statusOfCorruptFileExits3();
    void usageErrorsExit2_data();
    void usageErrorsExit2();
    void runHoldsLockAndReturnsCommandExitCode();
    void runRefusesWhenHeld();
    void runOfAMissingCommandTakesNoLock();
    void runForwardsTerminationAndReleases();
    void runKilledReleasesOnceTheCommandIsGone();
    void acquireAndWaitTimeOut();
    void cleanTakesDeadOldLock();
    void nonRegularLockPathIsRefusedByEveryCommand_data();
    void nonRegularLockPathIsRefusedByEveryCommand();
    void statusShowsOwnerAndSuspicion();

private:
    struct Ran
    {
        int code = -1;
        QByteArray out;
        QByteArray err;
    };
    Ran tollgate(const QStringList& args);
    // The same with a deadline: a child still running after limitMs is killed (code -2).
    static Ran bounded(const QStringList& args, int limitMs);
    QString lockPath() const { return m_dir->path() + QStringLiteral("/cli.lock"); }
    QByteArray lockBytes() const
    {
        QFile f(lockPath());
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    }
    std::unique_ptr<QTemporaryDir> m_dir;
};

TestLockCli::Ran TestLockCli::tollgate(const QStringList& args)
{
    QProcess p;
    p.start(QStringLiteral(TOLLGATE_CLI_PATH), args);
    if (!p.waitForFinished(60000))
        qFatal("tollgate did not finish");
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
        p.readAllStandardError() };
}

TestLockCli::Ran TestLockCli::bounded(const QStringList& args, int limitMs)
{
    QProcess p;
    p.start(QStringLiteral(TOLLGATE_CLI_PATH), args);
    if (!p.waitForStarted(10000))
        qFatal("tollgate did not start");
    if (!p.waitForFinished(limitMs)) {
        p.kill();
        p.waitForFinished(10000);
        return { -2, p.readAllStandardOutput(), p.readAllStandardError() };
    }
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
        p.readAllStandardError() };
}

void TestLockCli::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
}

void TestLockCli::tryAcquireRecordsParentAsHolder()
{
    auto r = tollgate({ QStringLiteral("lock"), QStringLiteral("try-acquire"), lockPath(),
        QStringLiteral("--tag"), QStringLiteral("ci job") });
    QCOMPARE(r.code, 0);
    const QByteArray me = QByteArray::number(QCoreApplication::applicationPid());
    QVERIFY2(lockBytes().startsWith("pid=" + me + "\ntimestamp="), lockBytes().constData());
    QVERIFY(lockBytes().endsWith("\ntag=ci job\n"));
    QVERIFY(r.out.contains("acquired"));
}

void TestLockCli::secondTryIsRefusedNamingHolder()
{
    QCOMPARE(tollgate({ QStringLiteral("lock"), QStringLiteral("try"), lockPath(), QStringLiteral("--tag"),
                          QStringLiteral("first") })
                 .code,
        0);
    auto r = tollgate({ QStringLiteral("lock"), QStringLiteral("try"), lockPath() });
    QCOMPARE(r.code, 1);
    const QByteArray me = QByteArray::number(QCoreApplication::applicationPid());
    QVERIFY2(r.err.contains("held by pid " + me), r.err.constData());
    QVERIFY(r.err.contains("first"));
    QVERIFY(r.err.contains("alive"));
}

void TestLockCli::releaseOnlyByHolder()
{
    QCOMPARE(tollgate({ QStringLiteral("lock"), QStringLiteral("try"), lockPath(), QStringLiteral("--pid"),
                          QStringLiteral("1") })
                 .code,
        0);
    auto r = tollgate({ QStringLiteral("lock"), QStringLiteral("release"), lockPath() });
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("not released"), r.err.constData());
    QVERIFY(QFile::exists(lockPath()));
    QCOMPARE(tollgate({ QStringLiteral("lock"), QStringLiteral("release"), lockPath(),
                          QStringLiteral("--pid"), QStringLiteral("1") })
                 .code,
        0);
    QVERIFY(!QFile::exists(lockPath()));
    QCOMPARE(tollgate({ QStringLiteral("lock"), QStringLiteral("release"), lockPath() }).code, 1);
    QCOMPARE(tollgate({ QStringLiteral("lock"), QStringLiteral("try"), lockPath(), QStringLiteral("--pid"),
                          QStringLiteral("1") })
                 .code,
        0);
    QCOMPARE(
        tollgate({ QStringLiteral("lock"), QStringLiteral("release"), lockPath(), QStringLiteral("--force") })
            .code,
        0);
    QVERIFY(!QFile::exists(lockPath()));
}

void TestLockCli::statusJsonIsValidWithQuotesInTag()
{
    const QString tag = QStringLiteral("say \"hi\" \\ back\nslash");
    QCOMPARE(
        tollgate({ QStringLiteral("lock"), QStringLiteral("try"), lockPath(), QStringLiteral("--tag"), tag })
            .code,
        0);
    auto r = tollgate(
        { QStringLiteral("lock"), QStringLiteral("status"), lockPath(), QStringLiteral("--json") });
    QCOMPARE(r.code, 0);
    QJsonParseError err {};
    const auto doc = QJsonDocument::fromJson(r.out, &err);
    QVERIFY2(err.error == QJsonParseError::NoError, r.out.constData());
    const auto o = doc.object();
    QCOMPARE(o.value(QStringLiteral("locked")).toBool(), true);
    QCOMPARE(o.value(QStringLiteral("tag")).toString(), QStringLiteral("say \"hi\" \\ back slash"));
    QCOMPARE(o.value(QStringLiteral("pid")).toInteger(), QCoreApplication::applicationPid());
    QCOMPARE(o.value(QStringLiteral("alive")).toBool(), true);

    auto human = tollgate({ QStringLiteral("lock"), QStringLiteral("status"), lockPath() });
    QCOMPARE(human.code, 0);
    QVERIFY(human.out.startsWith("locked: true\npid: "));

    QVERIFY(QFile::remove(lockPath()));
    r = tollgate({ QStringLiteral("lock"), QStringLiteral("status"), lockPath(), QStringLiteral("--json") });
    QCOMPARE(r.code, 0);
    QCOMPARE(QJsonDocument::fromJson(r.out).object().value(QStringLiteral("locked")).toBool(), false);
}

void TestLockCli::statusOfCorruptFileExits3()
{
    QFile f(lockPath());
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("pid=12\n");
    f.close();
    auto r = tollgate({ QStringLiteral("lock"), QStringLiteral("status"), lockPath() });
    QCOMPARE(r.code, 3);
    QVERIFY2(r.err.contains(lockPath().toUtf8()) && r.err.contains("corrupt"), r.err.constData());
    QVERIFY(r.err.contains("no timestamp= line"));
    // try-acquire treats it as held (a peer may be mid-write) and leaves it alone
    r = tollgate({ QStringLiteral("lock"), QStringLiteral("try"), lockPath() });
    QCOMPARE(r.code, 1);
    QCOMPARE(lockBytes(), QByteArray("pid=12\n"));
}

void TestLockCli::usageErrorsExit2_data()
{
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QByteArray>("message");
    QTest::newRow("no command") << QStringList { QStringLiteral("lock") } << QByteArray("missing COMMAND");
    QTest::newRow("unknown command") << QStringList { QStringLiteral("lock"), QStringLiteral("grab"),
        QStringLiteral("x") } << QByteArray("unknown command");
    QTest::newRow("no path") << QStringList { QStringLiteral("lock"), QStringLiteral("status") }
                             << QByteArray("missing PATH");
    QTest::newRow("bad timeout") << QStringList { QStringLiteral("lock"), QStringLiteral("acquire"),
        QStringLiteral("/tmp/x.lock"), QStringLiteral("--timeout"), QStringLiteral("soon") }
                                 << QByteArray("--timeout");
    QTest::newRow("negative stale") << QStringList { QStringLiteral("lock"), QStringLiteral("try"),
        QStringLiteral("/tmp/x.lock"), QStringLiteral("--stale"), QStringLiteral("-1") }
                                    << QByteArray("--stale");
    QTest::newRow("unknown option") << QStringList { QStringLiteral("lock"), QStringLiteral("try"),
        QStringLiteral("/tmp/x.lock"), QStringLiteral("--bogus") }
                                    << QByteArray("unknown option --bogus");
    QTest::newRow("dotdot") << QStringList { QStringLiteral("lock"), QStringLiteral("try"),
        QStringLiteral("/tmp/../etc/x.lock") }
                            << QByteArray("'..'");
    QTest::newRow("run without command") << QStringList { QStringLiteral("lock"), QStringLiteral("run"),
        QStringLiteral("/tmp/x.lock") } << QByteArray("needs a command");
    QTest::newRow("unknown top-level")
        << QStringList { QStringLiteral("frobnicate") } << QByteArray("unknown command");
}

void TestLockCli::usageErrorsExit2()
{
    QFETCH(QStringList, args);
    QFETCH(QByteArray, message);
    auto r = tollgate(args);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains(message), r.err.constData());
}

void TestLockCli::runHoldsLockAndReturnsCommandExitCode()
{
    QProcess p;
    p.start(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("lock"), QStringLiteral("run"), lockPath(), QStringLiteral("--tag"),
            QStringLiteral("job"), QStringLiteral("--"), QStringLiteral("sh"), QStringLiteral("-c"),
            QStringLiteral("cat \"$0\"; echo \"keeper=$PPID runner=$(cut -d' ' -f4 /proc/$PPID/stat)\"; exit 7"),
            lockPath() });
    QVERIFY(p.waitForStarted());
    const qint64 cliPid = p.processId();
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 7);
    const QByteArray seen = p.readAllStandardOutput();
    // While the command ran, the lock named tollgate's keeper of the command (the command's
    // parent, a child of tollgate) as its holder — not the test, and not a process that dies
    // before the command's children.
    const QList<QByteArray> lines = seen.split('\n');
    QVERIFY2(lines.size() >= 4, seen.constData());
    const QByteArray keeper = lines[3].mid(lines[3].indexOf("keeper=") + 7).split(' ').value(0);
    QVERIFY2(lines[3].endsWith("runner=" + QByteArray::number(cliPid)), seen.constData());
    QVERIFY2(seen.startsWith("pid=" + keeper + "\n"), seen.constData());
    QVERIFY(seen.contains("tag=job\n"));
    QVERIFY(!QFile::exists(lockPath()));
}

// A command that cannot run takes no lock: nobody waits for a lock held by nothing.
void TestLockCli::runOfAMissingCommandTakesNoLock()
{
    auto r = tollgate({ QStringLiteral("lock"), QStringLiteral("run"), lockPath(), QStringLiteral("--json"),
        QStringLiteral("--"), QStringLiteral("tollgate-test-no-such-command") });
    QCOMPARE(r.code, 127);
    QVERIFY2(r.out.contains("\"error\"") && r.out.contains("tollgate-test-no-such-command"), r.out.constData());
    QVERIFY(!QFile::exists(lockPath()));
}

void TestLockCli::runRefusesWhenHeld()
{
    QCOMPARE(tollgate({ QStringLiteral("lock"), QStringLiteral("try"), lockPath() }).code, 0);
    auto r
        = tollgate({ QStringLiteral("lock"), QStringLiteral("run"), lockPath(), QStringLiteral("--timeout"),
            QStringLiteral("0.2"), QStringLiteral("--conflict-exit"), QStringLiteral("75"),
            QStringLiteral("--"), QStringLiteral("touch"), m_dir->path() + QStringLiteral("/ran") });
    QCOMPARE(r.code, 75);
    QVERIFY(r.err.contains("timed out"));
    QVERIFY(!QFile::exists(m_dir->path() + QStringLiteral("/ran")));
}

void TestLockCli::runForwardsTerminationAndReleases()
{
    const QString ready = m_dir->path() + QStringLiteral("/ready");
    QProcess p;
    p.start(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("lock"), QStringLiteral("run"), lockPath(), QStringLiteral("--"),
            QStringLiteral("sh"), QStringLiteral("-c"), QStringLiteral("touch \"$0\"; exec sleep 600"),
            ready });
    QVERIFY(p.waitForStarted());
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(ready), 30000);
    QVERIFY(QFile::exists(lockPath()));
    p.terminate(); // SIGTERM to tollgate, which passes it on to the command
    QVERIFY(p.waitForFinished(30000));
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QCOMPARE(p.exitCode(), 128 + SIGTERM);
    QVERIFY(!QFile::exists(lockPath()));
}

// `lock run` SIGKILLed: its keeper ends the command's tree and then gives the lock back, as the
// holder the lock names. Before, the dead keeper's lock stayed until the stale timeout (an hour).
void TestLockCli::runKilledReleasesOnceTheCommandIsGone()
{
    const QString ready = m_dir->path() + QStringLiteral("/ready");
    QProcess p;
    p.start(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("lock"), QStringLiteral("run"), lockPath(), QStringLiteral("--"),
            QStringLiteral("sh"), QStringLiteral("-c"), QStringLiteral("echo $$ > \"$0\"; exec sleep 600"),
            ready });
    QVERIFY(p.waitForStarted());
    QTRY_VERIFY_WITH_TIMEOUT(QFileInfo(ready).size() > 0, 30000);
    QFile f(ready);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const qint64 command = f.readAll().trimmed().toLongLong();
    QVERIFY(command > 0);
    QVERIFY(QFile::exists(lockPath()));
    p.kill();
    QVERIFY(p.waitForFinished(30000));
    QTRY_VERIFY_WITH_TIMEOUT(!QFile::exists(lockPath()), 30000);
    // Freed only after the command had ended (dead, or a zombie not reaped yet): the lock is
    // never free while a holder's command still runs.
    QFile stat(QStringLiteral("/proc/%1/stat").arg(command));
    if (stat.open(QIODevice::ReadOnly)) {
        const QByteArray line = stat.readAll();
        const qsizetype close = line.lastIndexOf(')');
        QVERIFY2(close > 0 && line.mid(close + 2, 1) == "Z", line.constData());
    }
    QCOMPARE(tollgate({ QStringLiteral("lock"), QStringLiteral("try"), lockPath() }).code, 0);
}

void TestLockCli::acquireAndWaitTimeOut()
{
    QCOMPARE(tollgate({ QStringLiteral("lock"), QStringLiteral("try"), lockPath() }).code, 0);
    auto r = tollgate({ QStringLiteral("lock"), QStringLiteral("acquire"), lockPath(),
        QStringLiteral("--timeout"), QStringLiteral("0.3") });
    QCOMPARE(r.code, 1);
    QVERIFY(r.err.contains("timed out"));
    r = tollgate({ QStringLiteral("lock"), QStringLiteral("wait"), lockPath(), QStringLiteral("--timeout"),
        QStringLiteral("0.2"), QStringLiteral("--json") });
    QCOMPARE(r.code, 1);
    QCOMPARE(QJsonDocument::fromJson(r.out).object().value(QStringLiteral("free")).toBool(), false);
    QCOMPARE(tollgate({ QStringLiteral("lock"), QStringLiteral("release"), lockPath() }).code, 0);
    QCOMPARE(tollgate({ QStringLiteral("lock"), QStringLiteral("wait"), lockPath(),
                          QStringLiteral("--timeout"), QStringLiteral("5") })
                 .code,
        0);
}

void TestLockCli::cleanTakesDeadOldLock()
{
    const qint64 gonePid = TestSupport::deadPid();
    QFile f(lockPath());
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("pid=" + QByteArray::number(gonePid) + "\ntimestamp=1000\n");
    f.close();
    auto r = tollgate({ QStringLiteral("lock"), QStringLiteral("clean"), lockPath() });
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.contains("removed stale lock"), r.out.constData());
    QVERIFY(!QFile::exists(lockPath()));
}

// A FIFO (whose plain open would wait for a writer for ever), a directory or a socket at the
// lock path: every command says what it is at once and exits 3.
void TestLockCli::nonRegularLockPathIsRefusedByEveryCommand_data()
{
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QByteArray>("said");
    QTest::newRow("fifo") << QStringLiteral("fifo") << QByteArray("is a FIFO, not a regular file");
    QTest::newRow("directory") << QStringLiteral("directory")
                               << QByteArray("is a directory, not a regular file");
    // open(2) of a socket fails with ENXIO, as a FIFO's write-open does: Fd names it "a FIFO or socket"
    QTest::newRow("socket") << QStringLiteral("socket") << QByteArray("socket, not a regular file");
}

void TestLockCli::nonRegularLockPathIsRefusedByEveryCommand()
{
    QFETCH(QString, kind);
    QFETCH(QByteArray, said);
    const QByteArray path = lockPath().toLocal8Bit();
    int sock = -1;
    if (kind == QStringLiteral("fifo")) {
        QCOMPARE(::mkfifo(path.constData(), 0644), 0);
    } else if (kind == QStringLiteral("directory")) {
        QCOMPARE(::mkdir(path.constData(), 0755), 0);
    } else {
        sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
        QVERIFY(sock >= 0);
        sockaddr_un addr {};
        addr.sun_family = AF_UNIX;
        QVERIFY(std::size_t(path.size()) < sizeof addr.sun_path);
        std::memcpy(addr.sun_path, path.constData(), std::size_t(path.size()));
        QCOMPARE(::bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    }
    const auto closeSocket = qScopeGuard([sock] {
        if (sock >= 0)
            ::close(sock);
    });
    const QString p = lockPath();
    const QList<QStringList> commands {
        { QStringLiteral("try-acquire"), p },
        { QStringLiteral("acquire"), p, QStringLiteral("--timeout"), QStringLiteral("2") },
        { QStringLiteral("release"), p },
        { QStringLiteral("release"), p, QStringLiteral("--force") },
        { QStringLiteral("status"), p },
        { QStringLiteral("wait"), p, QStringLiteral("--timeout"), QStringLiteral("2") },
        { QStringLiteral("clean"), p },
        { QStringLiteral("run"), p, QStringLiteral("--timeout"), QStringLiteral("2"), QStringLiteral("--"),
            QStringLiteral("true") },
    };
    for (const QStringList& c : commands) {
        for (bool json : { false, true }) {
            QStringList args = QStringList { QStringLiteral("lock") } + c;
            if (json)
                args.insert(3, QStringLiteral("--json"));
            const Ran r = bounded(args, 15000);
            const QByteArray what = args.join(u' ').toUtf8();
            QVERIFY2(r.code != -2, ("hung: tollgate " + what).constData());
            QVERIFY2(r.code == 3, (what + ": exit " + QByteArray::number(r.code) + ": " + r.err).constData());
            QVERIFY2(r.err.contains(said), (what + ": " + r.err).constData());
            if (json) {
                const QJsonObject o = QJsonDocument::fromJson(r.out).object();
                QCOMPARE(o.value(QStringLiteral("code")).toInt(), 3);
                QVERIFY2(o.value(QStringLiteral("error")).toString().contains(QString::fromUtf8(said)),
                    r.out.constData());
            }
        }
    }
    struct stat st
    {
    };
    QCOMPARE(::lstat(path.constData(), &st), 0); // still there, untouched
}

// Another user's lock shows whose it is; a lock whose recorded holder runs as someone other
// than the file's owner (a forged holder: uid 65534 naming a root process) says it is suspicious.
void TestLockCli::statusShowsOwnerAndSuspicion()
{
    // an ordinary lock of ours: our owner, nothing suspicious
    QCOMPARE(tollgate({ QStringLiteral("lock"), QStringLiteral("try"), lockPath() }).code, 0);
    Ran r = tollgate({ QStringLiteral("lock"), QStringLiteral("status"), lockPath() });
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.contains("owner: uid " + QByteArray::number(::geteuid())), r.out.constData());
    QVERIFY2(!r.out.contains("suspicious"), r.out.constData());
    r = tollgate({ QStringLiteral("lock"), QStringLiteral("status"), lockPath(), QStringLiteral("--json") });
    QJsonObject o = QJsonDocument::fromJson(r.out).object();
    QCOMPARE(o.value(QStringLiteral("owner_uid")).toInteger(), qint64(::geteuid()));
    QVERIFY(o.value(QStringLiteral("suspicion")).isNull());

    if (::geteuid() != 0)
        QSKIP("chown to another user needs root");
    // The file now belongs to uid 65534 but names this test (root, alive) as its holder.
    QCOMPARE(::chown(lockPath().toLocal8Bit().constData(), 65534, 65534), 0);
    r = tollgate({ QStringLiteral("lock"), QStringLiteral("status"), lockPath() });
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.contains("owner: uid 65534"), r.out.constData());
    QVERIFY2(r.out.contains("\nsuspicious: "), r.out.constData());
    r = tollgate({ QStringLiteral("lock"), QStringLiteral("status"), lockPath(), QStringLiteral("--json") });
    o = QJsonDocument::fromJson(r.out).object();
    QCOMPARE(o.value(QStringLiteral("owner_uid")).toInteger(), qint64(65534));
    QVERIFY2(!o.value(QStringLiteral("suspicion")).toString().isEmpty(), r.out.constData());
    // a refusal says so too
    r = tollgate({ QStringLiteral("lock"), QStringLiteral("try"), lockPath() });
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("suspicious: "), r.err.constData());
}

QTEST_GUILESS_MAIN(TestLockCli)
#include "tst_lockcli.moc"
