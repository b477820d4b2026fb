#pragma once

// RedisServer: a private redis-server (Debian's) for one test program, on a free loopback port,
// with its files in a temporary directory. It dies with the test whatever happens: the child
// is started with PR_SET_PDEATHSIG=SIGKILL, and the destructor kills it. Nothing is persisted
// (no RDB, no AOF) unless a test asks for it.

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QStringList>
#include <QTemporaryDir>
#include <QThread>
#include <arpa/inet.h>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

class RedisServer
{
public:
    RedisServer() = default;
    ~RedisServer() { stop(); }
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;

    // The server scripts/test.sh started for the whole run (TOLLGATE_TEST_REDIS_URL), if any.
    static std::string sharedUrl()
    {
        const char* url = std::getenv("TOLLGATE_TEST_REDIS_URL");
        return url ? std::string(url) : std::string();
    }
    // A key prefix no other test program (of this or another phase) uses on a shared server.
    static QString uniquePrefix(const QString& stem, int n)
    {
        return stem + QString::number(::getpid()) + QLatin1Char('-') + QString::number(n);
    }

    // A Redis home of its own for one test: a never-used prefix on the server test.sh shares,
    // else on `own` (started on first use, kept for the program's later tests). `skip` says why
    // there can be none here (no redis-server installed); `failure` why one could not start.
    struct TestHome
    {
        std::string url;
        QString skip;
        QString failure;
    };
    static TestHome testHome(std::unique_ptr<RedisServer>& own, const QString& stem, int n)
    {
        TestHome home;
        std::string url = sharedUrl();
        if (url.empty()) {
            if (!own) {
                if (binary().isEmpty()) {
                    home.skip = QStringLiteral("redis-server is not installed (scripts/bootstrap.sh installs it)");
                    return home;
                }
                auto server = std::make_unique<RedisServer>();
                if (!server->start({}, &home.failure))
                    return home;
                own = std::move(server);
            }
            url = own->url();
        }
        home.url = url + "?prefix=" + uniquePrefix(stem, n).toStdString();
        return home;
    }

    static QString binary()
    {
        for (const char* p : { "/usr/bin/redis-server", "/usr/sbin/redis-server" }) {
            if (::access(p, X_OK) == 0)
                return QString::fromLatin1(p);
        }
        return {};
    }

    // Starts on a free port (keeps the port across restart()). `extra`: more redis-server
    // arguments (e.g. {"--requirepass", "pw"}). Returns false with `why` set on failure.
    bool start(const QStringList& extra = {}, QString* why = nullptr)
    {
        m_extra = extra;
        if (!m_dir)
            m_dir = std::make_unique<QTemporaryDir>();
        for (int attempt = 0; attempt < 5; ++attempt) {
            if (m_port == 0 || attempt > 0)
                m_port = freePort();
            if (launch(why))
                return true;
        }
        return false;
    }
    bool restart(QString* why = nullptr)
    {
        stop();
        return launch(why);
    }
    void stop()
    {
        if (!m_process)
            return;
        m_process->kill();
        m_process->waitForFinished(10000);
        m_process.reset();
    }
    void pause() { ::kill(static_cast<pid_t>(m_process->processId()), SIGSTOP); }
    void resume() { ::kill(static_cast<pid_t>(m_process->processId()), SIGCONT); }

    // A port the kernel just handed out (closed again at once: a small window, covered by retries).
    // Public: tests that put a tunnel or a second listener beside the server need one too.
    static quint16 freePort()
    {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a = loopback(0);
        socklen_t len = sizeof a;
        quint16 port = 0;
        if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0
            && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
            port = ntohs(a.sin_port);
        if (fd >= 0)
            ::close(fd);
        return port;
    }
    [[nodiscard]] quint16 port() const { return m_port; }
    [[nodiscard]] std::string url(const QString& tail = {}) const
    {
        return (QStringLiteral("redis://127.0.0.1:%1").arg(m_port) + tail).toStdString();
    }

private:
    static sockaddr_in loopback(quint16 port)
    {
        sockaddr_in a {};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return a;
    }
    // The listener on the port is our child, not another test's server that took the port
    // between freePort() and the start: its listening socket (from /proc/net/tcp) is one of
    // the child's descriptors.
    bool ours() const
    {
        QFile tcp(QStringLiteral("/proc/net/tcp"));
        if (!tcp.open(QIODevice::ReadOnly))
            return false;
        QStringList inodes;
        const QString port = QStringLiteral(":%1").arg(m_port, 4, 16, QLatin1Char('0')).toUpper();
        for (const QByteArray& line : tcp.readAll().split('\n')) {
            const QStringList f = QString::fromLatin1(line).simplified().split(QLatin1Char(' '));
            if (f.size() > 9 && f[1].endsWith(port) && f[3] == QStringLiteral("0A")) // 0A: LISTEN
                inodes.append(QStringLiteral("socket:[%1]").arg(f[9]));
        }
        const QString fdDir = QStringLiteral("/proc/%1/fd").arg(m_process->processId());
        const auto names = QDir(fdDir).entryList(QDir::AllEntries | QDir::System | QDir::NoDotAndDotDot);
        for (const QString& name : names) {
            char target[256] = {};
            const QByteArray link = (fdDir + QLatin1Char('/') + name).toLocal8Bit();
            if (::readlink(link.constData(), target, sizeof target - 1) > 0
                && inodes.contains(QString::fromLatin1(target)))
                return true;
        }
        return false;
    }
    bool accepts() const
    {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a = loopback(m_port);
        const bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        if (fd >= 0)
            ::close(fd);
        return ok;
    }
    bool launch(QString* why)
    {
        m_process = std::make_unique<QProcess>();
        m_process->setProcessChannelMode(QProcess::MergedChannels);
        m_process->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); });
        QStringList args { QStringLiteral("--port"), QString::number(m_port), QStringLiteral("--bind"),
            QStringLiteral("127.0.0.1"), QStringLiteral("--dir"), m_dir->path(), QStringLiteral("--save"),
            QString(), QStringLiteral("--appendonly"), QStringLiteral("no"), QStringLiteral("--daemonize"),
            QStringLiteral("no"), QStringLiteral("--loglevel"), QStringLiteral("warning") };
        m_process->start(binary(), args + m_extra);
        if (!m_process->waitForStarted(10000)) {
            if (why)
                *why = QStringLiteral("redis-server did not start: ") + m_process->errorString();
            m_process.reset();
            return false;
        }
        // Ready when it accepts a connection (poll with a deadline).
        for (int i = 0; i < 1000; ++i) {
            if (m_process->state() != QProcess::Running) {
                if (why)
                    *why = QStringLiteral("redis-server exited: ") + QString::fromLocal8Bit(m_process->readAll());
                m_process.reset();
                return false;
            }
            if (accepts() && ours())
                return true;
            QThread::msleep(10);
        }
        if (why)
            *why = QStringLiteral("redis-server did not accept connections within 10 s");
        stop();
        return false;
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<QProcess> m_process;
    QStringList m_extra;
    quint16 m_port = 0;
};
