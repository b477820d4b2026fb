// A Redis home that must refuse, and say so, without having acted: limits planted in the
// limits key that the client would call corrupt, a user whose ACL lacks what a command needs,
// a history key of the wrong type, a server that stops answering while callers wait, and a
// client whose clock is behind the server's. Every caller is a real CLI process (or, for the
// clock, a limiter in this process beside them) against a redis-server this program starts;
// what is checked is what Redis holds afterwards, not only the exit code.

#include "backend/quotalimiter.h"
#include "backend/storefactory.h"
#include "base/offsetclock.h"
#include "helpers/redisserver.h"
#include "store/homespec.h"
#include "store/redisconnection.h"
#include "system/processprobe.h"
#include "testsupport.h"

#include <QElapsedTimer>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <atomic>
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
        const Ran r = redisCli({ QStringLiteral("XRANGE"), key("history"), QStringLiteral("-"),
            QStringLiteral("+") });
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
    row("backoff base above cap", QStringLiteral(R"("w":2000,"h":100,"r":20,"bb":90000,"bc":1000,"mh":600000)"),
        "bb (backoff base) is above");
    row("day below window", QStringLiteral(R"("w":2000,"h":100,"r":20,"d":{"r":5},)") + rest, "per_day.requests");
    row("class window text", QStringLiteral(R"("w":2000,"h":100,"r":20,"m":{"x":{"w":"60000","r":1}},)") + rest,
        "m.x.w");
    QTest::newRow("not JSON") << QStringLiteral("{\"w\":2000,") << QStringLiteral("not JSON");
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
        QVERIFY2(r.err.contains(key("limits").toUtf8()) && r.err.contains(problem.toUtf8()), r.err.constData());
    }
    const Ran run = cli(words("run api --caller c --timeout 1 -- true"));
    QCOMPARE(run.code, 3);
    QCOMPARE(admissions(), 0);
    // The client says the same of them.
    const Ran status = cli({ QStringLiteral("status") });
    QCOMPARE(status.code, 3);
    QVERIFY2(status.err.contains(key("limits").toUtf8()), status.err.constData());
}

QTEST_GUILESS_MAIN(TestRedisFailClosed)
#include "tst_redisfailclosed.moc"
