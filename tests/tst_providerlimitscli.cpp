// Limits in the provider's terms through the real `tollgate` binary (issue 25): input and
// output tokens, per-day budgets with a day that resets in a time zone, model classes of name
// patterns; what `limits show`, `status` and `export`/`import` say of them; every bad value
// refused with its name and nothing changed; a home written by the release before them kept
// byte for byte until a limit changes; and separate processes sharing the split budgets.

#include "helpers/redisserver.h"
#include "testsupport.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

class TestProviderLimitsCli final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void limitsInTheProvidersTermsAreSetShownAndCarried();
    void badValuesAreRefusedAndChangeNothing_data();
    void badValuesAreRefusedAndChangeNothing();
    void aStatedSplitAboveALimitFailsAtOnce();
    void processesShareTheOutputBudgetAndTheClass();
    void anOldHomeIsKeptByteForByteUntilALimitChanges();
    void aRedisHomeEnforcesTheSameAndFailsClosed();
    void reportOkCorrectsTheInputAndOutputUsed_data();
    void reportOkCorrectsTheInputAndOutputUsed();
    void learningIsTurnedOnAndTheUsersLimitsStayTheirs();

private:
    struct Ran
    {
        int code = -1;
        QByteArray out;
        QByteArray err;
    };
    Ran cli(QStringList args, const QString& home = {}) const;
    QByteArray limitsFile() const;

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
    std::unique_ptr<RedisServer> m_redis; // when scripts/test.sh shares none
    int m_redisHomes = 0;
};

namespace {

QStringList words(const char* text)
{
    return QString::fromUtf8(text).split(QLatin1Char(' '), Qt::SkipEmptyParts);
}

QJsonObject objectOf(const QByteArray& out)
{
    const auto doc = QJsonDocument::fromJson(out);
    if (doc.isArray() && !doc.array().isEmpty())
        return doc.array().first().toObject();
    return doc.object();
}

} // namespace

TestProviderLimitsCli::Ran TestProviderLimitsCli::cli(QStringList args, const QString& home) const
{
    // --home goes after the command words (limits set, or acquire).
    const int at = args.size() > 1 && args[0] == QStringLiteral("limits") ? 2 : 1;
    args.insert(at, QStringLiteral("--home"));
    args.insert(at + 1, home.isEmpty() ? m_home : home);
    QProcess p;
    p.start(QStringLiteral(TOLLGATE_CLI_PATH), args);
    if (!p.waitForStarted(10000) || !p.waitForFinished(60000)) {
        p.kill();
        p.waitForFinished(10000);
        return { -2, p.readAllStandardOutput(), p.readAllStandardError() };
    }
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
        p.readAllStandardError() };
}

QByteArray TestProviderLimitsCli::limitsFile() const
{
    QFile f(m_home + QStringLiteral("/limits.json"));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

void TestProviderLimitsCli::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->path() + QStringLiteral("/home");
}

void TestProviderLimitsCli::limitsInTheProvidersTermsAreSetShownAndCarried()
{
    auto r = cli(words(
        "limits set anthropic --requests 50 --input-tokens 30000 --output-tokens 8000 --window 60 "
        "--requests-per-day 5000 --output-tokens-per-day 2000000 --day-resets 00:00@America/Los_Angeles"));
    QVERIFY2(r.code == 0, r.err.constData());
    QVERIFY2(r.out.contains("30000 input tokens, 8000 output tokens per 60s"), r.out.constData());
    QVERIFY2(r.out.contains("resets 00:00@America/Los_Angeles"), r.out.constData());
    r = cli(QStringList { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("anthropic"),
        QStringLiteral("--class"), QStringLiteral("opus"), QStringLiteral("--models"),
        QStringLiteral("claude-opus-4*, claude-opus-5*"), QStringLiteral("--input-tokens"),
        QStringLiteral("20000") });
    QVERIFY2(r.code == 0, r.err.constData());
    QVERIFY2(r.out.contains("class opus (claude-opus-4*, claude-opus-5*)"), r.out.constData());

    r = cli(words("limits show --json anthropic"));
    QCOMPARE(r.code, 0);
    const QJsonObject shown = objectOf(r.out);
    QCOMPARE(shown.value(QStringLiteral("input_tokens")).toInt(), 30000);
    QCOMPARE(shown.value(QStringLiteral("output_tokens")).toInt(), 8000);
    QCOMPARE(
        shown.value(QStringLiteral("day_resets")).toString(), QStringLiteral("00:00@America/Los_Angeles"));
    QCOMPARE(
        shown.value(QStringLiteral("per_day")).toObject().value(QStringLiteral("requests")).toInt(), 5000);
    const QJsonObject opus
        = shown.value(QStringLiteral("models")).toObject().value(QStringLiteral("opus")).toObject();
    QCOMPARE(opus.value(QStringLiteral("match")).toArray().size(), 2);
    QCOMPARE(opus.value(QStringLiteral("input_tokens")).toInt(), 20000);

    // status: every budget, with its use, and the class by its members.
    QCOMPARE(cli(words("acquire anthropic --caller a --model claude-opus-4-1 --input-tokens 700 "
                       "--output-tokens 300"))
                 .code,
        0);
    r = cli(words("status"));
    QCOMPARE(r.code, 0);
    QVERIFY2(
        r.out.contains("700/30000 input tokens, 300/8000 output tokens in the last 60s"), r.out.constData());
    QVERIFY2(
        r.out.contains("1/5000 requests, 300/2000000 output tokens today (resets in "), r.out.constData());
    QVERIFY2(r.out.contains("class opus (claude-opus-4*, claude-opus-5*): 700/20000 input tokens"),
        r.out.constData());
    r = cli(words("status --json"));
    QCOMPARE(r.code, 0);
    QVERIFY2(
        r.out.contains("\"metric\":\"output_tokens\"") || r.out.contains("\"metric\": \"output_tokens\""),
        r.out.constData());

    // export / import carry all of it to another home, exactly.
    r = cli(words("limits export"));
    QCOMPARE(r.code, 0);
    const QString doc = m_dir->path() + QStringLiteral("/limits-export.json");
    QFile f(doc);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(r.out);
    f.close();
    const QString other = m_dir->path() + QStringLiteral("/other");
    r = cli({ QStringLiteral("limits"), QStringLiteral("import"), doc }, other);
    QVERIFY2(r.code == 0, r.err.constData());
    QFile copied(other + QStringLiteral("/limits.json"));
    QVERIFY(copied.open(QIODevice::ReadOnly));
    QCOMPARE(copied.readAll(), limitsFile());
}

void TestProviderLimitsCli::badValuesAreRefusedAndChangeNothing_data()
{
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QByteArray>("said");
    QTest::newRow("unknown zone") << words("--requests-per-day 100 --day-resets 00:00@Mars/Olympus")
                                  << QByteArray("unknown time zone 'Mars/Olympus'");
    QTest::newRow("bad time") << words("--requests-per-day 100 --day-resets 25:00")
                              << QByteArray("from 00:00 to 23:59");
    QTest::newRow("day below window") << words(
        "--requests-per-day 10") << QByteArray("per_day.requests (10) is below requests per window (50)");
    QTest::newRow("huge") << words("--input-tokens 1e300")
                          << QByteArray("--input-tokens must be a whole number between 1 and 1099511627776");
    QTest::newRow("negative") << words("--output-tokens-per-day -5")
                              << QByteArray("--output-tokens-per-day must be");
    QTest::newRow("empty pattern") << words("--class opus --models , --requests 5")
                                   << QByteArray("an empty model pattern matches no model");
    QTest::newRow("models without class") << words("--models claude-* --requests 5") << QByteArray("--class");
    QTest::newRow("class and model") << words("--class a --model b --requests 5") << QByteArray("excludes");
    QTest::newRow("day reset of a class")
        << words("--class opus --requests 5 --day-resets 00:00") << QByteArray("excludes");
}

void TestProviderLimitsCli::badValuesAreRefusedAndChangeNothing()
{
    QFETCH(QStringList, args);
    QFETCH(QByteArray, said);
    QCOMPARE(cli(words("limits set anthropic --requests 50 --window 60")).code, 0);
    const QByteArray before = limitsFile();
    QVERIFY(!before.isEmpty());
    auto r = cli(
        QStringList { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("anthropic") } + args);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains(said), r.err.constData());
    QCOMPARE(limitsFile(), before);
}

void TestProviderLimitsCli::aStatedSplitAboveALimitFailsAtOnce()
{
    QCOMPARE(cli(words("limits set anthropic --output-tokens 8000")).code, 0);
    auto r
        = cli(words("acquire anthropic --caller big --input-tokens 10 --output-tokens 32000 --timeout 3600"));
    QCOMPARE(r.code, 2); // at once: waiting an hour could not help
    QVERIFY2(r.err.contains("32000 output tokens, but provider 'anthropic' allows 8000 per window"),
        r.err.constData());
    QVERIFY(
        cli(words("acquire anthropic --caller both --tokens 5 --output-tokens 5")).code == 2); // exclusive
}

void TestProviderLimitsCli::processesShareTheOutputBudgetAndTheClass()
{
    QCOMPARE(cli(words("limits set anthropic --requests 1000 --output-tokens 10000 --window 600")).code, 0);
    QCOMPARE(cli(QStringList { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("anthropic"),
                     QStringLiteral("--class"), QStringLiteral("opus"), QStringLiteral("--models"),
                     QStringLiteral("claude-opus-*"), QStringLiteral("--requests"), QStringLiteral("3") })
                 .code,
        0);
    // Four processes at once, each reserving 3,000 output tokens: three fit, the fourth waits
    // (and gives up at its short timeout) — whichever it is.
    std::vector<std::unique_ptr<QProcess>> ps;
    for (int i = 0; i < 4; ++i) {
        auto p = std::make_unique<QProcess>();
        p->start(QStringLiteral(TOLLGATE_CLI_PATH),
            words("acquire anthropic --caller p --output-tokens 3000 --input-tokens 1 --timeout 1 --home")
                << m_home);
        ps.push_back(std::move(p));
    }
    int admitted = 0;
    int timedOut = 0;
    for (auto& p : ps) {
        QVERIFY(p->waitForFinished(60000));
        admitted += p->exitCode() == 0;
        timedOut += p->exitCode() == 1;
    }
    QCOMPARE(admitted, 3);
    QCOMPARE(timedOut, 1);
    // The class pools its members: three opus calls of any version use it up; a sonnet call
    // still goes (the provider has room for requests, and it asks for no output).
    for (const char* model : { "claude-opus-4", "claude-opus-5" })
        QCOMPARE(cli(words("acquire anthropic --caller c --input-tokens 1 --output-tokens 0 --model")
                     << QString::fromLatin1(model))
                     .code,
            0);
    QCOMPARE(
        cli(words("acquire anthropic --caller c --input-tokens 1 --output-tokens 0 --model claude-opus-4-1"))
            .code,
        0);
    QCOMPARE(cli(words("acquire anthropic --caller c --input-tokens 1 --output-tokens 0 --timeout 0.2 "
                       "--model claude-opus-9"))
                 .code,
        1);
    QCOMPARE(
        cli(words("acquire anthropic --caller c --input-tokens 1 --output-tokens 0 --model claude-sonnet-4"))
            .code,
        0);
}

void TestProviderLimitsCli::anOldHomeIsKeptByteForByteUntilALimitChanges()
{
    // limits.json as the release before these metrics wrote it (its key order and numbers):
    // the same limits set today give the same bytes. (A home is made by the CLI: a home with
    // limits but no state reads as a lost state, every window full.)
    const QByteArray old
        = "{\n  \"providers\": {\n    \"api\": {\n      \"backoff_base_seconds\": 60.0,\n"
          "      \"backoff_cap_seconds\": 900.0,\n      \"headroom_percent\": 100,\n"
          "      \"max_hold_seconds\": 600.0,\n      \"models\": {\n        \"m\": {\n"
          "          \"requests\": 2,\n          \"window_seconds\": 60.0\n        }\n      },\n"
          "      \"requests\": 5,\n      \"window_seconds\": 60.0\n    }\n  },\n  \"version\": 1\n}\n";
    QCOMPARE(cli(words("limits set api --requests 5 --window 60")).code, 0);
    QCOMPARE(cli(words("limits set api --model m --requests 2")).code, 0);
    QCOMPARE(limitsFile(), old);
    QCOMPARE(cli(words("acquire api --caller a --model m")).code, 0);
    QCOMPARE(cli(words("status")).code, 0);
    QCOMPARE(limitsFile(), old);
    // The model of the old form is a class of its own name: its limit still holds.
    QCOMPARE(cli(words("acquire api --caller a --model m")).code, 0);
    QCOMPARE(cli(words("acquire api --caller a --model m --timeout 0.2")).code, 1);
    // The state stays in the format the release before reads (3: nothing of 4 in use).
    QFile state(m_home + QStringLiteral("/state.bin"));
    QVERIFY(state.open(QIODevice::ReadOnly));
    QVERIFY(state.readAll().contains(QByteArray("TGQS\x03\x00\x00\x00", 8)));
    // A new limit rewrites it in the new form, with what was there kept.
    QCOMPARE(cli(words("limits set api --output-tokens 900")).code, 0);
    const QByteArray now = limitsFile();
    QVERIFY(now.contains("\"output_tokens\": 900"));
    QVERIFY(now.contains("\"requests\": 2"));
    QVERIFY(now.contains("\"requests\": 5"));
}

void TestProviderLimitsCli::aRedisHomeEnforcesTheSameAndFailsClosed()
{
    const QByteArray url = qgetenv("TOLLGATE_TEST_REDIS_URL");
    if (url.isEmpty())
        QSKIP("no TOLLGATE_TEST_REDIS_URL");
    const QString home = QString::fromUtf8(url) + QStringLiteral("/11");
    // The split, a rolling day and classes of patterns are enforced there, as here...
    auto r = cli(words("limits set p --requests 5 --output-tokens 10 --requests-per-day 50"), home);
    QVERIFY2(r.code == 0, r.err.constData());
    r = cli(QStringList { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("p"),
                QStringLiteral("--class"), QStringLiteral("opus"), QStringLiteral("--models"),
                QStringLiteral("claude-opus-*"), QStringLiteral("--requests"), QStringLiteral("1") },
        home);
    QVERIFY2(r.code == 0, r.err.constData());
    QCOMPARE(cli(words("acquire p --caller a --model claude-opus-4 --input-tokens 1 --output-tokens 6"), home)
                 .code,
        0);
    r = cli(
        words(
            "acquire p --caller a --model claude-sonnet-4 --input-tokens 1 --output-tokens 6 --timeout 0.2"),
        home);
    QCOMPARE(r.code, 1); // 12 output tokens > 10
    QVERIFY2(r.err.contains("tokens"), r.err.constData());
    r = cli(
        words("acquire p --caller a --model claude-opus-5 --input-tokens 1 --output-tokens 1 --timeout 0.2"),
        home);
    QCOMPARE(r.code, 1); // the class holds one request
    // ...and a calendar day too: the script has no time-zone database, the client gives it the
    // days around its clock.
    r = cli(words("limits set p --day-resets 00:00@America/Los_Angeles"), home);
    QVERIFY2(r.code == 0, r.err.constData());
    r = cli(words("limits show --json p"), home);
    QCOMPARE(r.code, 0);
    QCOMPARE(objectOf(r.out).value(QStringLiteral("day_resets")).toString(),
        QStringLiteral("00:00@America/Los_Angeles"));
    r = cli(words("status"), home);
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.contains("requests today (resets in "), r.out.constData());
    // A hostile value written into the limits key (a pattern of many wildcards, a negative
    // output limit): the script fails closed, nothing is admitted, the client names the key.
    for (const char* forged :
        { R"({"bb":60000,"bc":900000,"h":100,"m":{"x":{"g":["*"],"p":["^.*.*.*.*.*a$"],"r":1,"w":60000}},)"
          R"("mh":600000,"r":5,"w":60000})",
            R"({"bb":60000,"bc":900000,"h":100,"mh":600000,"r":5,"w":60000,"ot":-4})" }) {
        QProcess redisCli;
        redisCli.start(QStringLiteral("redis-cli"),
            { QStringLiteral("-u"), home, QStringLiteral("HSET"), QStringLiteral("{tollgate}:limits"),
                QStringLiteral("p"), QString::fromLatin1(forged) });
        QVERIFY(redisCli.waitForFinished(10000) && redisCli.exitCode() == 0);
        r = cli(
            words("acquire p --caller a --model zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"),
            home);
        QCOMPARE(r.code, 3);
        QVERIFY2(r.err.contains("{tollgate}:limits"), r.err.constData());
    }
    QCOMPARE(cli(words("limits remove p"), home).code, 0);
}

void TestProviderLimitsCli::reportOkCorrectsTheInputAndOutputUsed_data()
{
    QTest::addColumn<bool>("redis");
    QTest::newRow("file home") << false;
    QTest::newRow("redis home") << true;
}

void TestProviderLimitsCli::reportOkCorrectsTheInputAndOutputUsed()
{
    // acquire --slot with a split estimate, then report-ok --fence with the split really used:
    // the window's tokens, input and output tokens count what was used, seen by `status` in
    // another process. Bad combinations are refused (exit 2, the options named) and change
    // nothing. On a file home, and on a Redis home (the script corrects the same way).
    QFETCH(bool, redis);
    QString home = m_home;
    if (redis) {
        const auto h = RedisServer::testHome(m_redis, QStringLiteral("split"), ++m_redisHomes);
        if (!h.skip.isEmpty())
            QSKIP(qPrintable(h.skip));
        QVERIFY2(h.failure.isEmpty(), qPrintable(h.failure));
        home = QString::fromStdString(h.url);
    }
    auto run = [&](const char* text, const QStringList& more = {}) { return cli(words(text) + more, home); };
    Ran r = run(
        "limits set p --requests 100 --input-tokens 10000 --output-tokens 4000 --parallel 2 --window 60");
    QVERIFY2(r.code == 0, r.err.constData());

    struct Usage
    {
        qint64 tokens = -1, input = -1, output = -1, slots = -1;
        bool operator==(const Usage&) const = default;
    };
    auto usage = [&] {
        const Ran s = run("status --json");
        const QJsonObject p = QJsonDocument::fromJson(s.out)
                                  .object()
                                  .value(QStringLiteral("providers"))
                                  .toArray()
                                  .first()
                                  .toObject();
        Usage u;
        u.tokens = p.value(QStringLiteral("used_tokens")).toInteger(-1);
        u.slots = p.value(QStringLiteral("slots")).toArray().size();
        for (const QJsonValue b : p.value(QStringLiteral("budgets")).toArray()) {
            const QJsonObject o = b.toObject();
            if (o.value(QStringLiteral("per")).toString() != QStringLiteral("window"))
                continue;
            if (o.value(QStringLiteral("metric")).toString() == QStringLiteral("input_tokens"))
                u.input = o.value(QStringLiteral("used")).toInteger(-1);
            if (o.value(QStringLiteral("metric")).toString() == QStringLiteral("output_tokens"))
                u.output = o.value(QStringLiteral("used")).toInteger(-1);
        }
        return u;
    };
    auto acquire = [&](const char* text) {
        const Ran a = run(text);
        const qint64 fence = objectOf(a.out).value(QStringLiteral("fence")).toInteger();
        return a.code == 0 && objectOf(a.out).value(QStringLiteral("slot")).toBool() ? QString::number(fence)
                                                                                     : QString();
    };

    // A split estimate, used less on input and far less on output.
    QString fence = acquire("acquire p --caller a --slot --json --input-tokens 3000 --output-tokens 1000");
    QVERIFY(!fence.isEmpty());
    QCOMPARE(usage(), (Usage { 4000, 3000, 1000, 1 }));
    // The slot keeps the estimate's split: report-ok needs only what was used.
    r = run("report-ok p --caller a --json --input-tokens-used 2500 --output-tokens-used 300 --fence", { fence });
    QVERIFY2(r.code == 0, r.err.constData());
    QJsonObject j = objectOf(r.out);
    QCOMPARE(j.value(QStringLiteral("released")).toBool(), true);
    QCOMPARE(j.value(QStringLiteral("tokens_used")).toInteger(), 2800);
    QCOMPARE(j.value(QStringLiteral("input_tokens_used")).toInteger(), 2500);
    QCOMPARE(j.value(QStringLiteral("output_tokens_used")).toInteger(), 300);
    QCOMPARE(usage(), (Usage { 2800, 2500, 300, 0 }));

    // An unsplit estimate counted whole toward input and output: corrected from that.
    fence = acquire("acquire p --caller a --slot --json --tokens 1000");
    QVERIFY(!fence.isEmpty());
    QCOMPARE(usage(), (Usage { 3800, 3500, 1300, 1 }));
    r = run("report-ok p --caller a --input-tokens-used 400 --output-tokens-used 100 --fence", { fence });
    QVERIFY2(r.code == 0, r.err.constData());
    QVERIFY2(
        r.out.contains("the window counts 500 tokens for it (400 input, 100 output)"), r.out.constData());
    QCOMPARE(usage(), (Usage { 3300, 2900, 400, 0 }));

    // --tokens-used with the split: accepted when it is their sum.
    fence = acquire("acquire p --caller a --slot --json --input-tokens 200 --output-tokens 100");
    QVERIFY(!fence.isEmpty());
    QCOMPARE(usage(), (Usage { 3600, 3100, 500, 1 }));
    const QStringList repeated { QStringLiteral("--fence"), fence };

    // Bad combinations: exit 2, the options named, nothing recorded (the slot is still held).
    struct Bad
    {
        const char* args;
        const char* said;
        bool withFence;
    };
    const Bad bad[] = {
        { "--input-tokens-used 5 --output-tokens-used 5", "--input-tokens-used needs --fence N", false },
        { "--output-tokens-used 5", "--input-tokens-used and --output-tokens-used go together", true },
        { "--tokens-used 300 --input-tokens-used 250 --output-tokens-used 60",
            "--tokens-used 300 is not --input-tokens-used 250 + --output-tokens-used 60 (310)", true },
        { "--input-tokens 200 --input-tokens-used 5 --output-tokens-used 5", "--input-tokens", true },
        { "--input-tokens-used 1099511627777 --output-tokens-used 0", "from 0 to 1099511627776", true },
    };
    for (const Bad& b : bad) {
        QStringList args = words("report-ok p --caller a") + words(b.args);
        if (b.withFence)
            args << QStringLiteral("--fence") << fence;
        r = cli(args, home);
        QVERIFY2(r.code == 2, b.args);
        QVERIFY2(r.err.contains(b.said), r.err.constData());
        QCOMPARE(usage(), (Usage { 3600, 3100, 500, 1 }));
    }

    r = run(
        "report-ok p --caller a --tokens-used 300 --input-tokens-used 250 --output-tokens-used 50", repeated);
    QVERIFY2(r.code == 0, r.err.constData());
    QCOMPARE(usage(), (Usage { 3600, 3150, 450, 0 }));
    // Once more: the slot is gone; the success is recorded, the tokens are not corrected again
    // (nor checked against a slot that is not there).
    r = run("report-ok p --caller a --input-tokens-used 1 --output-tokens-used 1", repeated);
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("no slot with fence") && r.err.contains("not corrected"), r.err.constData());
    QCOMPARE(usage(), (Usage { 3600, 3150, 450, 0 }));
    if (redis)
        QCOMPARE(run("limits remove p").code, 0);
}

QTEST_GUILESS_MAIN(TestProviderLimitsCli)
#include "tst_providerlimitscli.moc"

// --learn says which limits stay the user's; a limit the user gives (or drops) loses its learned
// mark; --no-learn keeps what was learned as the user's; adopt needs figures the provider stated.
void TestProviderLimitsCli::learningIsTurnedOnAndTheUsersLimitsStayTheirs()
{
    auto r = cli(words("limits set anthropic --requests 50 --learn"));
    QVERIFY2(r.code == 0, r.err.constData());
    QVERIFY2(r.out.contains("requests is yours and will not follow"), r.out.constData());
    QVERIFY(limitsFile().contains("\"learn\": true"));
    QCOMPARE(cli(words("limits set anthropic --class opus --learn --requests 5")).code, 2); // the provider's

    // What the proxy would have learned (as limits.json holds it), written as a user may edit it.
    QByteArray text = limitsFile();
    text.replace("\"learn\": true,", "\"learn\": true, \"learned\": [\"input_tokens\", \"output_tokens\"], "
                                     "\"input_tokens\": 30000, \"output_tokens\": 8000,");
    {
        QFile f(m_home + QStringLiteral("/limits.json"));
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(text);
    }
    r = cli(words("limits show --json anthropic"));
    QVERIFY2(r.code == 0, r.err.constData());
    QCOMPARE(objectOf(r.out).value(QStringLiteral("learned")).toArray().size(), 2);
    r = cli(words("limits show anthropic"));
    QVERIFY2(r.out.contains("(from the provider: input_tokens output_tokens)"), r.out.constData());

    // The user sets input tokens: theirs; drops output tokens: gone, and no longer marked.
    r = cli(words("limits set anthropic --input-tokens 20000 --no-output-tokens"));
    QVERIFY2(r.code == 0, r.err.constData());
    r = cli(words("limits show --json anthropic"));
    QJsonObject shown = objectOf(r.out);
    QCOMPARE(shown.value(QStringLiteral("input_tokens")).toInt(), 20000);
    QVERIFY(shown.value(QStringLiteral("output_tokens")).isNull());
    QVERIFY(shown.value(QStringLiteral("learned")).toArray().isEmpty());
    QVERIFY(shown.value(QStringLiteral("learn")).toBool());

    // --no-learn: learning stops, what was learned stays (as the user's).
    text = limitsFile();
    text.replace("\"learn\": true,", "\"learn\": true, \"learned\": [\"input_tokens\"],");
    {
        QFile f(m_home + QStringLiteral("/limits.json"));
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(text);
    }
    r = cli(words("limits set anthropic --no-learn"));
    QVERIFY2(r.code == 0, r.err.constData());
    shown = objectOf(cli(words("limits show --json anthropic")).out);
    QCOMPARE(shown.value(QStringLiteral("input_tokens")).toInt(), 20000);
    QVERIFY(!shown.value(QStringLiteral("learn")).toBool());
    QVERIFY(shown.value(QStringLiteral("learned")).toArray().isEmpty());
    QVERIFY(!limitsFile().contains("learn"));

    // Nothing stated yet: adopt refuses, naming where the figures come from, and changes nothing.
    const QByteArray before = limitsFile();
    r = cli(words("limits adopt anthropic"));
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("has stated no limits yet"), r.err.constData());
    QCOMPARE(limitsFile(), before);
    r = cli(words("limits adopt nobody"));
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("unknown provider 'nobody'"), r.err.constData());
}
