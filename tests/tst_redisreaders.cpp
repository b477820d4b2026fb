// The commands that only read a Redis home — status, limits show, limits export, history — as
// real CLI processes against a redis-server the test starts. What must hold: a home that cannot
// be reached or logged into is a failure (exit 3 naming the problem), never an empty home ("nothing
// has run here", an empty export with exit 0: a backup job would silently empty its backup); a
// look writes nothing, so it works while Redis holds writers (CLIENT PAUSE WRITE) and on a
// read-only replica; holders and waiters of other hosts are named by their host; a lost state is
// shown as the next call will see it.

#include "helpers/redisserver.h"
#include "testsupport.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using Ran = TestSupport::Ran;

} // namespace

class TestRedisReaders final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void cleanup();
    void aHomeThatCannotBeLoggedIntoIsAFailureForReaders_data();
    void aHomeThatCannotBeLoggedIntoIsAFailureForReaders();
    void aLookWritesNothing();
    void holdersAndWaitersOfOtherHostsAreNamed();
    void aLostStateIsShownAsTheNextCallSeesIt();

private:
    // The CLI with `--home HOME` after the command words and `env` over the test's environment
    // (a value of "" removes the variable).
    Ran cli(const QStringList& args, const QMap<QString, QString>& env = {}, int limitMs = 60000) const
    {
        QStringList all = args;
        const qsizetype at
            = std::min<qsizetype>(args.first() == QStringLiteral("limits") ? 2 : 1, all.size());
        all.insert(at, QStringLiteral("--home"));
        all.insert(at + 1, m_home);
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        e.remove(QStringLiteral("TOLLGATE_REDIS_PASSWORD"));
        e.remove(QStringLiteral("TOLLGATE_REDIS_PASSWORD_FILE"));
        for (auto it = env.begin(); it != env.end(); ++it) {
            if (it.value().isEmpty())
                e.remove(it.key());
            else
                e.insert(it.key(), it.value());
        }
        return TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH), all, e, limitMs);
    }
    QString writeFile(const QString& name, const QByteArray& bytes, mode_t mode) const
    {
        const QString path = m_dir->path() + QLatin1Char('/') + name;
        QFile f(path);
        if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(bytes) != bytes.size())
            qFatal("cannot write %s", qPrintable(path));
        f.close();
        if (::chmod(path.toLocal8Bit().constData(), mode) != 0)
            qFatal("cannot chmod %s", qPrintable(path));
        return path;
    }

    // redis-cli against the test's server.
    Ran redisCli(const RedisServer& server, const QStringList& args) const
    {
        return TestSupport::run(QStringLiteral("redis-cli"),
            QStringList { QStringLiteral("-p"), QString::number(server.port()) } + args, 20000);
    }
    void startServer()
    {
        m_redis = std::make_unique<RedisServer>();
        QString why;
        QVERIFY2(m_redis->start({}, &why), qPrintable(why));
        m_home = QString::fromStdString(m_redis->url()) + QStringLiteral("?prefix=readers");
    }
    static QJsonObject object(const QByteArray& out) { return QJsonDocument::fromJson(out).object(); }

    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<RedisServer> m_redis;
    QString m_home;
};

void TestRedisReaders::init()
{
    if (RedisServer::binary().isEmpty())
        QSKIP("redis-server is not installed (scripts/bootstrap.sh installs it)");
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
}

void TestRedisReaders::cleanup()
{
    m_redis.reset();
}

void TestRedisReaders::aHomeThatCannotBeLoggedIntoIsAFailureForReaders_data()
{
    // How the password is (not) given, and what the failure must say.
    QTest::addColumn<QString>("how");
    QTest::addColumn<QString>("says");
    QTest::newRow("a mistyped password file") << "missing"
                                              << "/no-such-password-file";
    QTest::newRow("an empty password file") << "empty"
                                            << "is empty";
    QTest::newRow("a password file others can read") << "open"
                                                     << "chmod 600";
    QTest::newRow("a wrong password") << "wrong"
                                      << "refused the password";
    QTest::newRow("no password at all") << "none"
                                        << "requires a password";
}

void TestRedisReaders::aHomeThatCannotBeLoggedIntoIsAFailureForReaders()
{
    QFETCH(QString, how);
    QFETCH(QString, says);
    m_redis = std::make_unique<RedisServer>();
    QString why;
    QVERIFY2(m_redis->start({ QStringLiteral("--requirepass"), QStringLiteral("r1ght-pw") }, &why),
        qPrintable(why));
    m_home = QString::fromStdString(m_redis->url()) + QStringLiteral("?prefix=readers");
    const QMap<QString, QString> right { { QStringLiteral("TOLLGATE_REDIS_PASSWORD_FILE"),
        writeFile(QStringLiteral("right"), "r1ght-pw\n", 0600) } };
    // A home with limits and history: what a reader that cannot log in must not call empty.
    Ran set = cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                      QStringLiteral("--requests"), QStringLiteral("5") },
        right);
    QVERIFY2(set.code == 0, set.err.constData());

    QMap<QString, QString> env;
    if (how == QStringLiteral("missing"))
        env[QStringLiteral("TOLLGATE_REDIS_PASSWORD_FILE")]
            = m_dir->path() + QStringLiteral("/no-such-password-file");
    else if (how == QStringLiteral("empty"))
        env[QStringLiteral("TOLLGATE_REDIS_PASSWORD_FILE")] = writeFile(QStringLiteral("empty"), "\n", 0600);
    else if (how == QStringLiteral("open"))
        env[QStringLiteral("TOLLGATE_REDIS_PASSWORD_FILE")]
            = writeFile(QStringLiteral("open"), "r1ght-pw\n", 0644);
    else if (how == QStringLiteral("wrong"))
        env[QStringLiteral("TOLLGATE_REDIS_PASSWORD_FILE")]
            = writeFile(QStringLiteral("wrong"), "wr0ng-pw\n", 0600);

    const QList<QStringList> readers { { QStringLiteral("status") },
        { QStringLiteral("status"), QStringLiteral("--json") },
        { QStringLiteral("limits"), QStringLiteral("show") },
        { QStringLiteral("limits"), QStringLiteral("export") },
        { QStringLiteral("limits"), QStringLiteral("export"), QStringLiteral("api") },
        { QStringLiteral("history") }, { QStringLiteral("history"), QStringLiteral("--json") } };
    for (const QStringList& args : readers) {
        const Ran r = cli(args, env);
        const QByteArray what = args.join(QLatin1Char(' ')).toUtf8() + " -> " + QByteArray::number(r.code)
            + "\nstdout: " + r.out + "\nstderr: " + r.err;
        QVERIFY2(r.code == 3, what.constData());
        QVERIFY2(r.err.contains(says.toUtf8()), what.constData());
        QVERIFY2(!r.err.contains("nothing has run") && !r.out.contains("nothing has run"), what.constData());
        QVERIFY2(!r.out.contains("\"providers\""), what.constData()); // no (empty) export, no status
        QVERIFY2(
            !r.err.contains("Protocol error"), what.constData()); // the server's words for "log in first"
        QVERIFY2(!r.err.contains("wr0ng-pw") && !r.out.contains("wr0ng-pw"), what.constData());
        if (args.contains(QStringLiteral("--json"))) {
            const QJsonObject doc = QJsonDocument::fromJson(r.out).object();
            QVERIFY2(doc.value(QStringLiteral("code")).toInt() == 3, what.constData());
        }
    }
    // With the right password the same readers see the home.
    const Ran seen = cli({ QStringLiteral("limits"), QStringLiteral("export") }, right);
    QVERIFY2(seen.code == 0 && seen.out.contains("\"api\""), seen.err.constData());
}

void TestRedisReaders::aLookWritesNothing()
{
    // Before issue 27 every look was an FCALL of a function that may write: Redis held it under
    // CLIENT PAUSE WRITE (status timed out, exit 3) and a replica refused it (READONLY).
    startServer();
    for (const QStringList& args :
        { QStringList { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
              QStringLiteral("--requests"), QStringLiteral("5") },
            QStringList { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                QStringLiteral("c"), QStringLiteral("--timeout"), QStringLiteral("5") } }) {
        const Ran r = cli(args);
        QVERIFY2(r.code == 0, r.err.constData());
    }
    const QList<QStringList> looks { { QStringLiteral("status") },
        { QStringLiteral("status"), QStringLiteral("--json") },
        { QStringLiteral("limits"), QStringLiteral("show") },
        { QStringLiteral("limits"), QStringLiteral("export") }, { QStringLiteral("history") } };
    auto looksWork = [&](const char* where) {
        for (const QStringList& args : looks) {
            const Ran r = cli(args);
            const QByteArray what = QByteArray(where) + ": " + args.join(QLatin1Char(' ')).toUtf8() + " -> "
                + QByteArray::number(r.code) + ": " + r.err + r.out.left(500);
            QVERIFY2(r.code == 0, what.constData());
            QVERIFY2(r.out.contains("api"), what.constData());
        }
        const QJsonObject doc = object(cli({ QStringLiteral("status"), QStringLiteral("--json") }).out);
        QCOMPARE(doc.value(QStringLiteral("providers"))
                     .toArray()
                     .first()
                     .toObject()
                     .value(QStringLiteral("used_requests"))
                     .toInt(),
            1);
    };

    // Writers held for 60 s (each look has 2 s: one held would fail it), then let go.
    const Ran paused = redisCli(*m_redis,
        { QStringLiteral("CLIENT"), QStringLiteral("PAUSE"), QStringLiteral("60000"),
            QStringLiteral("WRITE") });
    QVERIFY2(paused.code == 0 && paused.out.contains("OK"), paused.err.constData());
    looksWork("under CLIENT PAUSE WRITE");
    QVERIFY(redisCli(*m_redis, { QStringLiteral("CLIENT"), QStringLiteral("UNPAUSE") }).code == 0);

    // A read-only replica of the server, once it has the data.
    RedisServer replica;
    QString why;
    QVERIFY2(replica.start({ QStringLiteral("--replicaof"), QStringLiteral("127.0.0.1"),
                               QString::number(m_redis->port()) },
                 &why),
        qPrintable(why));
    QTRY_VERIFY_WITH_TIMEOUT(redisCli(replica, { QStringLiteral("INFO"), QStringLiteral("replication") })
                                 .out.contains("master_link_status:up"),
        30000);
    QTRY_VERIFY_WITH_TIMEOUT(
        redisCli(replica, { QStringLiteral("EXISTS"), QStringLiteral("{readers}:limits") }).out.trimmed()
            == "1",
        30000);
    m_home = QString::fromStdString(replica.url()) + QStringLiteral("?prefix=readers");
    looksWork("on a read-only replica");
    // And a writer there fails, naming why (no admission on a replica).
    const Ran refused = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("c"), QStringLiteral("--timeout"), QStringLiteral("1") });
    QVERIFY2(refused.code == 3 && refused.err.contains("READONLY"), refused.err.constData());
}

void TestRedisReaders::holdersAndWaitersOfOtherHostsAreNamed()
{
    // Another host: a pid namespace and a UTS namespace of its own (a container), named
    // "build-box". Its holder and its waiter must be shown with that name, not as "an unknown
    // pid namespace" and a bare pid.
    if (::geteuid() != 0)
        QSKIP("needs root (pid and UTS namespaces)");
    startServer();
    const Ran set = cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
        QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("1") });
    QVERIFY2(set.code == 0, set.err.constData());
    auto elsewhere = [&](const QString& args) {
        // TMPDIR: the run's retry-after file, which nobody is left to remove when the namespace
        // dies with its first process (this tollgate and its keeper at once).
        const QString script = QStringLiteral("hostname build-box && TMPDIR='%4' exec '%1' --home '%3' %2")
                                   .arg(QStringLiteral(TOLLGATE_CLI_PATH), args, m_home, m_dir->path());
        return TestSupport::startChild(QStringLiteral("unshare"),
            // --kill-child: the namespace's first process, and with it all of the namespace, dies
            // with unshare, which the test kills at its end.
            { QStringLiteral("--pid"), QStringLiteral("--fork"), QStringLiteral("--kill-child"),
                QStringLiteral("--mount-proc"), QStringLiteral("--uts"), QStringLiteral("sh"),
                QStringLiteral("-c"), script });
    };
    auto holder = elsewhere(QStringLiteral("run api --caller far -- sleep 60"));
    QVERIFY(holder);
    auto statusJson = [&] { return object(cli({ QStringLiteral("status"), QStringLiteral("--json") }).out); };
    auto provider
        = [&] { return statusJson().value(QStringLiteral("providers")).toArray().first().toObject(); };
    QTRY_VERIFY_WITH_TIMEOUT(provider().value(QStringLiteral("slots")).toArray().size() == 1, 20000);
    auto waiter = elsewhere(QStringLiteral("acquire api --caller farwaiter --slot --timeout 60"));
    QVERIFY(waiter);
    QTRY_VERIFY_WITH_TIMEOUT(provider().value(QStringLiteral("queue")).toArray().size() == 1, 20000);

    const QJsonObject p = provider();
    const QJsonObject slot = p.value(QStringLiteral("slots")).toArray().first().toObject();
    const QJsonObject queued = p.value(QStringLiteral("queue")).toArray().first().toObject();
    QCOMPARE(slot.value(QStringLiteral("host_name")).toString(), QStringLiteral("build-box"));
    QCOMPARE(slot.value(QStringLiteral("pid_namespace")).toString(), QStringLiteral("other"));
    QCOMPARE(slot.value(QStringLiteral("host_is_ours")).toBool(), false);
    QCOMPARE(queued.value(QStringLiteral("host_name")).toString(), QStringLiteral("build-box"));
    const Ran words = cli({ QStringLiteral("status") });
    QVERIFY2(words.code == 0, words.err.constData());
    QVERIFY2(words.out.contains("far (pid ") && words.out.contains(" on host build-box, lease "),
        words.out.constData());
    QVERIFY2(words.out.contains("waiting: farwaiter (pid ") && words.out.contains("on host build-box,"),
        words.out.constData());
    QVERIFY2(!words.out.contains("unknown pid namespace"), words.out.constData());
}

void TestRedisReaders::aLostStateIsShownAsTheNextCallSeesIt()
{
    startServer();
    const Ran set = cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
        QStringLiteral("--requests"), QStringLiteral("5"), QStringLiteral("--window"), QStringLiteral("600"),
        QStringLiteral("--parallel"), QStringLiteral("2") });
    QVERIFY2(set.code == 0, set.err.constData());
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("c"), QStringLiteral("--timeout"), QStringLiteral("5") })
                 .code,
        0);
    // The state key lost (an eviction, a DEL): the next call restarts the provider with its window
    // full. status must say so, not "4 requests left".
    QVERIFY(redisCli(*m_redis, { QStringLiteral("DEL"), QStringLiteral("{readers}:state") }).code == 0);
    const QJsonObject p = object(cli({ QStringLiteral("status"), QStringLiteral("--json") }).out)
                              .value(QStringLiteral("providers"))
                              .toArray()
                              .first()
                              .toObject();
    QCOMPARE(p.value(QStringLiteral("state_lost")).toBool(), true);
    const QJsonObject capacity = p.value(QStringLiteral("capacity")).toObject();
    QCOMPARE(capacity.value(QStringLiteral("level")).toString(), QStringLiteral("blocked"));
    QCOMPARE(capacity.value(QStringLiteral("requests_left")).toInt(), 0);
    const Ran words = cli({ QStringLiteral("status") });
    QVERIFY2(words.out.contains("STATE LOST") && words.out.contains("5/5 requests"), words.out.constData());
    // ... which is what the next call finds.
    const Ran next = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("c"), QStringLiteral("--timeout"), QStringLiteral("0") });
    QVERIFY2(next.code == 1, next.err.constData());
    // That call found the loss and marked it: status says when, and what was found.
    const QJsonObject marked = object(cli({ QStringLiteral("status"), QStringLiteral("--json") }).out)
                                   .value(QStringLiteral("data_lost"))
                                   .toObject();
    QVERIFY(marked.value(QStringLiteral("at_ms")).toInteger() > 0);
    QVERIFY2(marked.value(QStringLiteral("reason")).toString().contains(QStringLiteral("missing")),
        qPrintable(marked.value(QStringLiteral("reason")).toString()));
    const Ran said = cli({ QStringLiteral("status") });
    QVERIFY2(said.out.contains("DATA LOST") && said.out.contains("ago: the state of 'api' was missing"),
        said.out.constData());

    // Everything lost (a restart without persistence, FLUSHALL): said as a possibility, with the way back.
    QVERIFY(redisCli(*m_redis, { QStringLiteral("FLUSHALL") }).code == 0);
    const Ran empty = cli({ QStringLiteral("status") });
    QVERIFY2(empty.code == 0, empty.err.constData());
    QVERIFY2(empty.out.contains("Redis lost its data") && empty.out.contains("tollgate limits import"),
        empty.out.constData());
}

QTEST_GUILESS_MAIN(TestRedisReaders)
#include "tst_redisreaders.moc"
