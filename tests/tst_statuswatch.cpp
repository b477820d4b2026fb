// `tollgate status --watch`: the real binary on a pseudo-terminal (forkpty), as a user at a
// terminal meets it — the figures of a known state, a change made meanwhile in a later frame,
// q, Ctrl-C, SIGINT and SIGTERM ending it with exit 0 and the terminal given back — and
// without a terminal (plain frames separated by a blank line). No sleeps: every wait polls
// the pty's output or the process with a deadline.

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <cerrno>
#include <csignal>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

namespace {

QStringList words(std::initializer_list<const char*> list)
{
    QStringList out;
    for (const char* w : list)
        out << QString::fromUtf8(w);
    return out;
}

constexpr int DEADLINE_MS = 20000;
const QByteArray LEAVE_SCREEN = QByteArrayLiteral("\x1b[?1049l");
const QByteArray ENTER_SCREEN = QByteArrayLiteral("\x1b[?1049h");

// One process on the slave side of a pty; the test holds the master.
class PtyProcess
{
public:
    PtyProcess() = default;
    ~PtyProcess()
    {
        if (m_pid > 0) {
            ::kill(m_pid, SIGKILL);
            ::waitpid(m_pid, nullptr, 0);
        }
        if (m_master >= 0)
            ::close(m_master);
    }
    PtyProcess(const PtyProcess&) = delete;
    PtyProcess& operator=(const PtyProcess&) = delete;

    bool start(std::initializer_list<const char*> args, const QList<QPair<QByteArray, QByteArray>>& env,
        bool colour = true)
    {
        winsize ws {};
        ws.ws_col = 160;
        ws.ws_row = 60;
        std::vector<QByteArray> storage;
        storage.push_back(QByteArrayLiteral(TOLLGATE_CLI_PATH));
        for (const char* a : args)
            storage.emplace_back(a);
        std::vector<char*> argv;
        for (auto& s : storage)
            argv.push_back(s.data());
        argv.push_back(nullptr);
        m_pid = ::forkpty(&m_master, nullptr, nullptr, &ws);
        if (m_pid < 0)
            return false;
        if (m_pid == 0) {
            ::setenv("TERM", "xterm", 1);
            if (colour)
                ::unsetenv("NO_COLOR");
            else
                ::setenv("NO_COLOR", "1", 1);
            for (const auto& [k, v] : env)
                ::setenv(k.constData(), v.constData(), 1);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        return true;
    }

    // Reads what is there (waiting at most waitMs for the first byte).
    void pump(int waitMs)
    {
        pollfd p { m_master, POLLIN, 0 };
        if (::poll(&p, 1, waitMs) <= 0)
            return;
        char buf[65536];
        for (;;) {
            const ssize_t n = ::read(m_master, buf, sizeof buf);
            if (n <= 0)
                return; // EIO once the slave side is closed
            m_output.append(buf, static_cast<int>(n));
            pollfd again { m_master, POLLIN, 0 };
            if (::poll(&again, 1, 0) <= 0)
                return;
        }
    }
    // Until `needle` appears in the output after offset `from`.
    bool waitFor(const QByteArray& needle, qsizetype from = 0)
    {
        QElapsedTimer t;
        t.start();
        while (m_output.indexOf(needle, from) < 0) {
            if (t.elapsed() > DEADLINE_MS || exited())
                return m_output.indexOf(needle, from) >= 0;
            pump(100);
        }
        return true;
    }
    // The exit code (−1: still running at the deadline, −2: killed by a signal).
    int waitExit()
    {
        QElapsedTimer t;
        t.start();
        while (!exited() && t.elapsed() < DEADLINE_MS)
            pump(50);
        pump(0);
        if (!exited())
            return -1;
        return WIFEXITED(m_status) ? WEXITSTATUS(m_status) : -2;
    }
    bool exited()
    {
        if (m_pid <= 0)
            return true;
        if (::waitpid(m_pid, &m_status, WNOHANG) == m_pid) {
            m_pid = -1;
            return true;
        }
        return false;
    }
    void write(const QByteArray& keys)
    {
        QCOMPARE(::write(m_master, keys.constData(), keys.size()), keys.size());
    }
    [[nodiscard]] termios modes() const
    {
        termios t {};
        ::tcgetattr(m_master, &t); // the slave's modes, as the child set them
        return t;
    }

    pid_t m_pid = -1;
    int m_master = -1;
    int m_status = 0;
    QByteArray m_output;
};

} // namespace

// `status --watch` writing to a pipe, not a terminal: plain frames one after another.
struct PlainWatch
{
    QProcess p;
    QByteArray out;
    QElapsedTimer t;

    bool start(const QString& home, const char* seconds)
    {
        auto e = QProcessEnvironment::systemEnvironment();
        e.insert(QStringLiteral("TOLLGATE_HOME"), home);
        e.remove(QStringLiteral("NO_COLOR")); // the plain output must be plain without it
        p.setProcessEnvironment(e);
        p.start(QStringLiteral(TOLLGATE_CLI_PATH), words({ "status", "--watch", seconds }));
        t.start();
        return p.waitForStarted();
    }
    // Reads until `done` holds or the deadline passes; returns done().
    template <typename Done> bool readUntil(Done done)
    {
        while (!done() && t.elapsed() < DEADLINE_MS) {
            p.waitForReadyRead(100);
            out += p.readAllStandardOutput();
        }
        return done();
    }
    bool readUntil(const char* text)
    {
        return readUntil([&] { return out.contains(text); });
    }
    // SIGTERM, as a user's Ctrl-C would end it; true when it exited by itself with 0.
    bool stop()
    {
        ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
        const bool finished = p.waitForFinished(DEADLINE_MS);
        out += p.readAllStandardOutput();
        return finished && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
    }
};

class TestStatusWatch final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void frameShowsTheCapacityOfAKnownState();
    void changeMadeMeanwhileAppearsInALaterFrame();
    void qExitsAndRestoresTheTerminal();
    void ctrlCKeyExitsAndRestoresTheTerminal();
    void sigintAndSigtermExitCleanly_data();
    void sigintAndSigtermExitCleanly();
    void noColorGivesNoColour();
    void notATerminalPrintsPlainFrames();
    void changeRedrawsWithoutWaitingForTheInterval();
    void homeRemovedAndCreatedAgainIsFollowed();
    void homeThatAppearsAndDisappearsIsShown();
    void corruptStateIsShownNotFatal();
    void badOptionsAreUsageErrors_data();
    void badOptionsAreUsageErrors();
    void statusJsonCarriesTheSameCapacity();

private:
    int cli(std::initializer_list<const char*> args) const;
    [[nodiscard]] QList<QPair<QByteArray, QByteArray>> env() const
    {
        return { { "TOLLGATE_HOME", m_home.toLocal8Bit() } };
    }
    void knownState();
    static bool restored(const termios& t) { return (t.c_lflag & ICANON) && (t.c_lflag & ECHO); }

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
};

void TestStatusWatch::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->filePath(QStringLiteral("home"));
}

int TestStatusWatch::cli(std::initializer_list<const char*> args) const
{
    QProcess p;
    auto e = QProcessEnvironment::systemEnvironment();
    e.insert(QStringLiteral("TOLLGATE_HOME"), m_home);
    p.setProcessEnvironment(e);
    p.start(QStringLiteral(TOLLGATE_CLI_PATH), words(args));
    if (!p.waitForFinished(60000))
        return -1;
    return p.exitCode();
}

// "api": 2 requests per 32 s window, both used by alice; 2 slots; 1000 tokens.
void TestStatusWatch::knownState()
{
    QCOMPARE(cli({ "limits", "set", "api", "--requests", "2", "--window", "32", "--parallel", "2", "--tokens",
                 "1000" }),
        0);
    QCOMPARE(cli({ "acquire", "api", "--caller", "alice", "--tokens", "300", "--timeout", "0" }), 0);
    QCOMPARE(cli({ "acquire", "api", "--caller", "alice", "--tokens", "100", "--timeout", "0" }), 0);
}

void TestStatusWatch::frameShowsTheCapacityOfAKnownState()
{
    knownState();
    PtyProcess p;
    QVERIFY(p.start({ "status", "--watch", "0.2" }, env()));
    QVERIFY2(p.waitFor("alice  2/min admitted"), p.m_output.constData());
    QVERIFY(p.m_output.startsWith(ENTER_SCREEN));
    // Blocked by the window, in red; the figures of the known state.
    QVERIFY(p.m_output.contains("\x1b[1;31mapi  BLOCKED  no request left in the window, next call in "));
    QVERIFY(p.m_output.contains("requests  0 left of 2 in 32 s (2 used), next frees in "));
    QVERIFY(p.m_output.contains("tokens    600 left of 1000 in 32 s (400 used)"));
    QVERIFY(p.m_output.contains("slots     0 of 2 in use, 2 free"));
    // Non-canonical while watching.
    QVERIFY(!(p.modes().c_lflag & ICANON));
    QVERIFY(!(p.modes().c_lflag & ECHO));
    p.write("q");
    QCOMPARE(p.waitExit(), 0);
}

void TestStatusWatch::changeMadeMeanwhileAppearsInALaterFrame()
{
    knownState();
    PtyProcess p;
    QVERIFY(p.start({ "status", "--watch", "0.2" }, env()));
    QVERIFY(p.waitFor("api  BLOCKED  no request left"));
    QVERIFY(!p.m_output.contains("coffee"));
    const auto mark = p.m_output.size();
    QCOMPARE(cli({ "pause", "api", "--reason", "coffee break" }), 0);
    QVERIFY2(p.waitFor("api  BLOCKED  paused, until resumed", mark), p.m_output.mid(mark).constData());
    QVERIFY(p.waitFor(": coffee break", mark));
    const auto mark2 = p.m_output.size();
    QCOMPARE(cli({ "report-429", "api", "--caller", "bob" }), 0);
    QCOMPARE(cli({ "resume", "api" }), 0);
    QVERIFY(p.waitFor("api  BLOCKED  backing off after a 429, next call in ", mark2));
    QVERIFY(p.waitFor("backoff   ", mark2));
    QVERIFY(p.waitFor("bob  0/min admitted, 1 x 429", mark2));
    p.write("q");
    QCOMPARE(p.waitExit(), 0);
}

void TestStatusWatch::qExitsAndRestoresTheTerminal()
{
    knownState();
    PtyProcess p;
    QVERIFY(p.start({ "status", "--watch" }, env())); // the default interval
    QVERIFY(p.waitFor("every 2 s"));
    QVERIFY(p.waitFor("api  BLOCKED"));
    QVERIFY(!restored(p.modes()));
    p.write("q");
    QCOMPARE(p.waitExit(), 0);
    // The last thing written leaves the alternate screen with the cursor shown again.
    QVERIFY(p.m_output.endsWith("\x1b[?25h" + LEAVE_SCREEN));
    QVERIFY(restored(p.modes()));
}

void TestStatusWatch::ctrlCKeyExitsAndRestoresTheTerminal()
{
    knownState();
    PtyProcess p;
    QVERIFY(p.start({ "status", "--watch", "0.3" }, env()));
    QVERIFY(p.waitFor("api  BLOCKED"));
    p.write("\x03"); // the line discipline turns it into SIGINT for the foreground group
    QCOMPARE(p.waitExit(), 0);
    QVERIFY(p.m_output.endsWith(LEAVE_SCREEN));
    QVERIFY(restored(p.modes()));
}

void TestStatusWatch::sigintAndSigtermExitCleanly_data()
{
    QTest::addColumn<int>("sig");
    QTest::newRow("SIGINT") << SIGINT;
    QTest::newRow("SIGTERM") << SIGTERM;
}

void TestStatusWatch::sigintAndSigtermExitCleanly()
{
    QFETCH(int, sig);
    PtyProcess p;
    QVERIFY(p.start({ "status", "--watch", "0.1" }, env()));
    QVERIFY(p.waitFor("no Tollgate home here yet"));
    ::kill(p.m_pid, sig);
    QCOMPARE(p.waitExit(), 0);
    QVERIFY(p.m_output.endsWith(LEAVE_SCREEN));
    QVERIFY(restored(p.modes()));
}

void TestStatusWatch::noColorGivesNoColour()
{
    knownState();
    PtyProcess p;
    QVERIFY(p.start({ "status", "--watch", "0.2" }, env(), false));
    QVERIFY(p.waitFor("api  BLOCKED"));
    p.write("q");
    QCOMPARE(p.waitExit(), 0);
    QVERIFY(p.m_output.contains(ENTER_SCREEN)); // still redrawn in place
    QVERIFY(!p.m_output.contains("\x1b[1;3"));
    QVERIFY(!p.m_output.contains("\x1b[2m"));
}

void TestStatusWatch::changeRedrawsWithoutWaitingForTheInterval()
{
    // An hour between frames: only the change feed can bring the second one within the test.
    knownState();
    PlainWatch w;
    QVERIFY(w.start(m_home, "3600"));
    QVERIFY2(w.readUntil("api  BLOCKED"), w.out.constData());
    QCOMPARE(w.out.count("Tollgate status"), 1);
    QCOMPARE(cli({ "pause", "api", "--reason", "seen at once" }), 0);
    const bool seen = w.readUntil("seen at once");
    QVERIFY(w.stop());
    QVERIFY2(seen, w.out.constData());
    QVERIFY(w.out.count("Tollgate status") >= 2);
}

void TestStatusWatch::homeRemovedAndCreatedAgainIsFollowed()
{
    // The feed watches the directory that was opened: after it is removed and a new one made
    // at the same path, the watch must follow the new one (an hour's interval otherwise).
    knownState();
    PlainWatch w;
    QVERIFY(w.start(m_home, "3600"));
    QVERIFY2(w.readUntil("api  BLOCKED"), w.out.constData());
    QVERIFY(QDir(m_home).removeRecursively());
    QCOMPARE(cli({ "limits", "set", "newcomer", "--requests", "3" }), 0);
    QVERIFY2(w.readUntil("newcomer"), w.out.constData());
    // A later change in the new home wakes the watch too (the old watch died with the old home).
    QCOMPARE(cli({ "pause", "newcomer", "--reason", "second change" }), 0);
    QVERIFY2(w.readUntil("second change"), w.out.constData());
    QVERIFY(w.stop());
}

void TestStatusWatch::notATerminalPrintsPlainFrames()
{
    knownState();
    PlainWatch w;
    QVERIFY(w.start(m_home, "0.1"));
    QVERIFY2(w.readUntil([&] { return w.out.count("Tollgate status") >= 3; }), w.out.constData());
    QVERIFY(w.stop());
    const QByteArray& out = w.out;
    QVERIFY(!out.contains('\x1b'));
    QVERIFY(!out.contains("q quits"));
    // Frames one after the other, each after one blank line.
    QVERIFY(out.startsWith("Tollgate status"));
    QVERIFY(out.contains("\n\nTollgate status"));
    QVERIFY(!out.contains("\n\n\nTollgate status"));
    QVERIFY(out.contains("api  BLOCKED  no request left in the window"));
}

void TestStatusWatch::homeThatAppearsAndDisappearsIsShown()
{
    PtyProcess p;
    QVERIFY(p.start({ "status", "--watch", "0.1" }, env()));
    QVERIFY(p.waitFor("no Tollgate home here yet"));
    const auto mark = p.m_output.size();
    QVERIFY(p.waitFor("no Tollgate home here yet", mark)); // another frame: still there, still running
    QVERIFY(!QFileInfo::exists(m_home)); // watching never creates the home

    QCOMPARE(cli({ "limits", "set", "fresh", "--requests", "10" }), 0);
    QVERIFY(p.waitFor("fresh  OK       next call can go now", mark));
    const auto mark2 = p.m_output.size();
    QVERIFY(QDir(m_home).removeRecursively());
    QVERIFY(p.waitFor("no Tollgate home here yet", mark2));
    QVERIFY(!p.exited());
    QCOMPARE(cli({ "limits", "set", "again", "--requests", "1" }), 0);
    QCOMPARE(cli({ "acquire", "again", "--caller", "carol", "--timeout", "0" }), 0);
    QVERIFY(p.waitFor("again  BLOCKED", mark2));
    QVERIFY(p.waitFor("carol  1/min admitted", mark2));
    p.write("q");
    QCOMPARE(p.waitExit(), 0);
}

void TestStatusWatch::corruptStateIsShownNotFatal()
{
    knownState();
    QFile f(m_home + QStringLiteral("/limits.json"));
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write("{\"providers\": \x1b[2J");
    f.close();
    PtyProcess p;
    QVERIFY(p.start({ "status", "--watch", "0.1" }, env()));
    QVERIFY2(p.waitFor("limits.json"), p.m_output.constData());
    const auto mark = p.m_output.size();
    QVERIFY(p.waitFor("Tollgate status", mark)); // and it goes on
    QVERIFY(!p.exited());
    p.write("q");
    QCOMPARE(p.waitExit(), 0);
    QVERIFY(!p.m_output.contains("\x1b[2J\x1b[2J"));
}

void TestStatusWatch::badOptionsAreUsageErrors_data()
{
    QTest::addColumn<QStringList>("args");
    QTest::newRow("json") << words({ "status", "--watch", "--json" });
    QTest::newRow("json first") << words({ "status", "--json", "--watch", "1" });
    QTest::newRow("zero") << words({ "status", "--watch", "0" });
    QTest::newRow("below") << words({ "status", "--watch", "0.05" });
    QTest::newRow("above") << words({ "status", "--watch", "3601" });
    QTest::newRow("huge") << words({ "status", "--watch", "1e300" });
    QTest::newRow("negative") << words({ "status", "--watch", "-1" });
    QTest::newRow("word") << words({ "status", "--watch", "soon" });
    QTest::newRow("nan") << words({ "status", "--watch", "nan" });
}

void TestStatusWatch::badOptionsAreUsageErrors()
{
    QFETCH(QStringList, args);
    QProcess p;
    p.start(QStringLiteral(TOLLGATE_CLI_PATH), args);
    QVERIFY(p.waitForFinished(DEADLINE_MS));
    QCOMPARE(p.exitCode(), 2);
    QVERIFY(p.readAllStandardError().contains("--watch"));
    QVERIFY(!QFileInfo::exists(m_home));
}

// Scripts get the figures the watch shows: `status --json` carries each provider's capacity.
void TestStatusWatch::statusJsonCarriesTheSameCapacity()
{
    knownState();
    QCOMPARE(cli({ "limits", "set", "idle", "--requests", "5", "--window", "60" }), 0);
    QProcess p;
    auto e = QProcessEnvironment::systemEnvironment();
    e.insert(QStringLiteral("TOLLGATE_HOME"), m_home);
    p.setProcessEnvironment(e);
    p.start(QStringLiteral(TOLLGATE_CLI_PATH), words({ "status", "--json" }));
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 0);
    QJsonParseError err {};
    const auto doc = QJsonDocument::fromJson(p.readAllStandardOutput(), &err);
    QVERIFY2(err.error == QJsonParseError::NoError, qPrintable(err.errorString()));
    QJsonObject api;
    QJsonObject idle;
    for (const auto v : doc.object().value(QStringLiteral("providers")).toArray()) {
        const auto o = v.toObject();
        if (o.value(QStringLiteral("provider")).toString() == QStringLiteral("api"))
            api = o.value(QStringLiteral("capacity")).toObject();
        if (o.value(QStringLiteral("provider")).toString() == QStringLiteral("idle"))
            idle = o.value(QStringLiteral("capacity")).toObject();
    }
    QVERIFY2(!api.isEmpty() && !idle.isEmpty(), doc.toJson().constData());
    // api: both requests of the 32 s window used, so blocked by the window until one frees.
    QCOMPARE(api.value(QStringLiteral("level")).toString(), QStringLiteral("blocked"));
    QCOMPARE(api.value(QStringLiteral("blocked_by")).toString(), QStringLiteral("window"));
    QCOMPARE(api.value(QStringLiteral("requests_left")).toInteger(), 0);
    QCOMPARE(api.value(QStringLiteral("tokens_left")).toInteger(), 600);
    QCOMPARE(api.value(QStringLiteral("slots_in_use")).toInteger(), 0);
    QCOMPARE(api.value(QStringLiteral("slots_free")).toInteger(), 2);
    const auto nextIn = api.value(QStringLiteral("next_call_in_ms")).toInteger(-1);
    // Within one window plus one bucket: the window counts whole buckets (core/quota/rollingwindow.h).
    QVERIFY2(nextIn > 0 && nextIn <= 32000 + 1000, qPrintable(QString::number(nextIn)));
    QVERIFY(api.value(QStringLiteral("blocked_until_ms")).toInteger() > 0);
    QCOMPARE(api.value(QStringLiteral("next_request_in_ms")).toInteger(), nextIn);
    // idle: nothing used, nothing blocking, no token or slot limit (null, not 0).
    QCOMPARE(idle.value(QStringLiteral("level")).toString(), QStringLiteral("ok"));
    QVERIFY(idle.value(QStringLiteral("blocked_by")).isNull());
    QCOMPARE(idle.value(QStringLiteral("requests_left")).toInteger(), 5);
    QCOMPARE(idle.value(QStringLiteral("next_call_in_ms")).toInteger(), 0);
    QVERIFY(idle.value(QStringLiteral("tokens_left")).isNull());
    QVERIFY(idle.value(QStringLiteral("slots_free")).isNull());
    QCOMPARE(idle.value(QStringLiteral("backoff_remaining_ms")).toInteger(), 0);
}

QTEST_GUILESS_MAIN(TestStatusWatch)
#include "tst_statuswatch.moc"
