// The README's TLS recipe, exercised: Debian's hiredis 0.14 has no TLS, so a Redis that
// requires TLS (as managed services do) is reached through a local stunnel that verifies the
// server's certificate. Here the server is a redis-server that speaks TLS on its TLS port (the
// tunnel connects there: a plain-text client would be refused), the certificates are made
// by the openssl command for this run, and every caller is the real CLI. What must hold:
// every command works through the tunnel; a tunnel that cannot verify the server fails
// closed (exit 3 naming the URL, nothing admitted); `rediss://` is refused by name, never
// tried in plain text.

#include "helpers/redisserver.h"
#include "helpers/testcerts.h"
#include "testsupport.h"

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <memory>

namespace {

using Ran = TestSupport::Ran;

bool accepts(quint16 port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a {};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (fd >= 0)
        ::close(fd);
    return ok;
}

using Tunnel = TestSupport::Child;

} // namespace

class TestRedisTls final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void everyCommandWorksThroughTheTunnel();
    void aTunnelThatCannotVerifyTheServerFailsClosed();
    void redissIsRefusedByName();

private:
    QString path(const QString& name) const { return m_dir.filePath(name); }
    // stunnel in client mode: plain text on `accept`, TLS to the server's TLS port, the chain
    // verified against `caFile` and the certificate checked for 127.0.0.1.
    Tunnel startTunnel(const QString& name, quint16 accept, const QString& caFile)
    {
        const QString conf = path(name + QStringLiteral(".conf"));
        QFile f(conf);
        if (!f.open(QIODevice::WriteOnly))
            return {};
        f.write(QStringLiteral("foreground = yes\npid =\noutput = %1\n[redis]\nclient = yes\naccept = 127.0.0.1:%2\n"
                               "connect = 127.0.0.1:%3\nverifyChain = yes\nCAfile = %4\ncheckIP = 127.0.0.1\n")
                    .arg(path(name + QStringLiteral(".log")))
                    .arg(accept)
                    .arg(m_tlsPort)
                    .arg(caFile)
                    .toUtf8());
        f.close();
        Tunnel p = TestSupport::startChild(m_stunnel, { conf }, QProcess::MergedChannels);
        if (!p)
            return {};
        // Ready when it accepts (poll with a deadline).
        QElapsedTimer t;
        t.start();
        while (!accepts(accept)) {
            if (p->state() != QProcess::Running || t.hasExpired(10000)) {
                qWarning("stunnel did not start: %s", p->readAll().constData());
                return {};
            }
            QTest::qWait(20);
        }
        return p;
    }
    Ran cli(const QString& home, const QStringList& args) const
    {
        QStringList all = args;
        const qsizetype at = std::min<qsizetype>(args.first() == QStringLiteral("limits") ? 2 : 1, all.size());
        all.insert(at, QStringLiteral("--home"));
        all.insert(at + 1, home);
        return TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH), all, 60000);
    }

    QTemporaryDir m_tmp;
    QDir m_dir;
    QString m_stunnel;
    RedisServer m_redis;
    quint16 m_tlsPort = 0;
};

void TestRedisTls::initTestCase()
{
    QVERIFY(m_tmp.isValid());
    m_dir = QDir(m_tmp.path());
    if (RedisServer::binary().isEmpty())
        QFAIL("redis-server is not installed (scripts/bootstrap.sh installs it)");
    m_stunnel = QStandardPaths::findExecutable(QStringLiteral("stunnel4"));
    if (m_stunnel.isEmpty())
        m_stunnel = QStandardPaths::findExecutable(QStringLiteral("stunnel"));
    if (m_stunnel.isEmpty() || QStandardPaths::findExecutable(QStringLiteral("openssl")).isEmpty())
        QFAIL("stunnel4 or openssl is not installed (scripts/bootstrap.sh installs both)");

    // A certificate authority, another one, and a server certificate for 127.0.0.1 signed by the first.
    QVERIFY(TestCerts::authority(m_dir.path(), QStringLiteral("ca")));
    QVERIFY(TestCerts::authority(m_dir.path(), QStringLiteral("otherca")));
    QVERIFY(TestCerts::server(m_dir.path(), QStringLiteral("server"), QStringLiteral("IP:127.0.0.1")));

    // The plain port stays for the test's own checks; callers only ever reach the TLS port.
    m_tlsPort = RedisServer::freePort();
    QString why;
    QVERIFY2(m_redis.start({ QStringLiteral("--tls-port"), QString::number(m_tlsPort), QStringLiteral("--tls-cert-file"),
                               path(QStringLiteral("server.crt")), QStringLiteral("--tls-key-file"),
                               path(QStringLiteral("server.key")), QStringLiteral("--tls-ca-cert-file"),
                               path(QStringLiteral("ca.crt")), QStringLiteral("--tls-auth-clients"), QStringLiteral("no") },
                 &why),
        qPrintable(why));
}

void TestRedisTls::everyCommandWorksThroughTheTunnel()
{
    const quint16 port = RedisServer::freePort();
    auto tunnel = startTunnel(QStringLiteral("good"), port, path(QStringLiteral("ca.crt")));
    QVERIFY(tunnel);
    const QString home = QStringLiteral("redis://127.0.0.1:%1?prefix=tls").arg(port);
    Ran r = cli(home, { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"), QStringLiteral("--requests"),
                          QStringLiteral("2"), QStringLiteral("--window"), QStringLiteral("3600") });
    QVERIFY2(r.code == 0, r.err.constData());
    for (int i = 0; i < 2; ++i) {
        r = cli(home, { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("job"),
                          QStringLiteral("--timeout"), QStringLiteral("0") });
        QVERIFY2(r.code == 0, r.err.constData());
    }
    // The window is full: a third is refused (the quota's answer, not a transport error).
    r = cli(home, { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("job"),
                      QStringLiteral("--timeout"), QStringLiteral("0") });
    QCOMPARE(r.code, 1);
    r = cli(home, { QStringLiteral("status"), QStringLiteral("--json") });
    QVERIFY2(r.code == 0, r.err.constData());
    QVERIFY(r.out.contains("\"api\""));
    r = cli(home, { QStringLiteral("history"), QStringLiteral("--json") });
    QVERIFY2(r.code == 0, r.err.constData());
    QCOMPARE(r.out.count("\"admit\""), 2);
    // The state is on the server behind the tunnel (looked at through its plain port).
    const Ran direct = cli(QString::fromStdString(m_redis.url(QStringLiteral("?prefix=tls"))),
        { QStringLiteral("history"), QStringLiteral("--json") });
    QVERIFY2(direct.code == 0, direct.err.constData());
    QCOMPARE(direct.out.count("\"admit\""), 2);
}

void TestRedisTls::aTunnelThatCannotVerifyTheServerFailsClosed()
{
    const quint16 port = RedisServer::freePort();
    // Trusts another authority: the server's certificate does not verify, the tunnel drops
    // the connection, and Tollgate must not take that for anything but a failure.
    auto tunnel = startTunnel(QStringLiteral("bad"), port, path(QStringLiteral("otherca.crt")));
    QVERIFY(tunnel);
    const QString home = QStringLiteral("redis://127.0.0.1:%1?prefix=tlsbad").arg(port);
    Ran r = cli(home, { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"), QStringLiteral("--requests"),
                          QStringLiteral("5") });
    QCOMPARE(r.code, 3);
    QVERIFY2(r.err.contains(QStringLiteral("redis://127.0.0.1:%1").arg(port).toUtf8()), r.err.constData());
    qInfo("refused as: %s", r.err.trimmed().constData());
    r = cli(home, { QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"), QStringLiteral("job"),
                      QStringLiteral("--timeout"), QStringLiteral("1") });
    QCOMPARE(r.code, 3);
    // Nothing reached the server.
    const Ran direct = cli(QString::fromStdString(m_redis.url(QStringLiteral("?prefix=tlsbad"))),
        { QStringLiteral("history"), QStringLiteral("--json") });
    QVERIFY(!direct.out.contains("\"admit\""));
    QFile log(path(QStringLiteral("bad.log")));
    QVERIFY(log.open(QIODevice::ReadOnly));
    QVERIFY2(log.readAll().contains("verify"), "stunnel's log does not mention the failed verification");
}

void TestRedisTls::redissIsRefusedByName()
{
    const Ran r = cli(QStringLiteral("rediss://127.0.0.1:%1").arg(m_tlsPort), { QStringLiteral("status") });
    QCOMPARE(r.code, 3);
    QVERIFY2(r.err.contains("rediss://"), r.err.constData());
    QVERIFY2(r.err.contains("stunnel") || r.err.contains("tunnel") || r.err.contains("TLS"), r.err.constData());
}

QTEST_GUILESS_MAIN(TestRedisTls)
#include "tst_redistls.moc"
