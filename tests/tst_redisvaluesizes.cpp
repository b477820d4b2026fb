// Values of a Redis home larger than any Tollgate writes — planted by hand (redis-cli, a script)
// or by a bug elsewhere — as real CLI processes against a real redis-server. What must hold: a
// value past its bound is refused by name (the key, the field and its size) and never copied to
// the client nor decoded by the script; a state value is set aside and its provider restarts
// conservatively, as one that does not decode. Before issue 27 a 10 MB limits value was decoded
// by every call (1.7 s of Redis each) and shipped whole to every `status`.

#include "helpers/redisserver.h"
#include "store/redisconnection.h"
#include "store/redisstatecodec.h"
#include "testsupport.h"

#include <QTest>

using namespace tollgate;

namespace {

using Ran = TestSupport::Ran;

constexpr int BIG = 10 * 1024 * 1024;

} // namespace

class TestRedisValueSizes final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void cleanup();
    void aHugeLimitsValueIsRefusedByNameUnread();
    void aHugeStateValueIsSetAsideUnread();
    void aHugeFieldNameIsNamedByItsStartUnread();
    void aHashWithTooManyFieldsIsRefusedByItsCount();

private:
    Ran cli(const QStringList& args) const
    {
        QStringList all = args;
        const qsizetype at
            = std::min<qsizetype>(args.first() == QStringLiteral("limits") ? 2 : 1, all.size());
        all.insert(at, QStringLiteral("--home"));
        all.insert(at + 1, QString::fromStdString(m_home.url));
        return TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH), all, 60000);
    }
    RedisAddress address() const { return HomeSpec::parse(m_home.url)->redis(); }
    RedisConnection& redis()
    {
        if (!m_connection) {
            auto c = RedisConnection::open(address(), std::chrono::milliseconds(10000));
            if (!c)
                qFatal("%s", c.error().describe().c_str());
            m_connection = std::make_unique<RedisConnection>(std::move(c).value());
        }
        return *m_connection;
    }
    std::string key(const std::string& name) const { return RedisConnection::key(address(), name); }
    // What the server has sent to its clients so far (INFO stats): a value that reached a client
    // moves it by its size.
    qint64 bytesSent()
    {
        auto r = redis().command({ "INFO", "stats" });
        if (!r)
            qFatal("%s", r.error().describe().c_str());
        const auto at = r->text.find("total_net_output_bytes:");
        return at == std::string::npos ? -1 : std::stoll(r->text.substr(at + 23));
    }
    void plant(const std::string& hash, const std::string& field, const std::string& value)
    {
        auto r = redis().command({ "HSET", hash, field, value });
        QVERIFY2(r.ok() && r->type == RedisReply::Type::Integer, r.ok() ? r->text.c_str() : "");
    }

    std::unique_ptr<RedisServer> m_own;
    RedisServer::TestHome m_home;
    std::unique_ptr<RedisConnection> m_connection;
    int m_homes = 0;
};

void TestRedisValueSizes::init()
{
    // A server of its own, never the shared one: the bytes it sent (INFO stats) must be this
    // test's alone.
    if (RedisServer::binary().isEmpty())
        QSKIP("redis-server is not installed (scripts/bootstrap.sh installs it)");
    if (!m_own) {
        m_own = std::make_unique<RedisServer>();
        QString why;
        QVERIFY2(m_own->start({}, &why), qPrintable(why));
    }
    m_home.url = m_own->url()
        + "?prefix=" + RedisServer::uniquePrefix(QStringLiteral("sizes"), ++m_homes).toStdString();
    const Ran set = cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
        QStringLiteral("--requests"), QStringLiteral("5"), QStringLiteral("--parallel"),
        QStringLiteral("2") });
    QVERIFY2(set.code == 0, set.err.constData());
}

void TestRedisValueSizes::cleanup()
{
    m_connection.reset();
}

void TestRedisValueSizes::aHugeLimitsValueIsRefusedByNameUnread()
{
    // Valid JSON with every field a provider needs, padded: decoded, it would pass for limits.
    const std::string huge
        = "{\"r\":500,\"w\":60000,\"h\":100,\"bb\":60000,\"bc\":900000,\"mh\":600000,\"pad\":\""
        + std::string(BIG, 'x') + "\"}";
    plant(key("limits"), "api", huge);
    const QByteArray size = QByteArray::number(static_cast<qint64>(huge.size()));
    const QByteArray field = QByteArray::fromStdString(key("limits")) + " field api";

    const qint64 before = bytesSent();
    const QList<QStringList> commands { { QStringLiteral("status") },
        { QStringLiteral("status"), QStringLiteral("--json") },
        { QStringLiteral("limits"), QStringLiteral("show") },
        { QStringLiteral("limits"), QStringLiteral("export") },
        { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("c"),
            QStringLiteral("--timeout"), QStringLiteral("0") },
        { QStringLiteral("run"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("c"),
            QStringLiteral("--timeout"), QStringLiteral("0"), QStringLiteral("--"), QStringLiteral("true") },
        { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
            QStringLiteral("--requests"), QStringLiteral("6") } };
    for (const QStringList& args : commands) {
        const Ran r = cli(args);
        const QByteArray what = args.join(QLatin1Char(' ')).toUtf8() + " -> " + QByteArray::number(r.code)
            + ": " + r.err.left(2000) + r.out.left(2000);
        QVERIFY2(r.code == 3, what.constData()); // fail closed: nothing admitted on limits nobody can read
        QVERIFY2(r.err.contains(size) && r.err.contains("bytes"), what.constData()); // its size
        QVERIFY2(r.err.contains(QByteArray::fromStdString(key("limits"))), what.constData()); // its key
        QVERIFY2(r.err.contains("'api'") || r.err.contains(field), what.constData()); // its field
    }
    // Seven commands, and not one copy of the value went out (each would be 10 MB).
    const qint64 sent = bytesSent() - before;
    QVERIFY2(sent < BIG / 4, QByteArray::number(sent).constData());

    // The way out stays open: removing the provider needs no decoding, and then it can be set.
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("remove"), QStringLiteral("api") }).code, 0);
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("5") })
                 .code,
        0);
    QCOMPARE(cli({ QStringLiteral("status") }).code, 0);
}

// A 10 MB field *name* in the limits key (values are bounded; names were not): every reader
// pulled it and printed it whole (10 MB on stderr, 20 MB with --json). Now it is named by its
// first 64 bytes and its length, and never sent.
void TestRedisValueSizes::aHugeFieldNameIsNamedByItsStartUnread()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("5") })
                 .code,
        0);
    const std::string name = "evil\x1b[31m" + std::string(BIG, 'n');
    plant(key("limits"), name, R"({"bb":60000,"bc":900000,"h":100,"mh":600000,"r":1,"w":60000})");
    const qint64 before = bytesSent();
    const QList<QStringList> commands { { QStringLiteral("status") },
        { QStringLiteral("status"), QStringLiteral("--json") }, { QStringLiteral("limits"), QStringLiteral("show") },
        { QStringLiteral("limits"), QStringLiteral("export") } };
    for (const QStringList& args : commands) {
        const Ran r = cli(args);
        const QByteArray what = args.join(QLatin1Char(' ')).toUtf8() + " -> " + QByteArray::number(r.code) + ": "
            + r.err.left(2000) + r.out.left(2000);
        QVERIFY2(r.code == 3, what.constData());
        QVERIFY2(r.err.contains(QByteArray::number(static_cast<qint64>(name.size())) + " bytes"), what.constData());
        QVERIFY2(r.err.size() + r.out.size() < 4096, what.constData());
        QVERIFY2(!r.err.contains('\x1b') && !r.out.contains('\x1b'), what.constData());
    }
    const qint64 sent = bytesSent() - before;
    QVERIFY2(sent < BIG / 4, QByteArray::number(sent).constData());
}

void TestRedisValueSizes::aHugeStateValueIsSetAsideUnread()
{
    // Two admissions, then the provider's state swapped for 10 MB: a reader names it, the next
    // writer sets it aside and restarts the provider conservatively (its window full), as a state
    // that does not decode.
    for (int i = 0; i < 2; ++i) {
        QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                         QStringLiteral("c"), QStringLiteral("--timeout"), QStringLiteral("0") })
                     .code,
            0);
    }
    plant(key("state"), "p:api", std::string(BIG, '\xc1')); // 0xc1: never used by MessagePack
    const qint64 before = bytesSent();
    const Ran look = cli({ QStringLiteral("status") });
    QVERIFY2(look.code == 3, look.err.constData());
    QVERIFY2(
        look.err.contains(QByteArray::fromStdString(key("state")) + " field p:api"), look.err.constData());
    QVERIFY2(look.err.contains(QByteArray::number(BIG) + " bytes"), look.err.constData());
    const Ran refused = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("c"), QStringLiteral("--timeout"), QStringLiteral("0") });
    QVERIFY2(refused.code == 1, refused.err.constData()); // the window counts as full: nothing admitted
    const qint64 sent = bytesSent() - before;
    QVERIFY2(sent < BIG / 4, QByteArray::number(sent).constData());
    auto aside = redis().command({ "HLEN", key("corrupt") });
    QVERIFY(aside.ok());
    QCOMPARE(aside->integer, 1);
    const Ran after = cli({ QStringLiteral("status"), QStringLiteral("--json") });
    QVERIFY2(after.code == 0, after.err.constData());
}

void TestRedisValueSizes::aHashWithTooManyFieldsIsRefusedByItsCount()
{
    // More fields than a home ever has (64 providers): a look does not walk them.
    std::vector<std::string> argv { "HSET", key("limits") };
    const int fields = static_cast<int>(RedisStateCodec::MAX_HASH_FIELDS) + 500;
    for (int i = 0; i < fields; ++i) {
        argv.push_back("junk" + std::to_string(i));
        argv.push_back("{}");
    }
    auto r = redis().command(argv);
    QVERIFY(r.ok());
    const Ran look = cli({ QStringLiteral("status") });
    QVERIFY2(look.code == 3, look.err.constData());
    QVERIFY2(look.err.contains(QByteArray::fromStdString(key("limits"))), look.err.constData());
    QVERIFY2(look.err.contains(QByteArray::number(fields + 1) + " fields"), look.err.constData());
}

QTEST_GUILESS_MAIN(TestRedisValueSizes)
#include "tst_redisvaluesizes.moc"
