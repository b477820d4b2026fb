// RedisConnection against a real redis-server (started privately by this test): the server's
// clock, scripts loaded once and reloaded after the server forgets them, passwords from the
// environment or a 0600 file (never echoed), and failing closed — a server that is down, stopped
// or restarted gives a clear error naming the URL, never a hang, and the next command reconnects.

#include "helpers/redisserver.h"
#include "helpers/tricklepeer.h"
#include "store/redisconnection.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace tollgate;
using namespace std::chrono_literals;

class TestRedisConnection final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void init();
    void cleanup();

    void serverTimeIsTheClock();
    void scriptsAreReloadedAfterTheServerForgetsThem();
    void functionsAreLoadedOnceReloadedAndFallBackWhereRefused();
    void readOnlyCallsTakeEveryWayTheUserIsAllowed_data();
    void readOnlyCallsTakeEveryWayTheUserIsAllowed();
    void databaseIsSelected();
    void keysOfAHomeShareOneHashTag();
    void passwordFromTheEnvironment();
    void passwordFileMustBeOursAndPrivate();
    void serverDownFailsClosedNamingTheUrl();
    void stoppedServerTimesOut();
    void restartedServerIsReconnected_data();
    void restartedServerIsReconnected();
    void aKilledConnectionIsMadeAgainBeforeTheCommand();
    void socketIsCloseOnExecAndTimeoutIsNeverNone();
    void aTricklingServerCannotStretchTheDeadline();

private:
    static RedisAddress address(quint16 port, int db = 0)
    {
        RedisAddress a;
        a.host = "127.0.0.1";
        a.port = port;
        a.db = db;
        return a;
    }
    RedisServer m_server;
    std::unique_ptr<QTemporaryDir> m_dir;
};

void TestRedisConnection::initTestCase()
{
    if (RedisServer::binary().isEmpty())
        QFAIL("redis-server is not installed (scripts/bootstrap.sh installs it)");
    QString why;
    QVERIFY2(m_server.start({}, &why), qPrintable(why));
}

void TestRedisConnection::init()
{
    qunsetenv("TOLLGATE_REDIS_PASSWORD");
    qunsetenv("TOLLGATE_REDIS_PASSWORD_FILE");
    m_dir = std::make_unique<QTemporaryDir>();
}

void TestRedisConnection::cleanup()
{
    qunsetenv("TOLLGATE_REDIS_PASSWORD");
    qunsetenv("TOLLGATE_REDIS_PASSWORD_FILE");
}

void TestRedisConnection::serverTimeIsTheClock()
{
    auto c = RedisConnection::open(address(m_server.port()));
    QVERIFY2(c.ok(), c.ok() ? "" : c.error().describe().c_str());
    auto t = c->serverTimeMs();
    QVERIFY(t.ok());
    const std::int64_t local = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch())
                                   .count();
    QVERIFY(std::llabs(*t - local) < 60000); // the same machine: the same clock, give or take
}

void TestRedisConnection::scriptsAreReloadedAfterTheServerForgetsThem()
{
    auto c = RedisConnection::open(address(m_server.port()));
    QVERIFY(c.ok());
    const std::string script = "redis.call('INCR', KEYS[1]) return redis.call('GET', KEYS[1]) .. ARGV[1]";
    const std::string key = RedisConnection::key(c->address(), "scripttest");
    QVERIFY(c->command({ "DEL", key }).ok());
    auto first = c->eval(script, { key }, { "x" });
    QVERIFY(first.ok());
    QCOMPARE(QString::fromStdString(first->text), QStringLiteral("1x"));
    auto flushed = c->command({ "SCRIPT", "FLUSH" });
    QVERIFY(flushed.ok());
    auto second = c->eval(script, { key }, { "y" });
    QVERIFY(second.ok());
    // Ran exactly once more: the NOSCRIPT answer ran nothing, the reload ran it once.
    QCOMPARE(QString::fromStdString(second->text), QStringLiteral("2y"));
    auto error = c->eval("return redis.error_reply('nope')", {}, {});
    QVERIFY(error.ok());
    QCOMPARE(error->type, RedisReply::Type::Error);
}

void TestRedisConnection::functionsAreLoadedOnceReloadedAndFallBackWhereRefused()
{
    // The shape of core/backend/redisquota.lua: a library that registers FUNCTION_NAME when loaded
    // as functions, and runs itself when run by EVALSHA.
    const std::string library = R"(
local function main(keys, args)
    redis.call('INCR', keys[1])
    return redis.call('GET', keys[1]) .. args[1]
end
if redis.register_function then
    redis.register_function(FUNCTION_NAME, main)
else
    return main(KEYS, ARGV)
end
)";
    auto c = RedisConnection::open(address(m_server.port()));
    QVERIFY(c.ok());
    const std::string key = RedisConnection::key(c->address(), "functiontest");
    QVERIFY(c->command({ "DEL", key }).ok());
    QVERIFY(c->command({ "FUNCTION", "FLUSH" }).ok());
    auto first = c->callFunction(library, { key }, { "x" });
    QVERIFY2(first.ok(), first.ok() ? "" : first.error().describe().c_str());
    QCOMPARE(QString::fromStdString(first->text), QStringLiteral("1x"));
    // Loaded as a library named after its text, and called by FCALL from then on.
    auto listed = c->command({ "FUNCTION", "LIST", "LIBRARYNAME", "tollgate_*" });
    QVERIFY(listed.ok());
    QCOMPARE(listed->elements.size(), std::size_t(1));
    auto calls = [&] {
        auto info = c->command({ "INFO", "commandstats" });
        const std::string& t = info->text;
        const auto at = t.find("cmdstat_fcall:calls=");
        return at == std::string::npos ? 0LL : std::atoll(t.c_str() + at + 20);
    };
    const long long before = calls();
    auto second = c->callFunction(library, { key }, { "y" });
    QVERIFY(second.ok());
    QCOMPARE(QString::fromStdString(second->text), QStringLiteral("2y"));
    QCOMPARE(calls(), before + 1);

    // The server forgot it (FUNCTION FLUSH, a restart without persistence): "not found" ran
    // nothing; loaded again, it runs exactly once.
    QVERIFY(c->command({ "FUNCTION", "FLUSH" }).ok());
    auto third = c->callFunction(library, { key }, { "z" });
    QVERIFY(third.ok());
    QCOMPARE(QString::fromStdString(third->text), QStringLiteral("3z"));

    // A user whose ACL refuses functions (as some managed services do): the same text runs by
    // EVALSHA, with the same result, and nothing is loaded as a library.
    QVERIFY(c->command({ "FUNCTION", "FLUSH" }).ok());
    QVERIFY(c->command({ "ACL", "SETUSER", "nofunctions", "reset", "on", ">fn-pw", "~*", "&*", "+@all",
                           "-fcall", "-function" })
                .ok());
    qputenv("TOLLGATE_REDIS_PASSWORD", "fn-pw");
    RedisAddress limited = address(m_server.port());
    limited.user = "nofunctions";
    auto d = RedisConnection::open(limited);
    QVERIFY2(d.ok(), d.ok() ? "" : d.error().describe().c_str());
    auto fourth = d->callFunction(library, { key }, { "w" });
    QVERIFY2(fourth.ok(), fourth.ok() ? "" : fourth.error().describe().c_str());
    QCOMPARE(QString::fromStdString(fourth->text), QStringLiteral("4w"));
    auto fifth = d->callFunction(library, { key }, { "v" });
    QVERIFY(fifth.ok());
    QCOMPARE(QString::fromStdString(fifth->text), QStringLiteral("5v"));
    listed = c->command({ "FUNCTION", "LIST", "LIBRARYNAME", "tollgate_*" });
    QVERIFY(listed.ok());
    QCOMPARE(listed->elements.size(), std::size_t(0));
    QVERIFY(c->command({ "ACL", "DELUSER", "nofunctions" }).ok());
}

void TestRedisConnection::readOnlyCallsTakeEveryWayTheUserIsAllowed_data()
{
    // What the ACL takes away, and the command the look must then be made with.
    QTest::addColumn<QStringList>("denied");
    QTest::addColumn<QString>("by");
    QTest::newRow("everything allowed") << QStringList {} << "fcall_ro";
    QTest::newRow("no FCALL_RO") << QStringList { QStringLiteral("-fcall_ro") } << "evalsha_ro";
    QTest::newRow("no functions at all") << QStringList { QStringLiteral("-fcall"), QStringLiteral("-fcall_ro"),
        QStringLiteral("-function") } << "evalsha_ro";
    QTest::newRow("no read-only commands") << QStringList { QStringLiteral("-fcall_ro"), QStringLiteral("-evalsha_ro") }
                                           << "fcall";
    QTest::newRow("nothing but EVALSHA") << QStringList { QStringLiteral("-fcall_ro"), QStringLiteral("-evalsha_ro"),
        QStringLiteral("-fcall"), QStringLiteral("-function") } << "evalsha";
}

void TestRedisConnection::readOnlyCallsTakeEveryWayTheUserIsAllowed()
{
    // The shape of core/backend/redisquota.lua: a read-only FUNCTION_NAME_ro beside FUNCTION_NAME.
    QFETCH(QStringList, denied);
    QFETCH(QString, by);
    const std::string library = R"(
local function main(keys, args)
    return 'seen ' .. tostring(redis.call('EXISTS', keys[1])) .. args[1]
end
if redis.register_function then
    redis.register_function(FUNCTION_NAME, main)
    redis.register_function({ function_name = FUNCTION_NAME .. '_ro', callback = main, flags = { 'no-writes' } })
else
    return main(KEYS, ARGV)
end
)";
    auto admin = RedisConnection::open(address(m_server.port()));
    QVERIFY(admin.ok());
    QVERIFY(admin->command({ "FUNCTION", "FLUSH" }).ok());
    QVERIFY(admin->command({ "SCRIPT", "FLUSH" }).ok());
    QVERIFY(admin->command({ "CONFIG", "RESETSTAT" }).ok());
    std::vector<std::string> acl { "ACL", "SETUSER", "looker", "reset", "on", ">look-pw", "~*", "&*", "+@all" };
    for (const QString& d : denied)
        acl.push_back(d.toStdString());
    QVERIFY(admin->command(acl).ok());
    qputenv("TOLLGATE_REDIS_PASSWORD", "look-pw");
    RedisAddress limited = address(m_server.port());
    limited.user = "looker";
    auto c = RedisConnection::open(limited);
    QVERIFY2(c.ok(), c.ok() ? "" : c.error().describe().c_str());
    for (const char* arg : { "!", "?" }) { // twice: the way found is kept
        auto r = c->callReadOnly(library, { "{t}:k" }, { arg });
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().describe().c_str());
        QCOMPARE(QString::fromStdString(r->text), QStringLiteral("seen 0") + QLatin1String(arg));
    }
    auto info = admin->command({ "INFO", "commandstats" });
    QVERIFY(info.ok());
    const std::string wanted = "cmdstat_" + by.toStdString() + ":calls=";
    const auto at = info->text.find(wanted);
    QVERIFY2(at != std::string::npos, info->text.c_str());
    QVERIFY2(std::atoll(info->text.c_str() + at + wanted.size()) >= 2, info->text.c_str());
    QVERIFY(admin->command({ "ACL", "DELUSER", "looker" }).ok());
}

void TestRedisConnection::databaseIsSelected()
{
    auto three = RedisConnection::open(address(m_server.port(), 3));
    auto zero = RedisConnection::open(address(m_server.port(), 0));
    QVERIFY(three.ok() && zero.ok());
    QVERIFY(three->command({ "SET", "only-in-3", "v" }).ok());
    auto seen = zero->command({ "EXISTS", "only-in-3" });
    QVERIFY(seen.ok());
    QCOMPARE(seen->integer, std::int64_t(0));
    auto bad = RedisConnection::open(address(m_server.port(), 60000));
    QVERIFY(!bad.ok());
    QVERIFY2(
        bad.error().describe().find("database 60000") != std::string::npos, bad.error().describe().c_str());
}

void TestRedisConnection::keysOfAHomeShareOneHashTag()
{
    RedisAddress a = address(1);
    a.prefix = "team-a";
    QCOMPARE(RedisConnection::key(a, "state"), std::string("{team-a}:state"));
    QCOMPARE(RedisConnection::key(a, "history"), std::string("{team-a}:history"));
}

void TestRedisConnection::passwordFromTheEnvironment()
{
    RedisServer secured;
    QString why;
    QVERIFY2(secured.start({ QStringLiteral("--requirepass"), QStringLiteral("s3cret-pw") }, &why),
        qPrintable(why));
    auto none = RedisConnection::open(address(secured.port()));
    QVERIFY(none.ok()); // connecting needs no password; the first command does
    auto refused = none->command({ "PING" });
    QVERIFY(!refused.ok());
    QCOMPARE(refused.error().kind, ErrorKind::Permission);
    QVERIFY(refused.error().describe().find("TOLLGATE_REDIS_PASSWORD") != std::string::npos);

    qputenv("TOLLGATE_REDIS_PASSWORD", "wrong-pw");
    auto wrong = RedisConnection::open(address(secured.port()));
    QVERIFY(!wrong.ok());
    QCOMPARE(wrong.error().kind, ErrorKind::Permission);
    QVERIFY(wrong.error().describe().find("wrong-pw") == std::string::npos);
    QVERIFY(wrong.error().describe().find(secured.url() + "/0") != std::string::npos);

    qputenv("TOLLGATE_REDIS_PASSWORD", "s3cret-pw");
    auto right = RedisConnection::open(address(secured.port()));
    QVERIFY2(right.ok(), right.ok() ? "" : right.error().describe().c_str());
    auto pong = right->command({ "PING" });
    QVERIFY(pong.ok());
    QCOMPARE(QString::fromStdString(pong->text), QStringLiteral("PONG"));
}

void TestRedisConnection::passwordFileMustBeOursAndPrivate()
{
    const QString file = m_dir->path() + QStringLiteral("/pw");
    {
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("from-a-file\n");
    }
    qputenv("TOLLGATE_REDIS_PASSWORD_FILE", file.toLocal8Bit());
    QVERIFY(::chmod(file.toLocal8Bit().constData(), 0644) == 0);
    auto open = RedisConnection::password();
    QVERIFY(!open.ok());
    QCOMPARE(open.error().kind, ErrorKind::Permission);
    QVERIFY(open.error().describe().find("chmod 600") != std::string::npos);

    QVERIFY(::chmod(file.toLocal8Bit().constData(), 0600) == 0);
    auto pw = RedisConnection::password();
    QVERIFY(pw.ok());
    QCOMPARE(pw->value_or(""), std::string("from-a-file")); // the newline is not part of it

    // A FIFO where the file should be is refused at once, never waited on.
    const QString fifo = m_dir->path() + QStringLiteral("/fifo");
    QVERIFY(::mkfifo(fifo.toLocal8Bit().constData(), 0600) == 0);
    qputenv("TOLLGATE_REDIS_PASSWORD_FILE", fifo.toLocal8Bit());
    auto blocked = RedisConnection::password();
    QVERIFY(!blocked.ok());
    QVERIFY(blocked.error().describe().find("TOLLGATE_REDIS_PASSWORD_FILE") != std::string::npos);
}

void TestRedisConnection::serverDownFailsClosedNamingTheUrl()
{
    RedisServer gone;
    QString why;
    QVERIFY2(gone.start({}, &why), qPrintable(why));
    const quint16 port = gone.port();
    gone.stop();
    auto c = RedisConnection::open(address(port), 500ms);
    QVERIFY(!c.ok());
    QVERIFY(c.error().kind == ErrorKind::Io || c.error().kind == ErrorKind::Timeout);
    QVERIFY2(c.error().describe().find("redis://127.0.0.1:" + std::to_string(port)) != std::string::npos,
        c.error().describe().c_str());
}

void TestRedisConnection::stoppedServerTimesOut()
{
    RedisServer frozen;
    QString why;
    QVERIFY2(frozen.start({}, &why), qPrintable(why));
    auto c = RedisConnection::open(address(frozen.port()), 300ms);
    QVERIFY(c.ok());
    frozen.pause();
    auto r = c->command({ "PING" });
    frozen.resume();
    QVERIFY(!r.ok());
    QCOMPARE(r.error().kind, ErrorKind::Timeout);
    QVERIFY(r.error().describe().find(frozen.url() + "/0") != std::string::npos);
    QVERIFY(c->broken()); // its replies may be out of step now: never reused
    auto again = c->command({ "PING" });
    QVERIFY2(again.ok(), again.ok() ? "" : again.error().describe().c_str());
}

void TestRedisConnection::restartedServerIsReconnected_data()
{
    QTest::addColumn<bool>("askedWhileDown");
    QTest::newRow("a command failed while it was down") << true;
    // A kept connection (the proxy's pooled ones) that the server closed while it was idle
    // costs no failed command: it is made again before the next one is sent.
    QTest::newRow("idle while it was down") << false;
}

void TestRedisConnection::restartedServerIsReconnected()
{
    QFETCH(bool, askedWhileDown);
    RedisServer bouncing;
    QString why;
    QVERIFY2(bouncing.start({}, &why), qPrintable(why));
    auto c = RedisConnection::open(address(bouncing.port()), 1000ms);
    QVERIFY(c.ok());
    QVERIFY(c->command({ "SET", "k", "v" }).ok());
    bouncing.stop();
    if (askedWhileDown) {
        auto down = c->command({ "GET", "k" });
        QVERIFY(!down.ok());
    }
    QVERIFY2(bouncing.restart(&why), qPrintable(why));
    auto back = c->command({ "GET", "k" });
    QVERIFY2(back.ok(), back.ok() ? "" : back.error().describe().c_str());
    QVERIFY(back->isNil()); // no persistence: the data is gone (the store must notice this)
}

// The same for a connection the server killed (CLIENT KILL, an idle timeout).
void TestRedisConnection::aKilledConnectionIsMadeAgainBeforeTheCommand()
{
    RedisServer server;
    QString why;
    QVERIFY2(server.start({}, &why), qPrintable(why));
    auto c = RedisConnection::open(address(server.port()), 1000ms);
    QVERIFY(c.ok());
    QVERIFY(c->command({ "PING" }).ok());
    auto killer = RedisConnection::open(address(server.port()), 1000ms);
    QVERIFY(killer.ok());
    auto killed = killer->command({ "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes" });
    QVERIFY(killed.ok());
    QCOMPARE(killed->integer, std::int64_t { 1 });
    auto again = c->command({ "PING" });
    QVERIFY2(again.ok(), again.ok() ? "" : again.error().describe().c_str());
}

void TestRedisConnection::socketIsCloseOnExecAndTimeoutIsNeverNone()
{
    auto c = RedisConnection::open(address(m_server.port()));
    QVERIFY(c.ok());
    QVERIFY(c->command({ "PING" }).ok());
    // Every socket of this process (the connection's among them) is close-on-exec: a command
    // run by `tollgate run` never inherits the connection.
    int sockets = 0;
    const auto names = QDir(QStringLiteral("/proc/self/fd"))
                           .entryList(QDir::AllEntries | QDir::System | QDir::NoDotAndDotDot);
    for (const QString& name : names) {
        char target[256] = {};
        const QByteArray link = QByteArrayLiteral("/proc/self/fd/") + name.toLatin1();
        if (::readlink(link.constData(), target, sizeof target - 1) <= 0
            || std::strncmp(target, "socket:", 7) != 0)
            continue;
        ++sockets;
        const int flags = ::fcntl(name.toInt(), F_GETFD);
        QVERIFY2(flags >= 0 && (flags & FD_CLOEXEC), qPrintable(name));
    }
    QVERIFY(sockets >= 1);
    auto none = RedisConnection::open(address(m_server.port()), 0ms);
    QVERIFY(!none.ok());
    QCOMPARE(none.error().kind, ErrorKind::Usage);
}

// A peer that answers a command one byte at a time, never finishing: each read gets a byte
// well within the timeout, so a per-read timeout would wait for ever (here: until the peer
// gives up after 20 s and hangs up, an Io error). One deadline for the whole command ends it
// as a Timeout. The peer is a separate process, as a remote server is.
void TestRedisConnection::aTricklingServerCannotStretchTheDeadline()
{
    TricklePeer peer;
    QVERIFY(peer.port() != 0);
    auto c = RedisConnection::open(address(peer.port()), 300ms);
    QVERIFY2(c.ok(), c.ok() ? "" : c.error().describe().c_str());
    auto r = c->command({ "PING" });
    QVERIFY(!r.ok());
    QVERIFY2(r.error().kind == ErrorKind::Timeout, r.error().describe().c_str());
    QVERIFY(r.error().describe().find("did not answer in time") != std::string::npos);
    QVERIFY(c->broken());
}

QTEST_APPLESS_MAIN(TestRedisConnection)
#include "tst_redisconnection.moc"
