// A Redis home that must refuse, and say so, without having acted: limits planted in the
// limits key that the client would call corrupt, a user whose ACL lacks what a command needs,
// a history key of the wrong type, a server that stops answering while callers wait, and a
// client whose clock is behind the server's. Every caller is a real CLI process (or, for the
// clock, a limiter in this process beside them) against a redis-server this program starts;
// what is checked is what Redis holds afterwards, not only the exit code.

#include "backend/quotalimiter.h"
#include "backend/redisquotabackend.h"
#include "backend/storefactory.h"
#include "base/offsetclock.h"
#include "helpers/redisserver.h"
#include "store/homespec.h"
#include "store/redisconnection.h"
#include "system/processprobe.h"
#include "testsupport.h"

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <atomic>
#include <optional>
#include <thread>

using namespace tollgate;

namespace {

using Ran = TestSupport::Ran;

QStringList words(const char* text)
{
    return QString::fromUtf8(text).split(QLatin1Char(' '), Qt::SkipEmptyParts);
}

} // namespace

class TestRedisFailClosed final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void cleanup();
    void corruptLimitsAdmitNobody_data();
    void corruptLimitsAdmitNobody();
    void limitsChangedAfterAnAdmissionAreCheckedAgain();
    void aDayResetInAnUnknownZoneAdmitsNobody();
    void aDayResetInAnUnknownZoneIsHandedNoSlot();
    void aUserWithoutChannelsChangesNothing();
    void aHistoryKeyOfTheWrongTypeSpendsNothing();
    void aSetAsideKeyOfTheWrongTypeRefusesOnlyWhatMustSetAside();
    void theDocumentedAclRunsTheWholeCli_data();
    void theDocumentedAclRunsTheWholeCli();
    void aStoppedServerEndsWaitersWithinTheirTimeout_data();
    void aStoppedServerEndsWaitersWithinTheirTimeout();
    void aClientClockBehindKeepsItsPlace();

private:
    // The CLI on the test's home (--home after the command words).
    Ran cli(const QStringList& args, int limitMs = 60000) const
    {
        QStringList all = args;
        const qsizetype at
            = std::min<qsizetype>(args.first() == QStringLiteral("limits") ? 2 : 1, all.size());
        all.insert(at, QStringLiteral("--home"));
        all.insert(at + 1, m_home);
        return TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH), all, limitMs);
    }
    // The CLI as the Redis user `user` (password "pw"), on the test's home.
    Ran cliAs(const QString& user, const QStringList& args, int limitMs = 60000) const
    {
        QStringList all = args;
        const qsizetype at
            = std::min<qsizetype>(args.first() == QStringLiteral("limits") ? 2 : 1, all.size());
        all.insert(at, QStringLiteral("--home"));
        all.insert(at + 1, userHome(user));
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("TOLLGATE_REDIS_PASSWORD"), QStringLiteral("pw"));
        return TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH), all, env, limitMs);
    }
    [[nodiscard]] QString userHome(const QString& user) const
    {
        return QStringLiteral("redis://%1@127.0.0.1:%2?prefix=closed").arg(user).arg(m_redis->port());
    }
    // The ACL docs/RELIABILITY.md gives a Tollgate user (its `ACL SETUSER tollgate ...` line),
    // for this test's prefix, as redis-cli arguments: what the test runs is what the page says.
    static QStringList documentedAcl(const QString& user)
    {
        QFile doc(QStringLiteral(TOLLGATE_TEST_DATA "/../../docs/RELIABILITY.md"));
        if (!doc.open(QIODevice::ReadOnly))
            return {};
        for (const QByteArray& line : doc.readAll().split('\n')) {
            if (!line.startsWith("ACL SETUSER tollgate "))
                continue;
            QStringList rules = QString::fromUtf8(line.trimmed()).split(QLatin1Char(' '), Qt::SkipEmptyParts);
            for (QString& r : rules) {
                r.replace(QStringLiteral("{tollgate}"), QStringLiteral("{closed}"));
                r.replace(QStringLiteral(">PASSWORD"), QStringLiteral(">pw"));
            }
            rules[2] = user;
            return rules;
        }
        return {};
    }
    // redis-cli on the test's server, as an operator (or an intruder) would write to it.
    Ran redisCli(const QStringList& args) const
    {
        return TestSupport::run(QStringLiteral("redis-cli"),
            QStringList { QStringLiteral("-p"), QString::number(m_redis->port()) } + args, 20000);
    }
    [[nodiscard]] QString key(const char* name) const
    {
        return QString::fromStdString(
            RedisConnection::key(HomeSpec::parse(m_home.toStdString())->redis(), name));
    }
    // Admissions the home's history holds (every admission is one event there).
    int admissions() const
    {
        const Ran r = redisCli(
            { QStringLiteral("XRANGE"), key("history"), QStringLiteral("-"), QStringLiteral("+") });
        return static_cast<int>(r.out.count("\"type\":\"admit\""));
    }
    bool startRedis(const QStringList& extra = {})
    {
        QString why;
        m_redis = std::make_unique<RedisServer>();
        if (!m_redis->start(extra, &why)) {
            qWarning("%s", qPrintable(why));
            return false;
        }
        m_url = QString::fromStdString(m_redis->url());
        m_home = m_url + QStringLiteral("?prefix=closed");
        return true;
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<RedisServer> m_redis; // each test's own (these tests stop it, or change its users)
    QString m_url;
    QString m_home;
};

void TestRedisFailClosed::init()
{
    if (RedisServer::binary().isEmpty())
        QSKIP("redis-server is not installed (scripts/bootstrap.sh installs it)");
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
}

void TestRedisFailClosed::cleanup()
{
    m_redis.reset();
}

void TestRedisFailClosed::corruptLimitsAdmitNobody_data()
{
    // A value planted in the limits key (the client writes the compact form of
    // RedisStateCodec::compactLimits) and a word of the problem the refusal must name.
    QTest::addColumn<QString>("planted");
    QTest::addColumn<QString>("problem");
    const QString rest = QStringLiteral(R"("bb":1000,"bc":60000,"mh":600000)");
    auto row = [&](const char* name, const QString& fields, const char* problem) {
        QTest::newRow(name) << (QLatin1Char('{') + fields + QLatin1Char('}')) << QString::fromLatin1(problem);
    };
    // The issue's: a headroom of 100,000 % made every request count as a thousandth of one.
    row("headroom 100000", QStringLiteral(R"("w":2000,"h":100000,"r":20,)") + rest, "h (headroom_percent)");
    row("negative window", QStringLiteral(R"("w":-5,"h":100,"r":20,)") + rest, "w (window");
    row("requests 1e300", QStringLiteral(R"("w":2000,"h":100,"r":1e300,)") + rest, "r (requests)");
    row("fractional requests", QStringLiteral(R"("w":2000,"h":100,"r":2.5,)") + rest, "r (requests)");
    row("requests as text", QStringLiteral(R"("w":2000,"h":100,"r":"20",)") + rest, "r (requests)");
    row("parallel true", QStringLiteral(R"("w":2000,"h":100,"r":20,"par":true,)") + rest, "par (parallel)");
    row("parallel 0", QStringLiteral(R"("w":2000,"h":100,"r":20,"par":0,)") + rest, "par (parallel)");
    row("tokens 2^41", QStringLiteral(R"("w":2000,"h":100,"t":2199023255552,)") + rest, "t (tokens)");
    row("no max hold", QStringLiteral(R"("w":2000,"h":100,"r":20,"bb":1000,"bc":60000)"), "mh (max hold");
    row("no window", QStringLiteral(R"("h":100,"r":20,)") + rest, "w (window");
    row("backoff base above cap",
        QStringLiteral(R"("w":2000,"h":100,"r":20,"bb":90000,"bc":1000,"mh":600000)"),
        "bb (backoff base) is above");
    row("day below window", QStringLiteral(R"("w":2000,"h":100,"r":20,"d":{"r":5},)") + rest,
        "per_day.requests");
    row("class window text",
        QStringLiteral(R"("w":2000,"h":100,"r":20,"m":{"x":{"w":"60000","r":1}},)") + rest, "m.x.w");
    QTest::newRow("not JSON") << QStringLiteral("{\"w\":2000,") << QStringLiteral("not JSON");
    // What cjson reads and JSON does not allow, or cannot tell apart: the client refuses them,
    // the script did not (each admitted by r = 2, or by the class's limit of 1).
    const QString canon = QStringLiteral(R"("bb":60000,"bc":900000,"h":100,"mh":600000,)");
    const char* const notTollgates = "not as Tollgate writes them";
    for (const auto& [name, fields] : std::initializer_list<std::pair<const char*, QString>> {
             { "hex number", canon + QStringLiteral(R"("r":0x2,"w":60000)") },
             { "plus sign", canon + QStringLiteral(R"("r":+2,"w":60000)") },
             { "leading zero", canon + QStringLiteral(R"("r":02,"w":60000)") },
             { "trailing dot", canon + QStringLiteral(R"("r":2.,"w":60000)") },
             { "a key twice", canon + QStringLiteral(R"("r":1000,"r":2,"w":60000)") },
             { "an unknown key", canon + QStringLiteral(R"("r":2,"w":60000,"zz":1)") },
             { "keys out of order", QStringLiteral(R"("w":60000,"r":2,"bb":60000,"bc":900000,"h":100,"mh":600000)") },
             { "models a list", QStringLiteral(R"("bb":60000,"bc":900000,"h":100,"m":[],"mh":600000,"r":2,"w":60000)") },
             { "learned an object", canon + QStringLiteral(R"("ld":{},"r":2,"w":60000)") },
             { "an empty day", QStringLiteral(R"("bb":60000,"bc":900000,"d":{},"h":100,"mh":600000,"r":2,"w":60000)") } })
        QTest::newRow(name) << (QLatin1Char('{') + fields + QLatin1Char('}')) << QString::fromLatin1(notTollgates);
    QTest::newRow("learn 1") << (QLatin1Char('{') + canon + QStringLiteral(R"("ln":1,"r":2,"w":60000})"))
                             << QStringLiteral("learn");
    QTest::newRow("patterns that are not the class's")
        << QStringLiteral(R"({"bb":60000,"bc":900000,"h":100,"m":{"opus":{"g":["claude-opus*"],"p":["^zzz$"],"r":1,)"
                          R"("w":60000}},"mh":600000,"r":1000,"w":60000})")
        << QStringLiteral("is not what g (match) gives");
    QTest::newRow("a list") << QStringLiteral("[1,2]") << QStringLiteral("w (window");
}

void TestRedisFailClosed::corruptLimitsAdmitNobody()
{
    // What the client calls corrupt (status exits 3), the script must not enforce: before, each
    // of these admitted every acquire under whatever the script made of the value.
    QFETCH(QString, planted);
    QFETCH(QString, problem);
    QVERIFY(startRedis());
    QCOMPARE(cli(words("limits set api --requests 20 --window 2")).code, 0);
    const Ran set = redisCli({ QStringLiteral("HSET"), key("limits"), QStringLiteral("api"), planted });
    QVERIFY2(set.code == 0 && !set.out.startsWith("ERR"), set.out.constData());
    for (int i = 0; i < 5; ++i) {
        const Ran r = cli(words("acquire api --caller c --timeout 1"));
        QCOMPARE(r.code, 3);
        QVERIFY2(
            r.err.contains(key("limits").toUtf8()) && r.err.contains(problem.toUtf8()), r.err.constData());
    }
    const Ran run = cli(words("run api --caller c --timeout 1 -- true"));
    QCOMPARE(run.code, 3);
    QCOMPARE(admissions(), 0);
    // The client says the same of them.
    const Ran status = cli({ QStringLiteral("status") });
    QCOMPARE(status.code, 3);
    QVERIFY2(status.err.contains(key("limits").toUtf8()), status.err.constData());
}

// A calendar day reset in a zone this host's time-zone database does not have, in limits with no
// per-day limit: the client called the limits corrupt (status exited 3) while the script, which
// asked for a day only where a per-day limit counts in it, admitted every acquire.
void TestRedisFailClosed::aDayResetInAnUnknownZoneAdmitsNobody()
{
    QVERIFY(startRedis());
    QCOMPARE(cli(words("limits set api --requests 20 --window 2 --day-resets 04:00@Europe/Berlin")).code, 0);
    // A zone that exists: admitted (the day is asked for and given).
    QCOMPARE(cli(words("acquire api --caller c --timeout 1")).code, 0);
    QCOMPARE(admissions(), 1);
    const Ran shown = redisCli({ QStringLiteral("HGET"), key("limits"), QStringLiteral("api") });
    QVERIFY2(shown.out.contains("04:00@Europe/Berlin"), shown.out.constData());
    const QString planted
        = QString::fromUtf8(shown.out.trimmed()).replace(QStringLiteral("Europe/Berlin"), QStringLiteral("Mars/Olympus"));
    const Ran set = redisCli({ QStringLiteral("HSET"), key("limits"), QStringLiteral("api"), planted });
    QVERIFY2(set.code == 0 && !set.out.startsWith("ERR"), set.out.constData());
    for (const char* command : { "acquire api --caller c --timeout 1", "run api --caller c --timeout 1 -- true" }) {
        const Ran r = cli(words(command));
        QCOMPARE(r.code, 3);
        QVERIFY2(r.err.contains(key("limits").toUtf8()) && r.err.contains("unknown time zone 'Mars/Olympus'"),
            r.err.constData());
    }
    QCOMPARE(admissions(), 1);
    const Ran status = cli({ QStringLiteral("status") });
    QCOMPARE(status.code, 3);
    QVERIFY2(status.err.contains(key("limits").toUtf8()), status.err.constData());
}

// The other way in: a release hands its slot to the head of the queue in the same call
// (W.handOff). Planted while the head waits, an unknown zone must not be admitted that way
// either, and the release must still go through.
void TestRedisFailClosed::aDayResetInAnUnknownZoneIsHandedNoSlot()
{
    QVERIFY(startRedis());
    QCOMPARE(
        cli(words("limits set api --requests 100 --window 60 --parallel 1 --day-resets 04:00@Europe/Berlin")).code,
        0);
    const QString stop = m_dir->path() + QStringLiteral("/stop");
    QProcess holder;
    holder.start(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--home"), m_home,
            QStringLiteral("--caller"), QStringLiteral("holder"), QStringLiteral("--"), QStringLiteral("sh"),
            QStringLiteral("-c"), QStringLiteral("while [ ! -e \"$0\" ]; do sleep 0.05; done"), stop });
    QVERIFY(holder.waitForStarted(10000));
    QTRY_COMPARE_WITH_TIMEOUT(admissions(), 1, 20000);
    QProcess waiter;
    // A `run` (only a run takes a handed slot: its keeper dies with it).
    waiter.start(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--home"), m_home,
            QStringLiteral("--caller"), QStringLiteral("waiter"), QStringLiteral("--timeout"),
            QStringLiteral("30"), QStringLiteral("--"), QStringLiteral("true") });
    QVERIFY(waiter.waitForStarted(10000));
    QTRY_VERIFY_WITH_TIMEOUT(
        cli({ QStringLiteral("status"), QStringLiteral("--json") }).out.contains("\"waiting\":1"), 20000);

    const Ran shown = redisCli({ QStringLiteral("HGET"), key("limits"), QStringLiteral("api") });
    const QString planted
        = QString::fromUtf8(shown.out.trimmed()).replace(QStringLiteral("Europe/Berlin"), QStringLiteral("Mars/Olympus"));
    QVERIFY(planted.contains(QStringLiteral("Mars/Olympus")));
    const Ran set = redisCli({ QStringLiteral("HSET"), key("limits"), QStringLiteral("api"), planted });
    QVERIFY2(set.code == 0 && !set.out.startsWith("ERR"), set.out.constData());
    QFile(stop).open(QIODevice::WriteOnly);

    QVERIFY(holder.waitForFinished(30000));
    QCOMPARE(holder.exitCode(), 0); // its command's: the release went through
    QVERIFY(waiter.waitForFinished(40000));
    const QByteArray said = waiter.readAllStandardError();
    QCOMPARE(waiter.exitCode(), 3);
    QVERIFY2(said.contains("unknown time zone 'Mars/Olympus'"), said.constData());
    QCOMPARE(admissions(), 1);
}

void TestRedisFailClosed::limitsChangedAfterAnAdmissionAreCheckedAgain()
{
    // The script keeps the limits it decoded and checked beside the string it read them from:
    // a value planted after an admission (the same function library, a different string) is
    // checked again and fails closed; good limits written after it are enforced.
    QVERIFY(startRedis());
    QCOMPARE(cli(words("limits set api --requests 20 --window 600")).code, 0);
    QCOMPARE(cli(words("acquire api --caller c --timeout 0")).code, 0);
    const QString planted
        = QStringLiteral(R"({"w":600000,"h":100000,"r":20,"bb":1000,"bc":60000,"mh":600000})");
    QVERIFY(redisCli({ QStringLiteral("HSET"), key("limits"), QStringLiteral("api"), planted }).code == 0);
    const Ran refused = cli(words("acquire api --caller c --timeout 0"));
    QCOMPARE(refused.code, 3);
    QVERIFY2(refused.err.contains("h (headroom_percent)"), refused.err.constData());
    QCOMPARE(admissions(), 1);
    // (limits set refuses to replace limits it cannot read: good ones are planted as well.)
    const QString good = QStringLiteral(R"({"bb":1000,"bc":60000,"h":100,"mh":600000,"r":2,"w":600000})");
    QVERIFY(redisCli({ QStringLiteral("HSET"), key("limits"), QStringLiteral("api"), good }).code == 0);
    QCOMPARE(cli(words("acquire api --caller c --timeout 0")).code, 0);
    QCOMPARE(cli(words("acquire api --caller c --timeout 0")).code, 1); // 2 per window: the new limits hold
    QCOMPARE(admissions(), 2);
}

void TestRedisFailClosed::aUserWithoutChannelsChangesNothing()
{
    // Redis 7 gives a new user no channel (resetchannels, unless acl-pubsub-default says
    // otherwise): the script's PUBLISH was refused after it had written the state, so `pause`
    // exited 3 with the provider paused and failed acquires spent requests. Now the script
    // checks the user's permissions before its first write: refused, nothing changed.
    QVERIFY(startRedis());
    QCOMPARE(cli(words("limits set api --requests 5 --window 600")).code, 0);
    QStringList acl = documentedAcl(QStringLiteral("nochannels"));
    QVERIFY2(!acl.isEmpty(), "docs/RELIABILITY.md has no `ACL SETUSER tollgate` line");
    acl.removeIf([](const QString& r) { return r.startsWith(QLatin1Char('&')); });
    const Ran made = redisCli(acl);
    QVERIFY2(made.out.startsWith("OK"), made.out.constData());
    const Ran paused = cliAs(QStringLiteral("nochannels"), words("pause api"));
    QCOMPARE(paused.code, 3);
    Ran r = cli({ QStringLiteral("status"), QStringLiteral("--json") });
    QCOMPARE(r.code, 0);
    QVERIFY2(!r.out.contains("\"paused\":true"), r.out.constData());
    for (int i = 0; i < 5; ++i) {
        r = cliAs(QStringLiteral("nochannels"), words("acquire api --caller c --timeout 1"));
        QCOMPARE(r.code, 3);
    }
    QCOMPARE(admissions(), 0);
    // All 5 requests are still there for a user who may publish.
    for (int i = 0; i < 5; ++i)
        QCOMPARE(cli(words("acquire api --caller c --timeout 0")).code, 0);
    // And the refusal said why.
    QVERIFY2(
        paused.err.contains("PUBLISH") && paused.err.contains("nothing was changed"), paused.err.constData());
}

void TestRedisFailClosed::aHistoryKeyOfTheWrongTypeSpendsNothing()
{
    // The history stream replaced by a string: every acquire failed (XADD after the state was
    // written) yet spent its request. Now refused before the first write, naming the key.
    QVERIFY(startRedis());
    QCOMPARE(cli(words("limits set api --requests 3 --window 600")).code, 0);
    QVERIFY(redisCli({ QStringLiteral("SET"), key("history"), QStringLiteral("x") }).out.startsWith("OK"));
    Ran refused;
    for (int i = 0; i < 5; ++i) {
        refused = cli(words("acquire api --caller c --timeout 1"));
        QCOMPARE(refused.code, 3);
    }
    QCOMPARE(cli(words("pause api")).code, 3);
    QVERIFY(redisCli({ QStringLiteral("DEL"), key("history") }).out.startsWith("1"));
    for (int i = 0; i < 3; ++i) {
        const Ran r = cli(words("acquire api --caller c --timeout 0"));
        QVERIFY2(r.code == 0, r.err.constData());
    }
    QCOMPARE(admissions(), 3);
    QVERIFY2(refused.err.contains(key("history").toUtf8()) && refused.err.contains("nothing was changed"),
        refused.err.constData());
    // A stream of the right type that cannot take another entry (its last id is the largest
    // there is): the admission, already written, is not reported as a failure; the lost
    // history is a warning.
    QVERIFY(redisCli({ QStringLiteral("DEL"), key("history") }).code == 0);
    QVERIFY(redisCli({ QStringLiteral("XADD"), key("history"),
                         QStringLiteral("18446744073709551615-18446744073709551615"), QStringLiteral("e"),
                         QStringLiteral("{}") })
                .code
        == 0);
    QCOMPARE(cli(words("limits set api --requests 4 --window 600")).code, 0);
    const Ran warned = cli(words("acquire api --caller c --timeout 0"));
    QVERIFY2(warned.code == 0, warned.err.constData());
    QVERIFY2(warned.err.contains("warning") && warned.err.contains("history event(s) not written"),
        warned.err.constData());
    QCOMPARE(cli(words("acquire api --caller c --timeout 0")).code, 1); // the 4th request was spent
}

void TestRedisFailClosed::aSetAsideKeyOfTheWrongTypeRefusesOnlyWhatMustSetAside()
{
    // The set-aside hash is written only to keep a state that did not decode, so its type is
    // checked where a call first writes it (W.keepAside), not by every call: with a string in
    // its place, a home that needs no set-aside works on; one that must set a state aside
    // refuses, naming the key, with nothing written — the bad state is neither replaced nor
    // kept elsewhere, and no request is spent.
    QVERIFY(startRedis());
    QCOMPARE(cli(words("limits set api --requests 3 --window 600")).code, 0);
    QVERIFY(redisCli({ QStringLiteral("SET"), key("corrupt"), QStringLiteral("x") }).out.startsWith("OK"));
    const Ran first = cli(words("acquire api --caller c --timeout 0"));
    QVERIFY2(first.code == 0, first.err.constData());
    QVERIFY(
        redisCli({ QStringLiteral("HSET"), key("state"), QStringLiteral("p:api"), QStringLiteral("garbage") })
            .code
        == 0);
    for (int i = 0; i < 3; ++i) {
        const Ran refused = cli(words("acquire api --caller c --timeout 1"));
        QCOMPARE(refused.code, 3);
        QVERIFY2(refused.err.contains(key("corrupt").toUtf8()) && refused.err.contains("nothing was changed"),
            refused.err.constData());
    }
    QCOMPARE(redisCli({ QStringLiteral("HGET"), key("state"), QStringLiteral("p:api") }).out.trimmed(),
        QByteArray("garbage"));
    QCOMPARE(redisCli({ QStringLiteral("GET"), key("corrupt") }).out.trimmed(), QByteArray("x"));
    QCOMPARE(admissions(), 1);
    // The key made a hash again: the state is set aside there, the provider restarts
    // conservatively (its window counts as full: nothing more is admitted in it).
    QVERIFY(redisCli({ QStringLiteral("DEL"), key("corrupt") }).code == 0);
    QCOMPARE(cli(words("acquire api --caller c --timeout 0")).code, 1);
    const Ran kept = redisCli({ QStringLiteral("HGETALL"), key("corrupt") });
    QVERIFY2(kept.out.contains("p:api@") && kept.out.contains("garbage"), kept.out.constData());
    QCOMPARE(admissions(), 1);
}

void TestRedisFailClosed::theDocumentedAclRunsTheWholeCli_data()
{
    // The documented line allows both ways the client runs the script; each alone suffices.
    QTest::addColumn<QStringList>("without");
    QTest::newRow("as documented") << QStringList {};
    QTest::newRow("functions only") << QStringList { QStringLiteral("+evalsha"),
        QStringLiteral("+script|load") };
    QTest::newRow("scripts only") << QStringList { QStringLiteral("+fcall"),
        QStringLiteral("+function|load") };
}

void TestRedisFailClosed::theDocumentedAclRunsTheWholeCli()
{
    // Every command of the CLI, as a user with exactly the ACL docs/RELIABILITY.md gives (and
    // no more), including a waiter woken through the home's channel.
    QFETCH(QStringList, without);
    QVERIFY(startRedis());
    QStringList acl = documentedAcl(QStringLiteral("tg"));
    QVERIFY2(!acl.isEmpty(), "docs/RELIABILITY.md has no `ACL SETUSER tollgate` line");
    for (const QString& rule : without)
        QVERIFY(acl.removeAll(rule) == 1);
    const Ran made = redisCli(acl);
    QVERIFY2(made.out.startsWith("OK"), made.out.constData());
    const QString user = QStringLiteral("tg");
    const QString exported = m_dir->path() + QStringLiteral("/limits.json");
    for (const char* command : { "limits set api --requests 50 --window 60 --parallel 1", "limits show",
             "acquire api --caller c", "acquire api --caller c --tokens 10 --model m",
             "report-ok api --caller c", "report-429 api --caller c --retry-after 0.01", "reset-backoff api",
             "pause api", "resume api", "pause", "resume", "status", "status --json", "history",
             "history --json", "release-stale", "run api --caller r -- true", "limits remove api" }) {
        const Ran r = cliAs(user, words(command));
        QVERIFY2(r.code == 0,
            qPrintable(QString::fromLatin1(command) + QStringLiteral(": ") + QString::fromLocal8Bit(r.err)));
    }
    QCOMPARE(cliAs(user, words("limits set api --requests 50 --window 60 --parallel 1")).code, 0);
    Ran r = cliAs(user, words("limits export"));
    QCOMPARE(r.code, 0);
    QFile f(exported);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(r.out);
    f.close();
    r = cliAs(user, { QStringLiteral("limits"), QStringLiteral("import"), exported });
    QVERIFY2(r.code == 0, r.err.constData());
    // A slot held, a waiter behind it, woken when it is given back.
    r = cliAs(user, words("acquire api --caller holder --slot --json"));
    QVERIFY2(r.code == 0, r.err.constData());
    const QByteArray fenceText = r.out.mid(r.out.indexOf("\"fence\":") + 8);
    const QString fence = QString::number(fenceText.left(fenceText.indexOf(',')).trimmed().toULongLong());
    QProcess waiter;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("TOLLGATE_REDIS_PASSWORD"), QStringLiteral("pw"));
    waiter.setProcessEnvironment(env);
    waiter.start(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("run"), QStringLiteral("--home"), userHome(user), QStringLiteral("api"),
            QStringLiteral("--caller"), QStringLiteral("waiter"), QStringLiteral("--timeout"),
            QStringLiteral("60"), QStringLiteral("--"), QStringLiteral("true") });
    QVERIFY(waiter.waitForStarted(10000));
    QTRY_VERIFY_WITH_TIMEOUT(cliAs(user, words("status --json")).out.contains("\"waiting\":1"), 20000);
    r = cliAs(user, { QStringLiteral("release"), QStringLiteral("api"), QStringLiteral("--fence"), fence });
    QVERIFY2(r.code == 0, r.err.constData());
    QVERIFY(waiter.waitForFinished(30000));
    QCOMPARE(waiter.exitCode(), 0);
}

void TestRedisFailClosed::aStoppedServerEndsWaitersWithinTheirTimeout_data()
{
    // How the server goes (SIGSTOP: connections stay open, nothing answers; SIGKILL: refused),
    // when (before the caller starts, or while it waits in the queue), and the caller's --timeout.
    QTest::addColumn<bool>("kill");
    QTest::addColumn<bool>("queuedFirst");
    QTest::addColumn<int>("timeoutSeconds");
    QTest::newRow("stopped while queued, --timeout 2") << false << true << 2;
    QTest::newRow("stopped while queued, --timeout 4") << false << true << 4;
    QTest::newRow("stopped before, --timeout 1") << false << false << 1;
    QTest::newRow("killed while queued, --timeout 2") << true << true << 2;
}

void TestRedisFailClosed::aStoppedServerEndsWaitersWithinTheirTimeout()
{
    // A waiter's whole life is bounded by its --timeout plus RedisQuotaBackend::WAITER_GRACE
    // (documented in docs/RELIABILITY.md). Before, the clean-up after the deadline (leaving the
    // queue, giving back what the unanswered attempt may have taken) had 2 s per call: with
    // --timeout 2 a waiter lived 8 s. This is a bound on a stopped server, not a measure of
    // speed: the grace is several times what the clean-up needs.
    QFETCH(bool, kill);
    QFETCH(bool, queuedFirst);
    QFETCH(int, timeoutSeconds);
    QVERIFY(startRedis());
    QCOMPARE(cli(words("limits set api --requests 100 --window 60 --parallel 1")).code, 0);
    QCOMPARE(cli(words("acquire api --caller holder --slot")).code, 0); // held by this test process
    if (!queuedFirst)
        m_redis->pause();
    QElapsedTimer life;
    life.start();
    QProcess waiter;
    waiter.start(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--home"), m_home,
            QStringLiteral("--caller"), QStringLiteral("waiter"), QStringLiteral("--slot"),
            QStringLiteral("--timeout"), QString::number(timeoutSeconds) });
    QVERIFY(waiter.waitForStarted(10000));
    if (queuedFirst) {
        QTRY_VERIFY_WITH_TIMEOUT(
            cli({ QStringLiteral("status"), QStringLiteral("--json") }).out.contains("\"waiting\":1"), 10000);
        if (kill)
            m_redis->stop();
        else
            m_redis->pause();
    }
    const bool ended = waiter.waitForFinished(timeoutSeconds * 1000 + 30000);
    const qint64 lived = life.elapsed();
    if (!kill)
        m_redis->resume();
    QVERIFY2(ended, "the waiter is still running 30 s past its --timeout");
    const QByteArray said = waiter.readAllStandardError();
    QCOMPARE(waiter.exitCode(), 3);
    QVERIFY2(said.contains(QByteArray::number(m_redis->port())), said.constData()); // names the URL
    const qint64 bound = timeoutSeconds * 1000 + RedisQuotaBackend::WAITER_GRACE.count();
    QVERIFY2(lived <= bound,
        qPrintable(QStringLiteral("lived %1 ms, more than --timeout + grace (%2 ms)").arg(lived).arg(bound)));
}

void TestRedisFailClosed::aClientClockBehindKeepsItsPlace()
{
    // A caller whose clock is two minutes behind the server's queues first; a caller with a
    // right clock queues after it. Before, the first one's deadline was written in its own
    // clock's time, so the server judged it already past: the second caller's look removed
    // it as a ghost ("vanished past its deadline"), took the head of the queue and the freed
    // slot, and the first one waited until its timeout. Every queue time is the server's now.
    QVERIFY(startRedis());
    QCOMPARE(cli(words("limits set api --requests 100 --window 60 --parallel 1")).code, 0);
    Ran r = cli(words("acquire api --caller holder --slot --json"));
    QVERIFY2(r.code == 0, r.err.constData());
    const QByteArray fenceText = r.out.mid(r.out.indexOf("\"fence\":") + 8);
    const QString fence = QString::number(fenceText.left(fenceText.indexOf(',')).trimmed().toULongLong());

    const OffsetClock behind(-std::chrono::minutes(2));
    const ProcessProbe probe;
    auto spec = HomeSpec::parse(m_home.toStdString());
    QVERIFY(spec.ok());
    auto backend = StoreFactory::openBackend(*spec, behind, probe); // the server's clock decides
    QVERIFY2(backend.ok(), backend.ok() ? "" : backend.error().describe().c_str());
    QuotaLimiter limiter(**backend, behind, probe);
    std::atomic<int> outcome { -1 }; // 1 admitted, 0 refused
    std::optional<Permit> permit;
    std::jthread first([&] { // joined however the test ends
        AdmitRequest request;
        request.provider = "api";
        request.caller = "behind";
        request.wantsSlot = true;
        auto p = limiter.acquire(request, behind.now() + std::chrono::seconds(30));
        if (p)
            permit.emplace(std::move(*p));
        outcome = p ? 1 : 0;
    });
    auto waiting = [&](int n) {
        return cli({ QStringLiteral("status"), QStringLiteral("--json") })
            .out.contains(QStringLiteral("\"waiting\":%1").arg(n).toUtf8());
    };
    QTRY_VERIFY_WITH_TIMEOUT(waiting(1), 20000);
    auto second = TestSupport::startChild(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--home"), m_home,
            QStringLiteral("--caller"), QStringLiteral("right"), QStringLiteral("--slot"),
            QStringLiteral("--timeout"), QStringLiteral("60") });
    QVERIFY(second->waitForStarted(10000));
    QTRY_VERIFY_WITH_TIMEOUT(waiting(2), 20000);
    r = cli({ QStringLiteral("release"), QStringLiteral("api"), QStringLiteral("--fence"), fence });
    QVERIFY2(r.code == 0, r.err.constData());
    // The first in line gets the slot; the second still waits.
    QTRY_VERIFY_WITH_TIMEOUT(outcome.load() != -1, 40000);
    first.join();
    QCOMPARE(outcome.load(), 1);
    QCOMPARE(second->state(), QProcess::Running);
    const Ran history = cli({ QStringLiteral("history"), QStringLiteral("--json") });
    QVERIFY2(!history.out.contains("past its deadline"), history.out.constData());
    QVERIFY(permit->release().ok()); // and then the second
    QVERIFY(second->waitForFinished(30000));
    QCOMPARE(second->exitCode(), 0);
}

QTEST_GUILESS_MAIN(TestRedisFailClosed)
#include "tst_redisfailclosed.moc"
