// The home's files against a hostile local user and a broken disk, through the real CLI:
// limits that survive the loss of limits.json, a home swapped for a symbolic link while
// commands run, FIFOs/directories/sockets where files should be, and a history that cannot
// be written after the state was committed.

#include "history/historyreader.h"
#include "store/quotapeek.h"
#include "system/homedir.h"
#include "testsupport.h"

#include <QCoreApplication>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <map>
#include <optional>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

using namespace tollgate;

class TestHomeFiles final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void lostLimitsAreRefusedAndNoBackupIsOverwritten();
    void lostLimitsSeenThroughTheState();
    void backupsKeepThreeGenerations();
    void tempFilesOfKilledLimitWritersAreSwept();
    void aLostStateShowsAsTheNextCommandWillSeeIt_data();
    void aLostStateShowsAsTheNextCommandWillSeeIt();
    void nonRegularFilesAreRefusedWithoutHanging_data();
    void nonRegularFilesAreRefusedWithoutHanging();
    void foreignOrWritableFilesInsideAreRefused();
    void historyFailureAfterTheCommitIsNotAFailure();
    void partialHistoryLineCostsOnlyItself();
    void swappedHomeNeverReadsOrWritesElsewhere();
    void readSideCreatesNothing();
    void namedHomeIsCreatedOnlyAsItsLastDirectory();
    void commandsWithNothingToDoCreateNoHome();
    void defaultHomeStillGetsItsParents();

private:
    struct Ran
    {
        int code = -1; // -1: killed at the deadline, or crashed
        QByteArray out, err;
    };
    // Runs the CLI on `home` as a real process. The test's own deadline: a child that has not
    // exited after 20 s is killed and reported as code -1 (a hang), never waited for.
    // `env`: when given, the child's whole environment (then `home` may be empty: no --home).
    static Ran cliOn(const QString& home, QStringList args, qint64 fileSizeLimit = 0,
        const std::optional<QProcessEnvironment>& env = std::nullopt)
    {
        if (!home.isEmpty()) {
            args.insert(1, QStringLiteral("--home"));
            args.insert(2, home);
        }
        QProcess p;
        if (env)
            p.setProcessEnvironment(*env);
        if (fileSizeLimit > 0) {
            // A full disk, in effect, for files that grow past this size (EFBIG).
            p.setChildProcessModifier([fileSizeLimit] {
                ::signal(SIGXFSZ, SIG_IGN);
                struct rlimit rl
                {
                    static_cast<rlim_t>(fileSizeLimit), static_cast<rlim_t>(fileSizeLimit)
                };
                ::setrlimit(RLIMIT_FSIZE, &rl);
            });
        }
        p.start(qEnvironmentVariable("TOLLGATE_TEST_CLI", QStringLiteral(TOLLGATE_CLI_PATH)), args);
        if (!p.waitForFinished(20000)) {
            p.kill();
            p.waitForFinished(5000);
            return { -1, p.readAllStandardOutput(), p.readAllStandardError() };
        }
        return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
            p.readAllStandardError() };
    }
    Ran cli(QStringList args, qint64 fileSizeLimit = 0) const
    {
        return cliOn(m_home, std::move(args), fileSizeLimit);
    }
    static QStringList setArgs(const char* provider, int requests)
    {
        return { QStringLiteral("limits"), QStringLiteral("set"), QString::fromLatin1(provider),
            QStringLiteral("--requests"), QString::number(requests), QStringLiteral("--window"),
            QStringLiteral("600") };
    }
    static QByteArray readFile(const QString& path)
    {
        if (QFileInfo::exists(path) && !QFileInfo(path).isFile())
            return QByteArray("<not a file>"); // never open a FIFO here: it would block the test
        QFile f(path);
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray("<missing>");
    }
    // Every file under `dir` with its bytes: to show that nothing there changed.
    static std::map<QString, QByteArray> snapshot(const QString& dir)
    {
        std::map<QString, QByteArray> out;
        QDirIterator it(dir, QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden | QDir::System,
            QDirIterator::Subdirectories);
        while (it.hasNext()) {
            const QString path = it.next();
            out[path] = QFileInfo(path).isFile() ? readFile(path) : QByteArray("<not a file>");
        }
        return out;
    }
    QString file(const char* name) const { return m_home + QLatin1Char('/') + QLatin1String(name); }

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
};

void TestHomeFiles::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->path() + QStringLiteral("/home");
}

void TestHomeFiles::lostLimitsAreRefusedAndNoBackupIsOverwritten()
{
    QCOMPARE(cli(setArgs("a", 5)).code, 0);
    QCOMPARE(cli(setArgs("b", 7)).code, 0);
    const QByteArray backup = readFile(file("limits.json.bak"));
    QVERIFY(backup.contains("\"a\"") && backup.contains("\"b\""));
    QVERIFY(QFile::remove(file("limits.json")));

    // Not "no providers yet": a clear error naming the file, the backup and what it holds.
    auto status = cli({ QStringLiteral("status") });
    QCOMPARE(status.code, 3);
    QVERIFY2(status.err.contains("limits.json is missing") || status.err.contains("limits file is missing"),
        status.err.constData());
    QVERIFY2(status.err.contains("limits.json.bak holds 2 providers (a, b)") && status.err.contains("cp "),
        status.err.constData());
    QVERIFY(!status.out.contains("no providers"));

    // A limits change would have rewritten the only copy of b: it is refused, nothing written.
    auto set = cli(setArgs("a", 9));
    QCOMPARE(set.code, 3);
    QVERIFY2(set.err.contains("limits.json.bak"), set.err.constData());
    QVERIFY(!QFile::exists(file("limits.json")));
    QCOMPARE(readFile(file("limits.json.bak")), backup);
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("a"), QStringLiteral("--caller"),
                     QStringLiteral("x") })
                 .code,
        3);

    // Restoring as told brings both providers back.
    QVERIFY(QFile::copy(file("limits.json.bak"), file("limits.json")));
    auto after = cli({ QStringLiteral("limits"), QStringLiteral("show") });
    QCOMPARE(after.code, 0);
    QVERIFY2(after.out.contains("a") && after.out.contains("b"), after.out.constData());

    // The read side (the dashboard) says the same instead of showing an empty home.
    QVERIFY(QFile::remove(file("limits.json")));
    auto view = QuotaPeek::read(m_home.toStdString(), std::chrono::milliseconds(2000));
    QVERIFY(view.ok());
    QCOMPARE(QString::fromStdString(view->corruptFile), file("limits.json"));
    QVERIFY(view->corruptReason.find("limits.json.bak") != std::string::npos);
}

// A `limits set` killed between writing its temp files and renaming them leaves
// limits.json.<pid>.tmp and limits.json.bak.<pid>.tmp; one per kill, they would pile up. The
// next limit change removes those of dead writers that nobody touched for ten minutes, and
// leaves a live writer's (its pid answers) and a recent one's (a live writer in another pid
// namespace looks dead to kill(2)), and anything that is not a regular file.
void TestHomeFiles::tempFilesOfKilledLimitWritersAreSwept()
{
    QCOMPARE(cli(setArgs("a", 5)).code, 0);
    const QString dead = QString::number(TestSupport::deadPid());
    const QString live = QString::number(QCoreApplication::applicationPid());
    const auto plant = [this](const QString& name, bool old) {
        const QString path = m_home + QLatin1Char('/') + name;
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("{\"providers\":{}}");
        f.close();
        if (old) {
            const struct timespec times[2] = { { ::time(nullptr) - 3600, 0 }, { ::time(nullptr) - 3600, 0 } };
            QCOMPARE(::utimensat(AT_FDCWD, QFile::encodeName(path).constData(), times, 0), 0);
        }
    };
    plant(QStringLiteral("limits.json.") + dead + QStringLiteral(".tmp"), true);
    plant(QStringLiteral("limits.json.bak.") + dead + QStringLiteral(".tmp"), true);
    plant(QStringLiteral("limits.json.") + live + QStringLiteral(".tmp"), true);
    plant(QStringLiteral("limits.json.bak.") + dead + QStringLiteral("1.tmp"), false);
    QVERIFY(QDir(m_home).mkdir(QStringLiteral("limits.json.") + dead + QStringLiteral("2.tmp")));
    QCOMPARE(cli(setArgs("a", 6)).code, 0);
    QVERIFY(!QFile::exists(m_home + QStringLiteral("/limits.json.") + dead + QStringLiteral(".tmp")));
    QVERIFY(!QFile::exists(m_home + QStringLiteral("/limits.json.bak.") + dead + QStringLiteral(".tmp")));
    QVERIFY(QFile::exists(m_home + QStringLiteral("/limits.json.") + live + QStringLiteral(".tmp")));
    QVERIFY(QFile::exists(m_home + QStringLiteral("/limits.json.bak.") + dead + QStringLiteral("1.tmp")));
    QVERIFY(QFileInfo(m_home + QStringLiteral("/limits.json.") + dead + QStringLiteral("2.tmp")).isDir());
    QVERIFY(readFile(file("limits.json")).contains("\"requests\": 6"));
}

// state.bin deleted or emptied while limits.json stays: the next transaction starts the
// provider conservatively (window full, slots held). `status` showed the free capacity it would
// not give ("ok", 5 left, state_lost false) while the next acquire was refused.
void TestHomeFiles::aLostStateShowsAsTheNextCommandWillSeeIt_data()
{
    QTest::addColumn<bool>("deleted"); // else emptied
    QTest::newRow("state.bin deleted") << true;
    QTest::newRow("state.bin emptied") << false;
}

void TestHomeFiles::aLostStateShowsAsTheNextCommandWillSeeIt()
{
    QFETCH(bool, deleted);
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"), QStringLiteral("--requests"),
                     QStringLiteral("5"), QStringLiteral("--window"), QStringLiteral("600"), QStringLiteral("--parallel"),
                     QStringLiteral("2") })
                 .code,
        0);
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller=a") }).code, 0);
    if (deleted) {
        QVERIFY(QFile::remove(file("state.bin")));
    } else {
        QFile f(file("state.bin"));
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    }
    const Ran status = cli({ QStringLiteral("status"), QStringLiteral("--json") });
    QCOMPARE(status.code, 0);
    const QJsonObject p
        = QJsonDocument::fromJson(status.out).object().value(QStringLiteral("providers")).toArray().first().toObject();
    QVERIFY2(p.value(QStringLiteral("state_lost")).toBool(), status.out.constData());
    QCOMPARE(p.value(QStringLiteral("used_requests")).toInt(), 5);
    const Ran words = cli({ QStringLiteral("status") });
    QVERIFY2(words.out.contains("STATE LOST") && words.out.contains("5/5 requests"), words.out.constData());
    // What the next command sees: no room.
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller=b"),
                     QStringLiteral("--timeout"), QStringLiteral("0") })
                 .code,
        1);
}

void TestHomeFiles::lostLimitsSeenThroughTheState()
{
    QCOMPARE(cli(setArgs("a", 5)).code, 0);
    const QStringList backups = QDir(m_home).entryList({ QStringLiteral("limits.json*") }, QDir::Files);
    for (const QString& name : backups)
        QVERIFY(QFile::remove(m_home + QLatin1Char('/') + name));
    auto status = cli({ QStringLiteral("status") });
    QCOMPARE(status.code, 3);
    QVERIFY2(status.err.contains("state still tracks 1 provider (a)") && status.err.contains("state.bin"),
        status.err.constData());
    QCOMPARE(cli(setArgs("a", 9)).code, 3);
    QVERIFY(!QFile::exists(file("limits.json")));
    // Starting over is a deliberate act: remove the state, as the message says.
    QVERIFY(QFile::remove(file("state.bin")));
    QCOMPARE(cli(setArgs("a", 9)).code, 0);
}

void TestHomeFiles::backupsKeepThreeGenerations()
{
    for (int n = 1; n <= 4; ++n)
        QCOMPARE(cli(setArgs("a", n)).code, 0);
    QVERIFY(readFile(file("limits.json.bak")).contains("\"requests\": 4")
        || readFile(file("limits.json.bak")).contains("\"requests\":4"));
    auto requestsIn = [this](const char* name) {
        const auto doc = QJsonDocument::fromJson(readFile(file(name)));
        return doc.object()[QStringLiteral("providers")]
            .toObject()[QStringLiteral("a")]
            .toObject()[QStringLiteral("requests")]
            .toInt();
    };
    QCOMPARE(requestsIn("limits.json"), 4);
    QCOMPARE(requestsIn("limits.json.bak"), 4);
    QCOMPARE(requestsIn("limits.json.bak.1"), 3);
    QCOMPARE(requestsIn("limits.json.bak.2"), 2);
    QVERIFY(!QFile::exists(file("limits.json.bak.3")));
    QCOMPARE(QDir(m_home).entryList({ QStringLiteral("*.tmp") }, QDir::AllEntries).size(), 0);
}

void TestHomeFiles::nonRegularFilesAreRefusedWithoutHanging_data()
{
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("kind");
    for (const char* name :
        { "state.bin", "limits.json", "history.jsonl", "history.1.jsonl", "doorbell", "state.lock",
            "limits.json.bak", "limits.json.bak.1", "limits.json.bak.2" }) {
        for (const char* kind : { "fifo", "directory", "socket" })
            QTest::newRow((std::string(name) + " " + kind).c_str())
                << QString::fromLatin1(name) << QString::fromLatin1(kind);
    }
}

void TestHomeFiles::nonRegularFilesAreRefusedWithoutHanging()
{
    QFETCH(QString, name);
    QFETCH(QString, kind);
    QCOMPARE(cli(setArgs("api", 5)).code, 0);
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("x") })
                 .code,
        0);
    const QString path = m_home + QLatin1Char('/') + name;
    QFile::remove(path);
    const QByteArray p = path.toLocal8Bit();
    if (kind == QLatin1String("fifo")) {
        QCOMPARE(::mkfifo(p.constData(), 0600), 0);
    } else if (kind == QLatin1String("directory")) {
        QCOMPARE(::mkdir(p.constData(), 0700), 0);
    } else {
        const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
        QVERIFY(s >= 0);
        sockaddr_un addr {};
        addr.sun_family = AF_UNIX;
        QVERIFY(static_cast<std::size_t>(p.size()) < sizeof addr.sun_path);
        std::memcpy(addr.sun_path, p.constData(), static_cast<std::size_t>(p.size()));
        QCOMPARE(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
        ::close(s);
    }
    const QByteArray stateBefore = readFile(file("state.bin"));
    auto r = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("y"), QStringLiteral("--timeout"), QStringLiteral("2") });
    QVERIFY2(r.code != -1, "tollgate acquire hung (killed after 20 s)");
    QCOMPARE(r.code, 3);
    QVERIFY2(r.err.contains(name.toUtf8()) && r.err.contains("not a regular file"), r.err.constData());
    if (name != QLatin1String("state.bin"))
        QCOMPARE(readFile(file("state.bin")), stateBefore); // refused before anything was committed
    // Nobody else is left waiting on a lock held by a stuck process.
    auto other = cli({ QStringLiteral("limits"), QStringLiteral("show") });
    QVERIFY2(other.code != -1, "a second command hung");
    if (name.startsWith(QLatin1String("limits.json.bak"))) {
        // A limit change refuses it too, before committing: nothing is rotated down the
        // generations, and the limits stay as they were.
        const QByteArray limitsBefore = readFile(file("limits.json"));
        auto set = cli(setArgs("api", 3));
        QCOMPARE(set.code, 3);
        QVERIFY2(set.err.contains(name.toUtf8()), set.err.constData());
        QCOMPARE(readFile(file("limits.json")), limitsBefore);
        QFileInfo planted(path);
        QVERIFY(planted.exists() && !planted.isFile());
    }
}

void TestHomeFiles::foreignOrWritableFilesInsideAreRefused()
{
    QCOMPARE(cli(setArgs("api", 5)).code, 0);
    QCOMPARE(::chmod(file("limits.json").toLocal8Bit().constData(), 0666), 0);
    auto writable = cli({ QStringLiteral("status") });
    QCOMPARE(writable.code, 3);
    QVERIFY2(writable.err.contains("limits.json") && writable.err.contains("writable by others"),
        writable.err.constData());
    QCOMPARE(::chmod(file("limits.json").toLocal8Bit().constData(), 0600), 0);
    QCOMPARE(cli({ QStringLiteral("status") }).code, 0);
    if (::geteuid() != 0)
        QSKIP("needs root to give a file to another user");
    QCOMPARE(::chown(file("state.bin").toLocal8Bit().constData(), 65534, 65534), 0);
    auto foreign = cli({ QStringLiteral("status") });
    QCOMPARE(foreign.code, 3);
    QVERIFY2(
        foreign.err.contains("state.bin") && foreign.err.contains("another user"), foreign.err.constData());
}

void TestHomeFiles::historyFailureAfterTheCommitIsNotAFailure()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("5"), QStringLiteral("--window"),
                     QStringLiteral("600"), QStringLiteral("--parallel"), QStringLiteral("3") })
                 .code,
        0);
    // A history already 2 MiB long and a file size limit of 2 MiB: the state (slots at 0 and
    // 1 MiB) and limits.json can be written, the history cannot grow (EFBIG): a full disk
    // for the history only, which is what happens after the commit.
    const qint64 limit = 2 * 1024 * 1024;
    {
        QFile f(file("history.jsonl"));
        QVERIFY(f.open(QIODevice::Append));
        const QByteArray line = "{\"t\":1,\"type\":\"ok\",\"reason\":\"" + QByteArray(200, 'p') + "\"}\n";
        while (f.size() + line.size() <= limit)
            f.write(line);
        f.write(QByteArray(limit - f.size() - 1, ' ') + '\n');
        QCOMPARE(f.size(), limit);
    }
    const QList<QStringList> deeds {
        { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("a") },
        { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("s"),
            QStringLiteral("--slot") },
        { QStringLiteral("report-429"), QStringLiteral("api"), QStringLiteral("--caller"),
            QStringLiteral("a") },
        { QStringLiteral("pause"), QStringLiteral("api"), QStringLiteral("--reason"),
            QStringLiteral("test") },
        setArgs("api", 8),
    };
    for (const auto& args : deeds) {
        auto r = cli(args, limit);
        QVERIFY2(r.code == 0,
            qPrintable(args.join(u' ') + QStringLiteral(": exit ") + QString::number(r.code)
                + QStringLiteral(" ") + QString::fromUtf8(r.err)));
    }
    QCOMPARE(QFileInfo(file("history.jsonl")).size(), limit); // nothing of it was written

    // Every deed is done.
    auto status = cli({ QStringLiteral("status"), QStringLiteral("--json") });
    QCOMPARE(status.code, 0);
    QVERIFY2(status.out.contains("\"used_requests\":2"), status.out.constData());
    QVERIFY2(status.out.contains("\"paused\":true"), status.out.constData());
    auto limits = cli({ QStringLiteral("limits"), QStringLiteral("show"), QStringLiteral("--json") });
    QVERIFY2(limits.out.contains("\"requests\":8"), limits.out.constData());

    // With room again, the next event is preceded by a gap marker counting what was lost.
    QCOMPARE(cli({ QStringLiteral("resume"), QStringLiteral("api") }).code, 0);
    HistoryReader reader(m_home.toStdString());
    auto batch = reader.poll();
    QVERIFY(batch.ok());
    QVERIFY(batch->events.size() >= 2);
    const auto& gap = batch->events[batch->events.size() - 2];
    QCOMPARE(gap.type, EventType::Gap);
    QCOMPARE(gap.lost, std::int64_t(deeds.size()));
    QVERIFY(gap.sinceMs > 0 && gap.sinceMs <= batch->events.back().timeMs);
    QCOMPARE(batch->events.back().type, EventType::Resume);
    // Reported once: the next event has no marker before it.
    QCOMPARE(cli({ QStringLiteral("report-ok"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("a") })
                 .code,
        0);
    auto next = reader.poll();
    QCOMPARE(next->events.size(), std::size_t(1));
    QCOMPARE(next->events[0].type, EventType::Ok);
}

void TestHomeFiles::partialHistoryLineCostsOnlyItself()
{
    QCOMPARE(cli(setArgs("api", 5)).code, 0);
    {
        QFile f(file("history.jsonl"));
        QVERIFY(f.open(QIODevice::Append));
        f.write("{\"t\":999,\"type\":\"adm"); // a writer killed mid-line
    }
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("a") })
                 .code,
        0);
    HistoryReader reader(m_home.toStdString());
    auto b = reader.poll();
    QVERIFY(b.ok());
    QCOMPARE(b->badLines, std::size_t(1)); // the broken line alone
    QVERIFY(!b->events.empty());
    QCOMPARE(b->events.back().type, EventType::Admit);
    QCOMPARE(b->events.back().caller, std::string("a"));
}

void TestHomeFiles::swappedHomeNeverReadsOrWritesElsewhere()
{
    // A user who can write the home's parent exchanges the home with a symbolic link to a
    // directory of theirs, over and over, while commands run. (One uid here: the foreign
    // directory is marked by its provider "marker" instead of by its owner.)
    const QString foreign = m_dir->path() + QStringLiteral("/foreign");
    QCOMPARE(cliOn(foreign, setArgs("marker", 1)).code, 0);
    QCOMPARE(cli(setArgs("api", 1000)).code, 0);
    const auto foreignBefore = snapshot(foreign);
    const QString link = m_dir->path() + QStringLiteral("/swap");
    QVERIFY(QFile::link(foreign, link));

    std::atomic<bool> stop { false };
    std::atomic<long> swaps { 0 };
    const QByteArray h = m_home.toLocal8Bit(), l = link.toLocal8Bit();
    std::thread swapper([&] {
        while (!stop.load()) {
            if (::renameat2(AT_FDCWD, h.constData(), AT_FDCWD, l.constData(), RENAME_EXCHANGE) == 0)
                swaps.fetch_add(1);
        }
    });
    int worked = 0;
    QString failure;
    for (int i = 0; i < 150 && failure.isEmpty(); ++i) {
        const QStringList args = i % 3 == 0 ? QStringList { QStringLiteral("status") }
            : i % 3 == 1
            ? QStringList { QStringLiteral("limits"), QStringLiteral("show") }
            : QStringList { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                  QStringLiteral("c"), QStringLiteral("--timeout"), QStringLiteral("1") };
        auto r = cli(args);
        if (r.out.contains("marker") || r.err.contains("marker"))
            failure = QStringLiteral("read the foreign home: ") + QString::fromUtf8(r.out + r.err);
        else if (r.code != 0 && r.code != 3)
            failure = QStringLiteral("exit ") + QString::number(r.code) + QStringLiteral(": ")
                + QString::fromUtf8(r.err);
        worked += r.code == 0;
        // The dashboard's read side, in process.
        if (auto view = QuotaPeek::read(m_home.toStdString(), std::chrono::milliseconds(2000));
            view && view->limits.find("marker"))
            failure = QStringLiteral("QuotaPeek read the foreign limits");
        HistoryReader reader(m_home.toStdString());
        if (auto b = reader.poll(); b) {
            for (const auto& e : b->events) {
                if (e.provider == "marker")
                    failure = QStringLiteral("HistoryReader read the foreign history");
            }
        }
    }
    stop = true;
    swapper.join();
    if (QFileInfo(m_home).isSymLink())
        QCOMPARE(::renameat2(AT_FDCWD, h.constData(), AT_FDCWD, l.constData(), RENAME_EXCHANGE), 0);
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    QVERIFY(swaps.load() > 100); // the attack really ran
    QVERIFY(worked > 0); // and commands did run on the real home in between
    QVERIFY(snapshot(foreign) == foreignBefore); // nothing read there was written, nothing created
}

void TestHomeFiles::readSideCreatesNothing()
{
    const std::string missing = m_home.toStdString();
    QVERIFY(!HomeDir::check(missing).ok());
    QVERIFY(!QuotaPeek::read(missing, std::chrono::milliseconds(100)).ok());
    HistoryReader reader(missing);
    auto b = reader.poll();
    QVERIFY(b.ok());
    QVERIFY(b->events.empty());
    QVERIFY(!QFileInfo::exists(m_home));
    QVERIFY(QDir().mkpath(m_home));
    QVERIFY(HomeDir::check(missing).ok());
    QVERIFY(QuotaPeek::read(missing, std::chrono::milliseconds(100)).ok());
    QVERIFY(reader.poll().ok());
    QVERIFY(QDir(m_home).entryList(QDir::NoDotAndDotDot | QDir::AllEntries | QDir::Hidden).isEmpty());
}

// A mistyped --home (or TOLLGATE_HOME) must not grow a directory tree: a named home is
// created as its last directory only, and a missing parent is refused by name (exit 3, as for
// other unusable homes) before anything is created. Commands that could only fail or find
// nothing on a missing home create nothing at all.
void TestHomeFiles::namedHomeIsCreatedOnlyAsItsLastDirectory()
{
    const QString typoRoot = m_dir->path() + QStringLiteral("/typo");
    const QString typo = typoRoot + QStringLiteral("/deep/er");
    const QString parent = typoRoot + QStringLiteral("/deep");
    struct Case
    {
        QStringList args;
        int code;
        const char* says;
    };
    const QString p = QStringLiteral("openai");
    const QString caller = QStringLiteral("--caller=me");
    const std::vector<Case> cases {
        // These would create the home: the missing parent is refused, naming it.
        { setArgs("openai", 5), 3, "does not exist" },
        { { QStringLiteral("pause") }, 3, "does not exist" },
        // These have nothing to act on in a home that does not exist: answered without it
        // (acquire and run: no limits there, so no such provider; the home is named).
        { { QStringLiteral("acquire"), p, caller }, 2, "no Tollgate home at" },
        { { QStringLiteral("run"), p, caller, QStringLiteral("--"), QStringLiteral("true") }, 2,
            "unknown provider" },
        { { QStringLiteral("report-429"), p, caller }, 2, "unknown provider" },
        { { QStringLiteral("report-ok"), p, caller }, 2, "unknown provider" },
        { { QStringLiteral("pause"), p }, 2, "unknown provider" },
        { { QStringLiteral("reset-backoff"), p }, 2, "unknown provider" },
        { { QStringLiteral("limits"), QStringLiteral("remove"), p }, 2, "unknown provider" },
        { { QStringLiteral("release"), p, QStringLiteral("--fence"), QStringLiteral("1") }, 1,
            "nothing to release" },
        { { QStringLiteral("release-stale") }, 0, "nothing to release" },
        { { QStringLiteral("resume") }, 0, "nothing is paused" },
    };
    for (const Case& c : cases) {
        const Ran r = cliOn(typo, c.args);
        const QByteArray all = r.out + r.err;
        const QString what = c.args.join(QLatin1Char(' ')) + QStringLiteral(": ") + QString::fromUtf8(all);
        QVERIFY2(r.code == c.code, qPrintable(what));
        QVERIFY2(all.contains(c.says), qPrintable(what));
        if (c.code == 3)
            QVERIFY2(all.contains(parent.toUtf8()), qPrintable(what)); // the missing parent is named
        QVERIFY2(!QFileInfo::exists(typoRoot), qPrintable(what)); // nothing was created
    }

    // TOLLGATE_HOME is a named home as well.
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("TOLLGATE_HOME"), typo);
    const Ran r = cliOn(QString(), setArgs("openai", 5), 0, env);
    QVERIFY2(r.code == 3 && r.err.contains(parent.toUtf8()), r.err.constData());
    QVERIFY(!QFileInfo::exists(typoRoot));

    // Its parent there, a named home is created (0700) and works.
    QVERIFY(QDir().mkpath(parent));
    QCOMPARE(cliOn(typo, setArgs("openai", 5)).code, 0);
    struct stat st
    {
    };
    QCOMPARE(::stat(typo.toLocal8Bit().constData(), &st), 0);
    QCOMPARE(st.st_mode & 07777, mode_t(0700));
    QCOMPARE(cliOn(typo, { QStringLiteral("acquire"), p, caller }).code, 0);
}

void TestHomeFiles::commandsWithNothingToDoCreateNoHome()
{
    // The parent exists, the home does not: still nothing to release, report or switch.
    const QString caller = QStringLiteral("--caller=me");
    const QString p = QStringLiteral("openai");
    const std::vector<QStringList> nothingToDo {
        { QStringLiteral("release-stale") },
        { QStringLiteral("release-stale"), QStringLiteral("--overdue") },
        { QStringLiteral("release"), p, QStringLiteral("--fence"), QStringLiteral("7") },
        { QStringLiteral("report-ok"), p, caller },
        { QStringLiteral("report-429"), p, caller },
        { QStringLiteral("pause"), p },
        { QStringLiteral("resume"), p },
        { QStringLiteral("resume") },
        { QStringLiteral("reset-backoff"), p },
        { QStringLiteral("limits"), QStringLiteral("remove"), p },
        // Refused (no limits, so no such provider), as on an empty home: nothing made for it.
        { QStringLiteral("acquire"), p, caller, QStringLiteral("--timeout"), QStringLiteral("0") },
        { QStringLiteral("run"), p, caller, QStringLiteral("--"), QStringLiteral("true") },
    };
    for (const QStringList& args : nothingToDo) {
        const Ran r = cli(args);
        QVERIFY2(
            r.code >= 0 && r.code != 3, qPrintable(args.join(QLatin1Char(' ')) + QString::fromUtf8(r.err)));
        QVERIFY2(!QFileInfo::exists(m_home), qPrintable(args.join(QLatin1Char(' '))));
    }
    const Ran stale = cli({ QStringLiteral("release-stale"), QStringLiteral("--json") });
    QCOMPARE(stale.code, 0);
    QCOMPARE(QJsonDocument::fromJson(stale.out).object().value(QStringLiteral("released")).toInt(-1), 0);
    // A new user starts with `limits set`: that creates the home.
    QCOMPARE(cli(setArgs("openai", 5)).code, 0);
    QVERIFY(QFileInfo(m_home).isDir());
}

void TestHomeFiles::defaultHomeStillGetsItsParents()
{
    // No --home, no TOLLGATE_HOME: ~/.local/state/tollgate, parents created as ever.
    const QString user = m_dir->path() + QStringLiteral("/user");
    QVERIFY(QDir().mkpath(user));
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove(QStringLiteral("TOLLGATE_HOME"));
    env.remove(QStringLiteral("XDG_STATE_HOME"));
    env.insert(QStringLiteral("HOME"), user);
    const QString home = user + QStringLiteral("/.local/state/tollgate");
    QCOMPARE(cliOn(QString(), { QStringLiteral("release-stale") }, 0, env).code, 0);
    QVERIFY(!QFileInfo::exists(user + QStringLiteral("/.local"))); // nothing to release: nothing made
    const Ran set = cliOn(QString(), setArgs("openai", 5), 0, env);
    QVERIFY2(set.code == 0, set.err.constData());
    QVERIFY(QFileInfo(home + QStringLiteral("/limits.json")).isFile());
    const Ran got = cliOn(QString(),
        { QStringLiteral("acquire"), QStringLiteral("openai"), QStringLiteral("--caller=me") }, 0, env);
    QVERIFY2(got.code == 0, got.err.constData());
}

QTEST_GUILESS_MAIN(TestHomeFiles)
#include "tst_homefiles.moc"
