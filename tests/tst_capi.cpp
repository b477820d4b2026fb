// The C library (libtollgate.so, clients/c) in real processes: the README's example compiled
// and run; bad input, a call used out of turn or after its home was closed, a cancel from
// another thread, fork() after open (tests/helpers/capiworker.c); its status is the CLI's; and
// C workers, CLI callers, Python and Node workers sharing one home — a directory and Redis — under a rolling
// window, a token limit and a parallel limit, with SIGKILLs at random: no overrun (judged from logs kept
// outside Tollgate), no lost slot (every slot admitted afterwards).

#include "helpers/redisserver.h"
#include "testsupport.h"

#include <QDateTime>
#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QProcessEnvironment>
#include <QRandomGenerator>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <csignal>
#include <ctime>
#include <map>
#include <memory>
#include <sys/stat.h>
#include <vector>

namespace {

// The callers' logs are stamped with CLOCK_MONOTONIC (every worker, and here a CLI caller's
// ask): one clock for all, which no step of the wall clock moves.
qint64 monotonicUs()
{
    timespec ts {};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<qint64>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

} // namespace

class TestCapi final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void readmeExampleCompilesAndRuns();
    void badInputAndOutOfTurnAreTypedErrors();
    void forkAfterOpenIsRefusedInTheChild();
    void theHttpAnswerSettlesItsUsageAndA429BacksOff();
    void statusIsTheClis();
    void aHomeMovedAwayAndRecreatedIsTheNewOne();
    void cPythonNodeAndCliShareAHomeUnderKills_data();
    void cPythonNodeAndCliShareAHomeUnderKills();

private:
    struct Ran
    {
        int code = -1;
        QByteArray out;
        QByteArray err;
    };
    Ran run(const QString& program, const QStringList& args) const;
    Ran cli(const QString& words) const
    {
        return run(QStringLiteral(TOLLGATE_CLI_PATH), words.split(QLatin1Char(' ')));
    }
    QProcessEnvironment environment() const;

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
    std::unique_ptr<RedisServer> m_redis;
    int m_redisHomes = 0;
};

QProcessEnvironment TestCapi::environment() const
{
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("TOLLGATE_HOME"), m_home);
    return env;
}

TestCapi::Ran TestCapi::run(const QString& program, const QStringList& args) const
{
    QProcess p;
    p.setProcessEnvironment(environment());
    p.start(program, args);
    Ran r;
    if (!p.waitForStarted(10000) || !p.waitForFinished(120000)) {
        p.kill();
        p.waitForFinished();
        return r;
    }
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

void TestCapi::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->filePath(QStringLiteral("home"));
}

void TestCapi::readmeExampleCompilesAndRuns()
{
    // The README shows example.c as it is (from its first #include to its end).
    QFile example(QStringLiteral(TOLLGATE_CAPI_EXAMPLE_SOURCE));
    QVERIFY(example.open(QIODevice::ReadOnly));
    QByteArray code = example.readAll();
    code = code.mid(code.indexOf("#include <stdio.h>")).trimmed();
    QFile readme(QStringLiteral(TOLLGATE_README));
    QVERIFY(readme.open(QIODevice::ReadOnly));
    QVERIFY2(readme.readAll().contains(code), "README.md does not show clients/c/example.c as it is");

    QCOMPARE(cli(QStringLiteral("limits set anthropic --requests 10 --window 60 --parallel 2 -q")).code, 0);
    const Ran r = run(QStringLiteral(TOLLGATE_CAPI_EXAMPLE_PATH), { m_home });
    QVERIFY2(r.code == 0, r.err.constData());
    const Ran status = cli(QStringLiteral("status --json"));
    const QJsonObject p = QJsonDocument::fromJson(status.out)[QStringLiteral("providers")][0].toObject();
    QCOMPARE(p[QStringLiteral("used_requests")].toInt(), 1);
    QCOMPARE(p[QStringLiteral("used_tokens")].toInt(), 1187 + 412); // settled to the real usage
    QCOMPARE(p[QStringLiteral("slots")].toArray().size(), 0);
}

void TestCapi::badInputAndOutOfTurnAreTypedErrors()
{
    QCOMPARE(cli(QStringLiteral("limits set p1 --requests 100 --window 60 --parallel 1 -q")).code, 0);
    const Ran r = run(
        QStringLiteral(TOLLGATE_CAPIWORKER_PATH), { QStringLiteral("checks"), m_home, QStringLiteral("p1") });
    QVERIFY2(r.code == 0, (r.out + r.err).constData());
    QVERIFY(r.out.contains("checks ok"));
    // Nothing left held or queued.
    const QJsonObject p
        = QJsonDocument::fromJson(cli(QStringLiteral("status --json")).out)[QStringLiteral("providers")][0]
              .toObject();
    QCOMPARE(p[QStringLiteral("slots")].toArray().size(), 0);
    QCOMPARE(p[QStringLiteral("queue")].toArray().size(), 0);
}

void TestCapi::forkAfterOpenIsRefusedInTheChild()
{
    QCOMPARE(cli(QStringLiteral("limits set p1 --requests 100 --window 60 --parallel 2 -q")).code, 0);
    const Ran r = run(
        QStringLiteral(TOLLGATE_CAPIWORKER_PATH), { QStringLiteral("fork"), m_home, QStringLiteral("p1") });
    QVERIFY2(r.code == 0, (r.out + r.err).constData());
    const QJsonObject p
        = QJsonDocument::fromJson(cli(QStringLiteral("status --json")).out)[QStringLiteral("providers")][0]
              .toObject();
    QCOMPARE(p[QStringLiteral("used_requests")].toInt(), 2); // the parent's and the child's own
    QCOMPARE(p[QStringLiteral("slots")].toArray().size(), 0);
}

void TestCapi::theHttpAnswerSettlesItsUsageAndA429BacksOff()
{
    QCOMPARE(
        cli(QStringLiteral("limits set anthropic --requests 100 --tokens 100000 --window 60 --parallel 2 -q"))
            .code,
        0);
    const Ran r = run(QStringLiteral(TOLLGATE_CAPIWORKER_PATH),
        { QStringLiteral("http"), m_home, QStringLiteral("anthropic") });
    QVERIFY2(r.code == 0, (r.out + r.err).constData());
    const QJsonObject p
        = QJsonDocument::fromJson(cli(QStringLiteral("status --json")).out)[QStringLiteral("providers")][0]
              .toObject();
    // The 200's estimate replaced by its usage (21 + 9); the 429's estimate stands, and it backs off.
    const int estimate = r.out.mid(r.out.indexOf("estimate ") + 9).split('\n').value(0).toInt();
    QVERIFY(estimate >= 300);
    QCOMPARE(p[QStringLiteral("used_tokens")].toInt(), 21 + 9 + estimate);
    QCOMPARE(p[QStringLiteral("consecutive_429s")].toInt(), 1);
    QVERIFY(p[QStringLiteral("backoff_remaining_ms")].toInt() > 0);
    QCOMPARE(p[QStringLiteral("slots")].toArray().size(), 0);
    // What the 200's headers said of the provider's own limit is kept (as the proxy keeps it).
    QCOMPARE(p[QStringLiteral("provider_reported")][QStringLiteral("requests_per_minute")].toInt(), 50);
}

void TestCapi::statusIsTheClis()
{
    QCOMPARE(
        cli(QStringLiteral("limits set p1 --requests 7 --tokens 900 --window 60 --parallel 3 -q")).code, 0);
    QCOMPARE(cli(QStringLiteral("acquire p1 --caller sh --tokens 40 -q")).code, 0);
    const Ran c = run(QStringLiteral(TOLLGATE_CAPIWORKER_PATH), { QStringLiteral("status"), m_home });
    QVERIFY2(c.code == 0, c.err.constData());
    QJsonObject ours = QJsonDocument::fromJson(c.out).object();
    QJsonObject theirs = QJsonDocument::fromJson(cli(QStringLiteral("status --json")).out).object();
    QVERIFY(!ours.isEmpty() && !theirs.isEmpty());
    QCOMPARE(ours.keys(), theirs.keys());
    QCOMPARE(ours[QStringLiteral("home")], theirs[QStringLiteral("home")]);
    const QJsonObject a = ours[QStringLiteral("providers")][0].toObject();
    const QJsonObject b = theirs[QStringLiteral("providers")][0].toObject();
    QCOMPARE(a.keys(), b.keys());
    for (const char* key :
        { "provider", "requests", "tokens", "parallel", "used_requests", "used_tokens", "budgets" })
        QCOMPARE(a[QLatin1String(key)], b[QLatin1String(key)]);
}

// An attack review found an open home went on counting in its old directory after the path
// was moved away and a new home made there: the library's call and a CLI caller were two
// holders of one slot (--parallel 1). A kept connection is used only while the path still
// names the directory it opened.
void TestCapi::aHomeMovedAwayAndRecreatedIsTheNewOne()
{
    QCOMPARE(cli(QStringLiteral("limits set p --requests 100 --window 60 --parallel 1 -q")).code, 0);
    QProcess worker;
    worker.start(
        QStringLiteral(TOLLGATE_CAPIWORKER_PATH), { QStringLiteral("moved"), m_home, QStringLiteral("p") });
    QVERIFY(worker.waitForStarted(10000));
    auto readLine = [&worker]() -> QByteArray {
        QDeadlineTimer deadline(30000);
        while (!worker.canReadLine() && !deadline.hasExpired() && worker.state() == QProcess::Running)
            worker.waitForReadyRead(500);
        return worker.readLine().trimmed();
    };
    QCOMPARE(readLine(), QByteArray("held"));
    QVERIFY(QDir().rename(m_home, m_home + QStringLiteral(".old")));
    QCOMPARE(cli(QStringLiteral("limits set p --requests 100 --window 60 --parallel 1 -q")).code, 0);
    worker.write("go\n");
    QCOMPARE(readLine(), QByteArray("admitted"));
    // Counted in the new home: its one slot is the library's, so the CLI waits for it.
    const QJsonObject status = QJsonDocument::fromJson(cli(QStringLiteral("status --json")).out).object();
    QCOMPARE(status[QStringLiteral("providers")][0]
                 .toObject()[QStringLiteral("capacity")]
                 .toObject()[QStringLiteral("slots_in_use")]
                 .toInt(),
        1);
    QVERIFY(cli(QStringLiteral("acquire p --caller sh --slot --timeout 0 -q")).code != 0);
    worker.write("done\n");
    QVERIFY(worker.waitForFinished(30000));
    QCOMPARE(worker.exitCode(), 0);

    // And a path that no longer is a home at all is refused, not served by the kept one.
    QProcess again;
    again.start(
        QStringLiteral(TOLLGATE_CAPIWORKER_PATH), { QStringLiteral("moved"), m_home, QStringLiteral("p") });
    QVERIFY(again.waitForStarted(10000));
    QDeadlineTimer deadline(30000);
    while (!again.canReadLine() && !deadline.hasExpired())
        again.waitForReadyRead(500);
    QCOMPARE(again.readLine().trimmed(), QByteArray("held"));
    QVERIFY(QDir(m_home).removeRecursively());
    QVERIFY(::mkfifo(QFile::encodeName(m_home).constData(), 0600) == 0);
    again.write("go\n");
    deadline.setRemainingTime(30000);
    while (!again.canReadLine() && !deadline.hasExpired())
        again.waitForReadyRead(500);
    const QByteArray refused = again.readLine().trimmed();
    QVERIFY2(refused.startsWith("refused"), refused.constData());
    again.write("done\n");
    QVERIFY(again.waitForFinished(30000));
}

void TestCapi::cPythonNodeAndCliShareAHomeUnderKills_data()
{
    QTest::addColumn<bool>("redis");
    QTest::newRow("directory") << false;
    QTest::newRow("redis") << true;
}

void TestCapi::cPythonNodeAndCliShareAHomeUnderKills()
{
    QFETCH(bool, redis);
    if (redis) {
        const auto home = RedisServer::testHome(m_redis, QStringLiteral("capi"), ++m_redisHomes);
        if (!home.skip.isEmpty())
            QSKIP(qPrintable(home.skip));
        QVERIFY2(home.failure.isEmpty(), qPrintable(home.failure));
        m_home = QString::fromStdString(home.url);
    }
    constexpr int REQUESTS = 12, TOKENS = 1300, PARALLEL = 3, CALL_TOKENS = 100;
    constexpr qint64 WINDOW_US = 1000000;
    QCOMPARE(cli(QStringLiteral("limits set storm --requests %1 --tokens %2 --window 1 --parallel %3 -q")
                     .arg(REQUESTS)
                     .arg(TOKENS)
                     .arg(PARALLEL))
                 .code,
        0);
    const QString log = m_dir->filePath(QStringLiteral("calls.log"));
    const QString worker = QStringLiteral(TOLLGATE_CAPIWORKER_PATH);
    std::vector<std::unique_ptr<QProcess>> procs;
    // Kinds of caller: C workers, CLI callers, Python workers (when Debian's python3 is there
    // and the library is not sanitized), Node workers (when the addon was built: not in a
    // sanitizer build).
    enum Kind { C, Cli, Python, Node };
    const bool python = TOLLGATE_CAPI_PYTHON && QFile::exists(QStringLiteral("/usr/bin/python3"));
    const bool node = !QStringLiteral(TOLLGATE_NODE_ADDON).isEmpty();
    auto start = [&](Kind kind) {
        auto p = std::make_unique<QProcess>();
        QProcessEnvironment env = environment();
        env.insert(QStringLiteral("TOLLGATE_LIBRARY"), QStringLiteral(TOLLGATE_CAPI_LIBRARY));
        env.insert(QStringLiteral("PYTHONPATH"), QStringLiteral(TOLLGATE_PYTHON_PACKAGE));
        env.insert(QStringLiteral("TOLLGATE_NODE_ADDON"), QStringLiteral(TOLLGATE_NODE_ADDON));
        env.insert(QStringLiteral("TOLLGATE_NODE_PACKAGE"), QStringLiteral(TOLLGATE_NODE_PACKAGE));
        p->setProcessEnvironment(env);
        p->setProcessChannelMode(QProcess::ForwardedErrorChannel);
        p->setProperty("kind", kind);
        if (kind == Node) {
            p->start(QStringLiteral("node"),
                { QStringLiteral(TOLLGATE_NODEWORKER_PATH), m_home, QStringLiteral("storm"), log,
                    QString::number(3 * CALL_TOKENS / 2) });
        } else if (kind == Python) {
            p->start(QStringLiteral("/usr/bin/python3"),
                { QStringLiteral(TOLLGATE_PYWORKER_PATH), m_home, QStringLiteral("storm"), log,
                    QString::number(
                        2 * CALL_TOKENS) }); // the token limit binds before the request limit, or not
        } else if (kind == Cli) {
            const QString lo = QString::number(monotonicUs());
            p->start(QStringLiteral(TOLLGATE_CLI_PATH),
                { QStringLiteral("run"), QStringLiteral("storm"), QStringLiteral("--caller"),
                    QStringLiteral("cli"), QStringLiteral("--tokens"), QString::number(CALL_TOKENS),
                    QStringLiteral("--timeout"), QStringLiteral("20"), QStringLiteral("--"), worker,
                    QStringLiteral("record"), log, lo, QString::number(CALL_TOKENS) });
        } else {
            p->start(worker,
                { QStringLiteral("loop"), m_home, QStringLiteral("storm"), log,
                    QString::number(CALL_TOKENS) });
        }
        QVERIFY(p->waitForStarted(10000));
        procs.push_back(std::move(p));
    };
    // Three C workers, two CLI callers, two Python workers and two Node workers (two calls each)
    // at all times; a SIGKILL every 100-300 ms.
    auto* rng = QRandomGenerator::global();
    int kills = 0;
    const qint64 end = QDateTime::currentMSecsSinceEpoch() + 6000;
    for (int i = 0; i < 3; ++i)
        start(C);
    for (int i = 0; i < 2; ++i)
        start(Cli);
    for (int i = 0; python && i < 2; ++i)
        start(Python);
    for (int i = 0; node && i < 2; ++i)
        start(Node);
    while (QDateTime::currentMSecsSinceEpoch() < end) {
        QTest::qWait(100 + static_cast<int>(rng->bounded(200)));
        auto& victim = procs[rng->bounded(static_cast<quint32>(procs.size()))];
        if (victim->state() == QProcess::Running) {
            ::kill(static_cast<pid_t>(victim->processId()), SIGKILL);
            ++kills;
        }
        // The finished and the killed are replaced, each by one of its kind (started after the
        // loop: start() grows procs).
        std::vector<Kind> again;
        for (auto& p : procs) {
            if (p->state() == QProcess::Running)
                continue;
            p->waitForFinished();
            again.push_back(static_cast<Kind>(p->property("kind").toInt()));
            p.reset();
        }
        procs.erase(std::remove(procs.begin(), procs.end(), nullptr), procs.end());
        for (Kind kind : again)
            start(kind);
    }
    for (auto& p : procs) {
        ::kill(static_cast<pid_t>(p->processId()), SIGKILL);
        p->waitForFinished();
    }
    procs.clear();

    // No slot lost: every slot is admitted again (the killed holders' are reclaimed).
    const Ran slots = run(worker,
        { QStringLiteral("slots"), m_home, QStringLiteral("storm"), QString::number(PARALLEL),
            QStringLiteral("30000") });
    QVERIFY2(slots.code == 0, (slots.out + slots.err).constData());

    // The logs, kept outside Tollgate: admissions (asked at lo, admitted by hi) and holds.
    struct Admission
    {
        qint64 lo, hi, tokens;
    };
    std::vector<Admission> admissions;
    // A hold: from its B (after the admission) to its E (before the slot goes back) — within the
    // slot's true holding; a killed holder's hold is its B alone (it held at least then).
    std::vector<std::pair<qint64, int>> edges;
    std::map<QByteArray, qint64> open; // pid (a Node worker's: pid.n) -> its hold's start
    int nodeHolds = 0;
    QFile f(log);
    QVERIFY(f.open(QIODevice::ReadOnly));
    auto close = [&](const QByteArray& pid, qint64 at) {
        const auto it = open.find(pid);
        if (it == open.end())
            return;
        edges.emplace_back(it->second, 1);
        edges.emplace_back(std::max(at, it->second), -1);
        open.erase(it);
    };
    for (const QByteArray& line : f.readAll().split('\n')) {
        const QList<QByteArray> w = line.split(' ');
        if (w.value(0) == "A" && w.size() == 4) {
            admissions.push_back({ w[1].toLongLong(), w[2].toLongLong(), w[3].toLongLong() });
        } else if (w.value(0) == "B" && w.size() == 3) {
            close(w[1], open.count(w[1]) ? open[w[1]] : 0); // an unended hold of the same pid: an instant
            nodeHolds += w[1].contains('.') ? 1 : 0;
            open[w[1]] = w[2].toLongLong();
        } else if (w.value(0) == "E" && w.size() == 3) {
            close(w[1], w[2].toLongLong());
        }
    }
    while (!open.empty())
        close(open.begin()->first, open.begin()->second);
    std::sort(edges.begin(), edges.end()); // at one instant, an end (-1) before a start
    int inFlight = 0, peak = 0;
    for (const auto& e : edges) {
        inFlight += e.second;
        peak = std::max(peak, inFlight);
    }
    QVERIFY2(peak <= PARALLEL, qPrintable(QStringLiteral("%1 holds at once").arg(peak)));
    QVERIFY2(
        admissions.size() >= 20, qPrintable(QStringLiteral("only %1 admissions").arg(admissions.size())));
    QVERIFY2(!node || nodeHolds > 0, "no Node worker was admitted");
    QVERIFY2(kills >= 5, qPrintable(QStringLiteral("only %1 kills").arg(kills)));
    // Definite overrun: more than the limit admitted surely within one window (max hi - min lo < window).
    std::sort(admissions.begin(), admissions.end(),
        [](const Admission& a, const Admission& b) { return a.lo < b.lo; });
    qint64 worstRequests = 0, worstTokens = 0;
    for (std::size_t i = 0; i < admissions.size(); ++i) {
        qint64 n = 0, tokens = 0;
        for (std::size_t j = i; j < admissions.size() && admissions[j].lo < admissions[i].lo + WINDOW_US;
             ++j) {
            if (admissions[j].hi < admissions[i].lo + WINDOW_US) {
                ++n;
                tokens += admissions[j].tokens;
            }
        }
        worstRequests = std::max(worstRequests, n);
        worstTokens = std::max(worstTokens, tokens);
    }
    qInfo(
        "%zu admissions (%d by Node workers), %d kills; at most %lld requests and %lld tokens surely in one "
        "window, %d holds at once",
        admissions.size(), nodeHolds, kills, worstRequests, worstTokens, peak);
    QVERIFY2(worstRequests <= REQUESTS,
        qPrintable(QStringLiteral("%1 requests in one window").arg(worstRequests)));
    QVERIFY2(worstTokens <= TOKENS, qPrintable(QStringLiteral("%1 tokens in one window").arg(worstTokens)));
}

QTEST_GUILESS_MAIN(TestCapi)
#include "tst_capi.moc"
