// The commands that only read a Redis home — status, limits show, limits export, history — as
// real CLI processes against a redis-server the test starts. What must hold: a home that cannot
// be reached or logged into is a failure (exit 3 naming the problem), never an empty home ("nothing
// has run here", an empty export with exit 0: a backup job would silently empty its backup).

#include "helpers/redisserver.h"
#include "testsupport.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <sys/stat.h>

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
        QProcess p;
        QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
        e.remove(QStringLiteral("TOLLGATE_REDIS_PASSWORD"));
        e.remove(QStringLiteral("TOLLGATE_REDIS_PASSWORD_FILE"));
        for (auto it = env.begin(); it != env.end(); ++it) {
            if (it.value().isEmpty())
                e.remove(it.key());
            else
                e.insert(it.key(), it.value());
        }
        p.setProcessEnvironment(e);
        p.start(QStringLiteral(TOLLGATE_CLI_PATH), all);
        if (!p.waitForStarted(10000))
            return { -3, {}, "did not start" };
        if (!p.waitForFinished(limitMs)) {
            p.kill();
            p.waitForFinished(10000);
            return { -2, p.readAllStandardOutput(), p.readAllStandardError() };
        }
        return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
            p.readAllStandardError() };
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
    QTest::newRow("a mistyped password file") << "missing" << "/no-such-password-file";
    QTest::newRow("an empty password file") << "empty" << "is empty";
    QTest::newRow("a password file others can read") << "open" << "chmod 600";
    QTest::newRow("a wrong password") << "wrong" << "refused the password";
    QTest::newRow("no password at all") << "none" << "requires a password";
}

void TestRedisReaders::aHomeThatCannotBeLoggedIntoIsAFailureForReaders()
{
    QFETCH(QString, how);
    QFETCH(QString, says);
    m_redis = std::make_unique<RedisServer>();
    QString why;
    QVERIFY2(m_redis->start({ QStringLiteral("--requirepass"), QStringLiteral("r1ght-pw") }, &why), qPrintable(why));
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
        env[QStringLiteral("TOLLGATE_REDIS_PASSWORD_FILE")] = m_dir->path() + QStringLiteral("/no-such-password-file");
    else if (how == QStringLiteral("empty"))
        env[QStringLiteral("TOLLGATE_REDIS_PASSWORD_FILE")] = writeFile(QStringLiteral("empty"), "\n", 0600);
    else if (how == QStringLiteral("open"))
        env[QStringLiteral("TOLLGATE_REDIS_PASSWORD_FILE")] = writeFile(QStringLiteral("open"), "r1ght-pw\n", 0644);
    else if (how == QStringLiteral("wrong"))
        env[QStringLiteral("TOLLGATE_REDIS_PASSWORD_FILE")] = writeFile(QStringLiteral("wrong"), "wr0ng-pw\n", 0600);

    const QList<QStringList> readers { { QStringLiteral("status") },
        { QStringLiteral("status"), QStringLiteral("--json") },
        { QStringLiteral("limits"), QStringLiteral("show") }, { QStringLiteral("limits"), QStringLiteral("export") },
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
        QVERIFY2(!r.err.contains("Protocol error"), what.constData()); // the server's words for "log in first"
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

QTEST_GUILESS_MAIN(TestRedisReaders)
#include "tst_redisreaders.moc"
