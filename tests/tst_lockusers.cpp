// Locks shared between users (issue 10): a lock file is readable by everyone who can see its
// directory, another user's lock reads as "held by pid N" (not "Permission denied"), the file's
// owner is reported, and a lock whose holder pid runs as another user than the file's owner (a
// forgery in a shared directory) is suspicious and does not hold the lock for ever.
//
// The second user is real: a forked child (or the CLI started by QProcess) drops to the
// unprivileged "nobody" uid with setgroups/setgid/setuid. That needs root, which CI has.

#include "base/manualclock.h"
#include "lock/lockfile.h"
#include "testsupport.h"

#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <csignal>
#include <ctime>
#include <fcntl.h>
#include <functional>
#include <grp.h>
#include <optional>
#include <poll.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace tollgate;
using namespace std::chrono_literals;

namespace {

uid_t g_uid = 65534;
gid_t g_gid = 65534;

bool becomeOtherUser()
{
    return ::setgroups(0, nullptr) == 0 && ::setgid(g_gid) == 0 && ::setuid(g_uid) == 0
        && ::geteuid() == g_uid;
}

// A forked child running as the other user. It reports with text on a pipe; it may stay alive
// (as a lock holder, by becoming `sleep`) until stop().
class OtherUser
{
public:
    explicit OtherUser(const std::function<std::string()>& work, bool stayAlive = false)
    {
        int fds[2];
        if (::pipe(fds) != 0)
            return;
        m_pid = ::fork();
        if (m_pid == 0) {
            ::close(fds[0]);
            const std::string out = becomeOtherUser() ? work() : std::string("cannot become the other user");
            const std::string line = out + "\n";
            if (::write(fds[1], line.data(), line.size()) < 0)
                ::_exit(2);
            // A holder that stays must be an ordinary process of that user: after exec it is
            // dumpable again (a process that merely dropped privileges is not, and its /proc
            // entry stays root's).
            if (stayAlive)
                ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
            ::_exit(0);
        }
        ::close(fds[1]);
        m_out = fds[0];
    }
    ~OtherUser()
    {
        stop();
        if (m_out >= 0)
            ::close(m_out);
    }
    OtherUser(const OtherUser&) = delete;
    OtherUser& operator=(const OtherUser&) = delete;

    [[nodiscard]] pid_t pid() const { return m_pid; }

    // The child's report line, waiting at most 20 s for it.
    std::string report()
    {
        std::string text;
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        while (text.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
            pollfd p { m_out, POLLIN, 0 };
            if (::poll(&p, 1, 100) <= 0)
                continue;
            char buf[512];
            const ssize_t n = ::read(m_out, buf, sizeof buf);
            if (n <= 0)
                break;
            text.append(buf, static_cast<std::size_t>(n));
        }
        if (const auto nl = text.find('\n'); nl != std::string::npos)
            text.resize(nl);
        return text;
    }

    void stop()
    {
        if (m_pid > 0) {
            ::kill(m_pid, SIGKILL);
            int status = 0;
            ::waitpid(m_pid, &status, 0);
            m_pid = -1;
        }
    }

private:
    pid_t m_pid = -1;
    int m_out = -1;
};

std::string describe(const Result<LockStatus>& s)
{
    if (!s)
        return "error: " + s.error().describe();
    return "exists=" + std::to_string(s->exists) + " pid=" + std::to_string(s->info.pid)
        + " owner=" + std::to_string(s->ownerUid) + " alive=" + std::to_string(s->holderAlive)
        + " stale=" + std::to_string(s->stale) + " suspicion=" + s->suspicion;
}

} // namespace

class TestLockUsers final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void init();
    void otherUserSeesHolderNotPermissionDenied();
    void otherUserCliSaysHeldByPid();
    void forgedLockIsSuspiciousAndBecomesStale();
    void otherUsersGenuineLockIsTrusted();
    void otherUserCannotRemoveAnotherUsersLiveLock();
    void unreadableLockIsHeldAndNeverRemoved();
    void unreadableNonLocksAreStillRefused();

private:
    struct Ran
    {
        int code = -1;
        QByteArray out;
    };
    // The CLI as the other user (stdout and stderr together). 20 s: a hang is a failure.
    static Ran cliAsOther(const QStringList& args)
    {
        QProcess p;
        p.setChildProcessModifier([] {
            if (!becomeOtherUser())
                ::_exit(99);
        });
        p.start(QStringLiteral(TOLLGATE_CLI_PATH), args);
        if (!p.waitForFinished(20000)) {
            p.kill();
            p.waitForFinished(5000);
            return { -1, p.readAllStandardOutput() + p.readAllStandardError() };
        }
        return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
            p.readAllStandardOutput() + p.readAllStandardError() };
    }

    std::string lockPath() const { return (m_dir->path() + QStringLiteral("/shared.lock")).toStdString(); }

    std::unique_ptr<QTemporaryDir> m_dir;
    ManualClock m_clock { std::chrono::system_clock::now() };
    ProcessProbe m_probe;
};

void TestLockUsers::initTestCase()
{
    if (::geteuid() != 0)
        QSKIP("needs root, to run a second process as another user (nobody); CI runs the tests as root");
    if (const passwd* pw = ::getpwnam("nobody")) {
        g_uid = pw->pw_uid;
        g_gid = pw->pw_gid;
    }
    QVERIFY(g_uid != 0);
}

void TestLockUsers::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    // A shared directory like /tmp: everyone may create files, only owners may remove them.
    QCOMPARE(::chmod(m_dir->path().toLocal8Bit().constData(), 01777), 0);
    m_clock.set(std::chrono::system_clock::now());
}

void TestLockUsers::otherUserSeesHolderNotPermissionDenied()
{
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    LockOptions o;
    o.holderPid = ::getpid();
    o.tag = "root's job";
    QVERIFY(lock->tryAcquire(o)->acquired);

    OtherUser other([&] {
        auto s = lock->status(3600);
        LockOptions mine;
        mine.holderPid = ::getpid();
        auto r = lock->tryAcquire(mine);
        if (!r)
            return describe(s) + " | try: error: " + r.error().describe();
        return describe(s) + " | try: acquired=" + std::to_string(r->acquired)
            + " holder=" + std::to_string(r->holder.info.pid);
    });
    const std::string seen = other.report();
    const std::string pid = std::to_string(::getpid());
    QCOMPARE(QString::fromStdString(seen),
        QString::fromStdString(
            "exists=1 pid=" + pid + " owner=0 alive=1 stale=0 suspicion= | try: acquired=0 holder=" + pid));
}

void TestLockUsers::otherUserCliSaysHeldByPid()
{
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    LockOptions o;
    o.holderPid = ::getpid();
    QVERIFY(lock->tryAcquire(o)->acquired);

    for (const char* command : { "try", "status" }) {
        QProcess p;
        p.setChildProcessModifier([] {
            if (!becomeOtherUser())
                ::_exit(99);
        });
        p.start(QStringLiteral(TOLLGATE_CLI_PATH),
            { QStringLiteral("lock"), QString::fromLatin1(command), QString::fromStdString(lockPath()) });
        QVERIFY(p.waitForFinished(60000));
        const QByteArray out = p.readAllStandardOutput() + p.readAllStandardError();
        if (qstrcmp(command, "try") == 0) {
            QVERIFY2(p.exitCode() == 1, out.constData()); // refused, not 3 "Permission denied"
            QVERIFY2(out.contains("held by pid " + QByteArray::number(::getpid())), out.constData());
        } else {
            QVERIFY2(p.exitCode() == 0, out.constData());
            QVERIFY2(out.contains("pid: " + QByteArray::number(::getpid())), out.constData());
        }
    }
}

void TestLockUsers::forgedLockIsSuspiciousAndBecomesStale()
{
    // The other user plants a lock naming one of root's live processes (this test) as holder:
    // without the owner check it would look held by a live process for ever.
    const std::string rootPid = std::to_string(::getpid());
    OtherUser forger([&] {
        auto lock = LockFile::open(lockPath(), m_clock, m_probe);
        LockOptions o;
        o.holderPid = ::getppid();
        auto r = lock->tryAcquire(o);
        return std::string(r && r->acquired ? "planted" : "failed");
    });
    QCOMPARE(QString::fromStdString(forger.report()), QStringLiteral("planted"));
    forger.stop();

    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto s = lock->status(3600);
    QVERIFY(s.ok());
    QCOMPARE(s->info.pid, qint64(::getpid()));
    QCOMPARE(s->ownerUid, qint64(g_uid));
    QVERIFY(s->holderAlive); // the process exists...
    const std::string expected = "holder pid " + rootPid + " runs as uid 0 but the lock file belongs to uid "
        + std::to_string(g_uid);
    QCOMPARE(QString::fromStdString(s->suspicion), QString::fromStdString(expected)); // ...but is no proof
    QVERIFY(!s->stale); // never reclaimed at once: it is fresh

    LockOptions o;
    o.holderPid = ::getpid();
    o.staleSeconds = 3600;
    auto r = lock->tryAcquire(o);
    QVERIFY(r.ok());
    QVERIFY(!r->acquired);

    // Older than the stale timeout it counts as a dead holder's lock, whatever the pid does.
    m_clock.advance(2h);
    s = lock->status(3600);
    QVERIFY(s.ok());
    QVERIFY(s->stale);
    r = lock->tryAcquire(o);
    QVERIFY(r.ok());
    QVERIFY(r->acquired);
    QVERIFY(r->tookOverStale);
    s = lock->status(3600);
    QCOMPARE(s->ownerUid, qint64(0));
    QVERIFY(s->suspicion.empty());
}

void TestLockUsers::otherUsersGenuineLockIsTrusted()
{
    // The other user's own live process holds its own lock: held, not suspicious, never stale.
    OtherUser holder(
        [&] {
            auto lock = LockFile::open(lockPath(), m_clock, m_probe);
            LockOptions o;
            o.holderPid = ::getpid();
            auto r = lock->tryAcquire(o);
            return std::string(r && r->acquired ? "holding" : "failed");
        },
        true);
    QCOMPARE(QString::fromStdString(holder.report()), QStringLiteral("holding"));

    m_clock.advance(2h);
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto s = lock->status(3600);
    QVERIFY(s.ok());
    QCOMPARE(s->info.pid, qint64(holder.pid()));
    QCOMPARE(s->ownerUid, qint64(g_uid));
    QVERIFY(s->holderAlive);
    QVERIFY2(s->suspicion.empty(), s->suspicion.c_str());
    QVERIFY(!s->stale);
    LockOptions o;
    auto r = lock->tryAcquire(o);
    QVERIFY(r.ok());
    QVERIFY(!r->acquired);
    QCOMPARE(r->holder.info.pid, qint64(holder.pid()));

    holder.stop(); // dead now: an ordinary stale lock of a dead holder
    s = lock->status(3600);
    QVERIFY(s->stale);
}

void TestLockUsers::otherUserCannotRemoveAnotherUsersLiveLock()
{
    // Reading is shared, removing is not: in the sticky directory the other user's forced
    // release fails cleanly and the lock stays.
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    LockOptions o;
    o.holderPid = ::getpid();
    QVERIFY(lock->tryAcquire(o)->acquired);
    OtherUser other([&] {
        auto r = lock->release(::getpid(), true);
        return r ? std::string("released") : r.error().describe();
    });
    const std::string said = other.report();
    QVERIFY2(said.find("Operation not permitted") != std::string::npos, said.c_str());
    auto s = lock->status(3600);
    QVERIFY(s.ok() && s->exists);
    QCOMPARE(s->info.pid, qint64(::getpid()));
}

void TestLockUsers::unreadableLockIsHeldAndNeverRemoved()
{
    // A semats lock is 0600: the other user cannot read it. Its existence is the lock, so it
    // is held (exit 1 / "locked: true"), never "Permission denied" (exit 3); and since its
    // holder cannot be judged, it is never taken over or cleaned, even long past --stale with
    // a dead pid inside.
    pid_t dead = ::fork();
    if (dead == 0)
        ::_exit(0);
    QVERIFY(dead > 0);
    ::waitpid(dead, nullptr, 0);
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    LockOptions o;
    o.holderPid = dead;
    QVERIFY(lock->tryAcquire(o)->acquired);
    const QByteArray path = QByteArray::fromStdString(lockPath());
    QCOMPARE(::chmod(path.constData(), 0600), 0);
    const struct timespec old[2] = { { ::time(nullptr) - 7200, 0 }, { ::time(nullptr) - 7200, 0 } };
    QCOMPARE(::utimensat(AT_FDCWD, path.constData(), old, 0), 0);
    const QString p = QString::fromStdString(lockPath());
    const QString stale = QStringLiteral("--stale=60");

    Ran r = cliAsOther({ QStringLiteral("lock"), QStringLiteral("try"), p, stale });
    QVERIFY2(r.code == 1, r.out.constData()); // held, not 3 "Permission denied"
    QVERIFY2(r.out.contains("held by an unknown pid"), r.out.constData());
    QVERIFY2(r.out.contains("uid 0"), r.out.constData()); // the file's owner

    r = cliAsOther({ QStringLiteral("lock"), QStringLiteral("status"), p, stale });
    QVERIFY2(r.code == 0, r.out.constData());
    QVERIFY2(r.out.contains("locked: true"), r.out.constData());
    QVERIFY2(r.out.contains("pid: unknown"), r.out.constData());
    QVERIFY2(r.out.contains("owner: uid 0"), r.out.constData());
    QVERIFY2(r.out.contains("stale: false"), r.out.constData());

    r = cliAsOther({ QStringLiteral("lock"), QStringLiteral("status"), p, stale, QStringLiteral("--json") });
    QVERIFY2(r.code == 0, r.out.constData());
    const QJsonObject j = QJsonDocument::fromJson(r.out).object();
    QVERIFY2(j.value(QStringLiteral("locked")).toBool(), r.out.constData());
    QVERIFY2(!j.value(QStringLiteral("readable")).toBool(true), r.out.constData());
    QVERIFY2(j.value(QStringLiteral("pid")).isNull(), r.out.constData());
    QCOMPARE(j.value(QStringLiteral("owner_uid")).toInt(-1), 0);

    r = cliAsOther({ QStringLiteral("lock"), QStringLiteral("clean"), p, stale });
    QVERIFY2(r.code == 0, r.out.constData());
    QVERIFY2(r.out.contains("kept") && r.out.contains("never removes"), r.out.constData());
    QVERIFY(QFileInfo::exists(p));

    r = cliAsOther({ QStringLiteral("lock"), QStringLiteral("release"), p, QStringLiteral("--force") });
    QVERIFY2(r.code == 1, r.out.constData());
    QVERIFY(QFileInfo::exists(p));

    // The same through the library, as the other user: held, never stale, not taken over.
    OtherUser other([&] {
        auto s = lock->status(60);
        LockOptions mine;
        mine.holderPid = ::getpid();
        mine.staleSeconds = 60;
        auto t = lock->tryAcquire(mine);
        auto c = lock->clean(60);
        if (!s || !t || !c)
            return std::string("error");
        return "exists=" + std::to_string(s->exists) + " pid=" + std::to_string(s->info.pid)
            + " stale=" + std::to_string(s->stale) + " owner=" + std::to_string(s->ownerUid)
            + " acquired=" + std::to_string(t->acquired) + " removed=" + std::to_string(c->removedLock);
    });
    QCOMPARE(QString::fromStdString(other.report()),
        QStringLiteral("exists=1 pid=0 stale=0 owner=0 acquired=0 removed=0"));
    auto mine = lock->status(60);
    QVERIFY(mine.ok());
    QCOMPARE(mine->info.pid, qint64(dead)); // root still reads its own lock, untouched
}

void TestLockUsers::unreadableNonLocksAreStillRefused()
{
    // Only a regular file makes "held": an unreadable FIFO is refused at once (never opened
    // in a way that blocks), and a symbolic link is not followed.
    const QByteArray dir = m_dir->path().toLocal8Bit();
    const QByteArray fifo = dir + "/fifo.lock";
    QCOMPARE(::mkfifo(fifo.constData(), 0600), 0);
    Ran r = cliAsOther({ QStringLiteral("lock"), QStringLiteral("try"), QString::fromLocal8Bit(fifo) });
    QVERIFY2(r.code == 3 && r.out.contains("FIFO"), r.out.constData());

    const QByteArray target = dir + "/target.lock";
    auto lock = LockFile::open(target.toStdString(), m_clock, m_probe);
    LockOptions o;
    o.holderPid = ::getpid();
    QVERIFY(lock->tryAcquire(o)->acquired);
    QCOMPARE(::chmod(target.constData(), 0600), 0);
    const QByteArray link = dir + "/link.lock";
    QCOMPARE(::symlink(target.constData(), link.constData()), 0);
    r = cliAsOther({ QStringLiteral("lock"), QStringLiteral("try"), QString::fromLocal8Bit(link) });
    QVERIFY2(r.code == 3, r.out.constData());
    QVERIFY2(!r.out.contains("held by"), r.out.constData());
}

QTEST_GUILESS_MAIN(TestLockUsers)
#include "tst_lockusers.moc"
