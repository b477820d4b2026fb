// Hostile files and environments: each gives a clear error naming the file, never a crash,
// never a silent rewrite, and nothing is lost.

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "history/historyreader.h"
#include "lock/lockfile.h"
#include "store/filequotastore.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <csignal>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace tollgate;

class TestHostile final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void stateFileSymlinkRefused();
    void limitsFileSymlinkRefused();
    void homeOwnedByAnotherUserRefused();
    void worldWritableHomeRefused();
    void hugeLimitsFileNotRead();
    void hugeHistoryReadOnlyAtTheEnd();
    void binaryLimitsFile();
    void writeFailureMidStateKeepsOldState();
    void fullDiskKeepsOldState();
    void readOnlyHomeGivesClearError();
    void hostileCallerNamesAndTags();

private:
    struct Ran
    {
        int code = -1;
        QByteArray out, err;
    };
    Ran cli(QStringList args) const
    {
        args.insert(1, QStringLiteral("--home"));
        args.insert(2, m_home);
        QProcess p;
        p.start(QStringLiteral(TOLLGATE_CLI_PATH), args);
        p.waitForFinished(60000);
        return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
            p.readAllStandardError() };
    }
    void setLimits()
    {
        QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                         QStringLiteral("--requests"), QStringLiteral("5"), QStringLiteral("--window"),
                         QStringLiteral("600") })
                     .code,
            0);
    }
    static QByteArray readFile(const QString& path)
    {
        QFile f(path);
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray("<missing>");
    }
    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
};

void TestHostile::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    m_home = m_dir->path() + QStringLiteral("/home");
}

void TestHostile::stateFileSymlinkRefused()
{
    setLimits();
    const QString target = m_dir->path() + QStringLiteral("/precious");
    {
        QFile f(target);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("do not touch");
    }
    QVERIFY(QFile::remove(m_home + QStringLiteral("/state.bin")));
    QVERIFY(QFile::link(target, m_home + QStringLiteral("/state.bin")));
    auto r = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("x") });
    QCOMPARE(r.code, 3);
    QVERIFY2(r.err.contains("state.bin") && r.err.contains("symbolic link"), r.err.constData());
    QCOMPARE(readFile(target), QByteArray("do not touch"));
}

void TestHostile::limitsFileSymlinkRefused()
{
    setLimits();
    const QString target = m_dir->path() + QStringLiteral("/other.json");
    QVERIFY(QFile::copy(m_home + QStringLiteral("/limits.json"), target));
    QVERIFY(QFile::remove(m_home + QStringLiteral("/limits.json")));
    QVERIFY(QFile::link(target, m_home + QStringLiteral("/limits.json")));
    auto r = cli({ QStringLiteral("status") });
    QCOMPARE(r.code, 3);
    QVERIFY2(r.err.contains("limits.json") && r.err.contains("symbolic link"), r.err.constData());
}

void TestHostile::homeOwnedByAnotherUserRefused()
{
    QVERIFY(QDir().mkpath(m_home));
    if (::geteuid() != 0)
        QSKIP("needs root to give the directory to another user");
    QCOMPARE(::chown(m_home.toLocal8Bit().constData(), 65534, 65534), 0);
    auto r = cli({ QStringLiteral("status") });
    QCOMPARE(r.code, 3);
    QVERIFY2(r.err.contains(m_home.toUtf8()) && r.err.contains("another user"), r.err.constData());
    QVERIFY(QDir(m_home).entryList(QDir::NoDotAndDotDot | QDir::AllEntries).isEmpty()); // nothing created
}

void TestHostile::worldWritableHomeRefused()
{
    QVERIFY(QDir().mkpath(m_home));
    QCOMPARE(::chmod(m_home.toLocal8Bit().constData(), 0777), 0);
    auto r = cli({ QStringLiteral("status") });
    QCOMPARE(r.code, 3);
    QVERIFY2(r.err.contains("writable by others") && r.err.contains("chmod 700"), r.err.constData());
}

void TestHostile::hugeLimitsFileNotRead()
{
    setLimits();
    {
        QFile f(m_home + QStringLiteral("/limits.json"));
        QVERIFY(f.open(QIODevice::ReadWrite));
        QVERIFY(f.resize(2LL * 1024 * 1024 * 1024)); // sparse 2 GiB
    }
    auto r = cli({ QStringLiteral("limits"), QStringLiteral("show") });
    QCOMPARE(r.code, 3);
    QVERIFY2(r.err.contains("limits.json") && r.err.contains("larger than"), r.err.constData());
    QCOMPARE(
        QFileInfo(m_home + QStringLiteral("/limits.json")).size(), 2LL * 1024 * 1024 * 1024); // untouched
}

void TestHostile::hugeHistoryReadOnlyAtTheEnd()
{
    QVERIFY(QDir().mkpath(m_home));
    {
        QFile f(m_home + QStringLiteral("/history.jsonl"));
        QVERIFY(f.open(QIODevice::WriteOnly));
        QVERIFY(f.resize(3LL * 1024 * 1024 * 1024)); // 3 GiB of NULs
        QVERIFY(f.seek(f.size()));
        f.write("\n{\"t\":1,\"type\":\"ok\"}\n");
    }
    HistoryReader reader(m_home.toStdString());
    auto b = reader.poll();
    QVERIFY(b.ok());
    QVERIFY(b->skippedBytes > 2ULL * 1024 * 1024 * 1024);
    QCOMPARE(b->events.size(), std::size_t(1));
}

void TestHostile::binaryLimitsFile()
{
    setLimits();
    QFile f(m_home + QStringLiteral("/limits.json"));
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(QByteArray("\x7f"
                       "ELF\x02\x01\x01\0\0\0",
        10));
    f.close();
    auto r = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("x") });
    QCOMPARE(r.code, 3);
    QVERIFY2(r.err.contains("limits.json") && r.err.contains("invalid"), r.err.constData());
    QCOMPARE(readFile(m_home + QStringLiteral("/limits.json")),
        QByteArray("\x7f"
                   "ELF\x02\x01\x01\0\0\0",
            10));
    QVERIFY(readFile(m_home + QStringLiteral("/limits.json.bak")).contains("\"api\""));
}

void TestHostile::writeFailureMidStateKeepsOldState()
{
    // A full disk is simulated with RLIMIT_FSIZE: the state slot at offset 1 MiB can only be
    // written in part, exactly like an ENOSPC in the middle of the write.
    setLimits();
    QCOMPARE(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
                     QStringLiteral("a") })
                 .code,
        0); // seq 2 -> slot 0 holds 1 admission; the next write goes to slot 1 at 1 MiB
    const QByteArray limitsBefore = readFile(m_home + QStringLiteral("/limits.json"));
    const pid_t child = ::fork();
    if (child == 0) {
        ::signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl
        {
            StateFile::SLOT_BYTES + 40, StateFile::SLOT_BYTES + 40
        };
        ::setrlimit(RLIMIT_FSIZE, &rl);
        SystemClock clock;
        ProcessProbe probe;
        auto store = FileQuotaStore::open(m_home.toStdString(), clock);
        if (!store)
            ::_exit(10);
        QuotaLimiter limiter(**store, clock, probe);
        AdmitRequest req;
        req.provider = "api";
        req.caller = "b";
        // Slots alternate: within two writes one lands in the slot at 1 MiB and fails.
        for (int done = 0; done < 2; ++done) {
            auto r = limiter.acquire(req, clock.now());
            if (!r)
                ::_exit(r.error().sysErrno == EFBIG ? 100 + done : 11);
        }
        ::_exit(12);
    }
    int status = 0;
    QCOMPARE(::waitpid(child, &status, 0), child);
    QVERIFY(WIFEXITED(status));
    QVERIFY2(WEXITSTATUS(status) >= 100,
        qPrintable(QString::number(WEXITSTATUS(status)))); // it failed, and said so
    const int admitted = 1 + WEXITSTATUS(status) - 100;
    auto r = cli({ QStringLiteral("status"), QStringLiteral("--json") });
    QCOMPARE(r.code, 0); // the old state is intact and readable
    QVERIFY2(r.out.contains("\"used_requests\":" + QByteArray::number(admitted)), r.out.constData());
    QCOMPARE(readFile(m_home + QStringLiteral("/limits.json")), limitsBefore);
    QVERIFY(QDir(m_home).entryList({ QStringLiteral("state.bin.corrupt-*") }).isEmpty());
}

void TestHostile::fullDiskKeepsOldState()
{
    // A real ENOSPC: a tiny tmpfs, mounted in a private mount namespace of a child process
    // (needs root; the namespace and the mount vanish with the child).
    if (::geteuid() != 0)
        QSKIP("needs root to mount a small filesystem");
    const std::string mnt = (m_dir->path() + QStringLiteral("/small")).toStdString();
    QVERIFY(QDir().mkpath(QString::fromStdString(mnt)));
    const pid_t child = ::fork();
    if (child == 0) {
        if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0
            || ::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=256k") != 0)
            ::_exit(77); // no mount namespaces here
        SystemClock clock;
        ProcessProbe probe;
        const std::string home = mnt + "/home";
        auto store = FileQuotaStore::open(home, clock);
        if (!store)
            ::_exit(10);
        QuotaLimiter limiter(**store, clock, probe);
        ProviderLimits l;
        l.requests = 100;
        AdmitRequest req;
        req.provider = "api";
        req.caller = "a";
        if (!limiter.setLimits("api", l, "test") || !limiter.acquire(req, clock.now()))
            ::_exit(11);
        // Both state slots hold a page now. Give the page of the slot the next write goes to
        // back to the filesystem, then fill the filesystem: that write needs a page it cannot get.
        const int sfd = ::open((home + "/state.bin").c_str(), O_RDWR);
        std::uint64_t seq[2] = {};
        for (int i = 0; i < 2; ++i)
            (void)!::pread(sfd, &seq[i], 8, i * StateFile::SLOT_BYTES + 8);
        const off_t next = seq[0] > seq[1] ? StateFile::SLOT_BYTES : 0;
        if (::fallocate(sfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, next, 4096) != 0)
            ::_exit(12);
        ::close(sfd);
        const int filler = ::open((mnt + "/filler").c_str(), O_WRONLY | O_CREAT, 0600);
        char page[4096] = {};
        while (::write(filler, page, sizeof page) > 0) { }
        ::close(filler);
        auto r = limiter.acquire(req, clock.now());
        if (r || r.error().sysErrno != ENOSPC)
            ::_exit(13); // the state write must fail, and say why
        // The previous state is intact: it reads back with the one earlier admission.
        ::unlink((mnt + "/filler").c_str());
        auto after = limiter.snapshot();
        if (!after)
            ::_exit(14);
        const auto used = after->state.provider("api")->scope("")->window.usage(after->nowMs).requests;
        ::_exit(used == 1 ? 0 : 15);
    }
    int status = 0;
    QCOMPARE(::waitpid(child, &status, 0), child);
    QVERIFY(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        QSKIP("cannot mount a filesystem in a private namespace here");
    QCOMPARE(WEXITSTATUS(status), 0);
}

void TestHostile::readOnlyHomeGivesClearError()
{
    QVERIFY(QDir().mkpath(m_home));
    const bool root = ::geteuid() == 0;
    if (root) // root ignores modes: drop to nobody in a child, on a home that nobody owns
        QCOMPARE(::chown(m_home.toLocal8Bit().constData(), 65534, 65534), 0);
    QCOMPARE(::chmod(m_home.toLocal8Bit().constData(), 0500), 0);
    QCOMPARE(::chmod(m_dir->path().toLocal8Bit().constData(), 0755), 0);
    int pipefd[2];
    QCOMPARE(::pipe(pipefd), 0);
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(pipefd[0]);
        if (root && (::setgid(65534) != 0 || ::setuid(65534) != 0))
            ::_exit(10);
        SystemClock clock;
        auto store = FileQuotaStore::open(m_home.toStdString(), clock);
        const std::string msg = store ? std::string("opened") : store.error().describe();
        (void)!::write(pipefd[1], msg.data(), msg.size());
        ::_exit(store ? 11 : 0);
    }
    ::close(pipefd[1]);
    QByteArray message;
    char buf[512];
    ssize_t n;
    while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0)
        message.append(buf, n);
    ::close(pipefd[0]);
    int status = 0;
    QCOMPARE(::waitpid(child, &status, 0), child);
    QVERIFY2(WIFEXITED(status) && WEXITSTATUS(status) == 0, message.constData());
    QVERIFY2(message.contains(m_home.toUtf8()) && message.contains("Permission denied"), message.constData());
}

void TestHostile::hostileCallerNamesAndTags()
{
    setLimits();
    const QString evil = QStringLiteral("\x1b[31mred\nadmit fake\x07") + QString(100000, u'x');
    auto r = cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"), evil });
    QCOMPARE(r.code, 0);
    const QByteArray history = readFile(m_home + QStringLiteral("/history.jsonl"));
    const QByteArray lastLine = history.trimmed().split('\n').last();
    QVERIFY(!lastLine.contains('\x1b'));
    QVERIFY(lastLine.contains("\" [31mred admit fake xx"));
    QVERIFY(lastLine.size() < 1000); // 128 characters at most
    auto status = cli({ QStringLiteral("status") });
    QCOMPARE(status.code, 0);
    QVERIFY(!status.out.contains('\x1b'));

    // a megabyte through the library API (argv cannot carry one)
    SystemClock clock;
    ProcessProbe probe;
    auto store = FileQuotaStore::open(m_home.toStdString(), clock);
    QuotaLimiter limiter(**store, clock, probe);
    AdmitRequest req;
    req.provider = "api";
    req.caller = std::string(4 * 1024 * 1024, '\n');
    QVERIFY(limiter.acquire(req, clock.now()).ok());
    auto lock = LockFile::open((m_dir->path() + QStringLiteral("/t.lock")).toStdString(), clock, probe);
    LockOptions o;
    o.tag = std::string(3 * 1024 * 1024, '\x01');
    QVERIFY(lock->tryAcquire(o)->acquired);
    QCOMPARE(QFileInfo(m_dir->path() + QStringLiteral("/t.lock")).size() < 11000, true);
}

QTEST_GUILESS_MAIN(TestHostile)
#include "tst_hostile.moc"
