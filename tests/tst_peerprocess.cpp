// PeerProcess: the proxy names a client that does not name itself after the process at the
// other end of its connection. Real processes, real sockets: a shell connects to a listener
// of this test (bash's /dev/tcp) and execs into `sleep`, keeping the connection; the test
// accepts it and asks who is there. The kernel's exact lookup (sock_diag) and the /proc/net
// socket tables must name the same socket, over IPv4 and IPv6.

#include "proxy/peerprocess.h"

#include <QFile>
#include <QProcess>
#include <QTest>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace tollgate::proxy;

class TestPeerProcess final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void aLoopbackClientIsFoundBothWays_data();
    void aLoopbackClientIsFoundBothWays();
    void aUnixClientIsNamedByItsCredentials();
};

namespace {

// A listener on `family`'s loopback address, port chosen by the kernel; -1 when the family
// has no loopback here (a machine without IPv6).
int listenLoopback(int family, int& port)
{
    const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    sockaddr_storage at {};
    socklen_t len = 0;
    if (family == AF_INET) {
        auto* v4 = reinterpret_cast<sockaddr_in*>(&at);
        v4->sin_family = AF_INET;
        v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *v4;
    } else {
        auto* v6 = reinterpret_cast<sockaddr_in6*>(&at);
        v6->sin6_family = AF_INET6;
        v6->sin6_addr = in6addr_loopback;
        len = sizeof *v6;
    }
    if (::bind(fd, reinterpret_cast<sockaddr*>(&at), len) != 0 || ::listen(fd, 4) != 0
        || ::getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len) != 0) {
        ::close(fd);
        return -1;
    }
    port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&at)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&at)->sin6_port);
    return fd;
}

// The next connection within 10 s, else -1.
int acceptWithin(int listener)
{
    pollfd p { listener, POLLIN, 0 };
    if (::poll(&p, 1, 10000) != 1)
        return -1;
    return ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
}

QString commOf(qint64 pid)
{
    QFile f(QStringLiteral("/proc/%1/comm").arg(pid));
    return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()).trimmed() : QString();
}

} // namespace

void TestPeerProcess::aLoopbackClientIsFoundBothWays_data()
{
    QTest::addColumn<int>("family");
    QTest::addColumn<QString>("host");
    QTest::newRow("IPv4") << int(AF_INET) << QStringLiteral("127.0.0.1");
    QTest::newRow("IPv6") << int(AF_INET6) << QStringLiteral("::1");
}

void TestPeerProcess::aLoopbackClientIsFoundBothWays()
{
    QFETCH(int, family);
    QFETCH(QString, host);
    int port = 0;
    const int listener = listenLoopback(family, port);
    if (listener < 0)
        QSKIP("no loopback address of this family on this machine");
    QProcess client;
    client.start(QStringLiteral("bash"),
        { QStringLiteral("-c"),
            // Fifty descriptors before the socket: the scan of /proc/PID/fd must get past them
            // (a bound of 32 once cut it short).
            QStringLiteral("for i in $(seq 10 59); do eval \"exec $i</dev/null\"; done; "
                           "exec 60<>/dev/tcp/%1/%2 && exec sleep 60")
                .arg(host)
                .arg(port) });
    QVERIFY2(client.waitForStarted(), "cannot start bash");
    const int fd = acceptWithin(listener);
    ::close(listener);
    QVERIFY2(fd >= 0, "the shell did not connect");
    // The connection is made before the exec; the name is looked at once the shell is `sleep`.
    QTRY_COMPARE_WITH_TIMEOUT(commOf(client.processId()), QStringLiteral("sleep"), 10000);

    const auto kernel = PeerProcess::clientSocket(fd, PeerProcess::Lookup::SockDiag);
    const auto table = PeerProcess::clientSocket(fd, PeerProcess::Lookup::ProcTable);
    QVERIFY2(table, "the /proc/net table does not list the client's socket");
    QCOMPARE(table->uid, static_cast<unsigned>(::getuid()));
    // Linux has answered sock_diag for TCP since 3.3 (inet_diag, loaded on demand); a kernel
    // without it still works (the proxy falls back to the tables) but is not what CI runs.
    QVERIFY2(kernel, "sock_diag did not find the client's socket");
    QCOMPARE(kernel->inode, table->inode);
    QCOMPARE(kernel->uid, table->uid);
    QCOMPARE(PeerProcess::holderOfSocket(kernel->inode), client.processId());
    QCOMPARE(QString::fromStdString(PeerProcess::ofLoopbackTcp(fd)),
        QStringLiteral("sleep[%1]").arg(client.processId()));

    ::close(fd);
    client.kill();
    QVERIFY(client.waitForFinished());
}

void TestPeerProcess::aUnixClientIsNamedByItsCredentials()
{
    int pair[2];
    QCOMPARE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    // Both ends are this process: its own name, by credentials, no lookup.
    QCOMPARE(QString::fromStdString(PeerProcess::ofUnixSocket(pair[0])),
        QStringLiteral("%1[%2]").arg(commOf(::getpid())).arg(::getpid()));
    // A TCP lookup on a unix socket finds nothing (not loopback TCP), rather than guessing.
    QVERIFY(!PeerProcess::clientSocket(pair[0], PeerProcess::Lookup::SockDiag));
    QVERIFY(!PeerProcess::clientSocket(pair[0], PeerProcess::Lookup::ProcTable));
    ::close(pair[0]);
    ::close(pair[1]);
}

QTEST_GUILESS_MAIN(TestPeerProcess)
#include "tst_peerprocess.moc"
