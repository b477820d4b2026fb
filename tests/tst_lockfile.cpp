// LockFile inside one process: acquire/release/status/clean semantics, the stale matrix
// (with an injected clock: no sleeps), corrupt files, hostile paths and file modes.
// Cross-process exclusion is in tst_lockprocesses.

#include "base/manualclock.h"
#include "lock/lockfile.h"
#include "testsupport.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace tollgate;
using namespace std::chrono_literals;

class TestLockFile final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void acquireWritesExactBytesWithMode0644();
    void acquireWithTag();
    void noTempFilesLeftBehind();
    void secondAcquireIsRefusedAndNamesHolder();
    void staleMatrix_data();
    void staleMatrix();
    void reusedPidCountsAsDead();
    void corruptLockIsHeldUntilOld();
    void corruptLockIsRemovedByForceAndClean();
    void hugeLockFileIsNotRead();
    void releaseOnlyByOwnerUnlessForced();
    void releaseOfFreeLock();
    void dotDotAndNulRefused();
    void symlinkLockRefused();
    void directoryAsLockRefused();
    void cleanRemovesOnlyDeadWritersTempFiles();
    void acquireTimesOut();
    void waitReturnsWhenFree();
    void nonRegularLockPathRefusedWithoutBlocking_data();
    void nonRegularLockPathRefusedWithoutBlocking();
    void cleanLeavesNonRegularTempNamesAlone();
    void futureTimestampIsSuspiciousAndAgesByMtime_data();
    void futureTimestampIsSuspiciousAndAgesByMtime();
    void futureTimestampWithLiveHolderStaysHeld();
    void futureTimestampWithinToleranceIsTrusted();
    void futureMtimeFallsBackToChangeTime();
    void releaseIfSameActsOnlyOnTheLockSeen();
    void cleanReportsTheLockJudgedUnderTheFlock();

private:
    std::string lockPath() const { return (m_dir->path() + QStringLiteral("/test.lock")).toStdString(); }
    void writeLock(const std::string& content, mode_t mode = 0600);

    std::unique_ptr<QTemporaryDir> m_dir;
    ManualClock m_clock { std::chrono::system_clock::now() };
    ProcessProbe m_probe;
};

void TestLockFile::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_clock.set(std::chrono::system_clock::now());
}

void TestLockFile::writeLock(const std::string& content, mode_t mode)
{
    QFile f(QString::fromStdString(lockPath()));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(content.data(), static_cast<qint64>(content.size()));
    f.close();
    ::chmod(lockPath().c_str(), mode);
}

static QByteArray readAll(const std::string& path)
{
    QFile f(QString::fromStdString(path));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray("<missing>");
}

void TestLockFile::acquireWritesExactBytesWithMode0644()
{
    const mode_t old = ::umask(0);
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    QVERIFY(lock.ok());
    LockOptions o;
    o.holderPid = ::getpid();
    auto r = lock->tryAcquire(o);
    ::umask(old);
    QVERIFY(r.ok());
    QVERIFY(r->acquired);
    const QByteArray expected = "pid=" + QByteArray::number(::getpid())
        + "\ntimestamp=" + QByteArray::number(static_cast<qint64>(m_clock.unixSeconds())) + "\n";
    QCOMPARE(readAll(lockPath()), expected);
    struct stat st
    {
    };
    QCOMPARE(::stat(lockPath().c_str(), &st), 0);
    // 0644 whatever the umask: the content is not secret, and other users must be able to
    // read who holds the lock (issue 10).
    QCOMPARE(st.st_mode & 07777, mode_t(0644));
    ::umask(077);
    QCOMPARE(lock->release(::getpid(), false)->state, ReleaseState::Released);
    r = lock->tryAcquire(o);
    ::umask(old);
    QVERIFY(r.ok() && r->acquired);
    QCOMPARE(::stat(lockPath().c_str(), &st), 0);
    QCOMPARE(st.st_mode & 07777, mode_t(0644));
    auto s = lock->status(3600);
    QVERIFY(s.ok());
    QCOMPARE(s->ownerUid, qint64(::geteuid()));
    QVERIFY(s->suspicion.empty());
}

void TestLockFile::acquireWithTag()
{
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    LockOptions o;
    o.tag = "nightly\nbuild";
    auto r = lock->tryAcquire(o);
    QVERIFY(r.ok() && r->acquired);
    QVERIFY(readAll(lockPath()).endsWith("\ntag=nightly build\n"));
    auto s = lock->status(3600);
    QVERIFY(s.ok());
    QCOMPARE(s->info.tag, std::string("nightly build"));
    QCOMPARE(s->info.pid, qint64(::getpid()));
}

void TestLockFile::noTempFilesLeftBehind()
{
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    LockOptions o;
    QVERIFY(lock->tryAcquire(o)->acquired);
    QVERIFY(!lock->tryAcquire(o)->acquired);
    QCOMPARE(lock->release(::getpid(), false)->state, ReleaseState::Released);
    QCOMPARE(QDir(m_dir->path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden),
        QStringList {});
}

void TestLockFile::secondAcquireIsRefusedAndNamesHolder()
{
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    LockOptions first;
    first.tag = "first";
    QVERIFY(lock->tryAcquire(first)->acquired);
    LockOptions second;
    second.holderPid = 1;
    auto r = lock->tryAcquire(second);
    QVERIFY(r.ok());
    QVERIFY(!r->acquired);
    QCOMPARE(r->holder.info.pid, qint64(::getpid()));
    QCOMPARE(r->holder.info.tag, std::string("first"));
    QVERIFY(r->holder.holderAlive);
    QVERIFY(!r->holder.stale);
}

void TestLockFile::staleMatrix_data()
{
    QTest::addColumn<bool>("holderAlive");
    QTest::addColumn<qint64>("age");
    QTest::addColumn<qint64>("staleSeconds");
    QTest::addColumn<bool>("takenOver");
    QTest::newRow("dead + old: taken over") << false << qint64(7200) << qint64(3600) << true;
    QTest::newRow("live + old: held") << true << qint64(7200) << qint64(3600) << false;
    QTest::newRow("dead + fresh: held") << false << qint64(10) << qint64(3600) << false;
    QTest::newRow("dead + old, stale disabled: held") << false << qint64(7200) << qint64(0) << false;
    QTest::newRow("dead, age equal to timeout: held") << false << qint64(3600) << qint64(3600) << false;
    QTest::newRow("dead, age one past timeout: taken over") << false << qint64(3601) << qint64(3600) << true;
    QTest::newRow("dead, custom short timeout") << false << qint64(6) << qint64(5) << true;
}

void TestLockFile::staleMatrix()
{
    QFETCH(bool, holderAlive);
    QFETCH(qint64, age);
    QFETCH(qint64, staleSeconds);
    QFETCH(bool, takenOver);

    // The lock is stamped with the real time; the judging clock is moved `age` seconds on.
    const qint64 stamped = std::chrono::duration_cast<std::chrono::seconds>(
        std::chrono::system_clock::now().time_since_epoch())
                               .count();
    const qint64 holder = holderAlive ? qint64(::getpid()) : TestSupport::deadPid();
    const std::string original = LockInfo { holder, stamped, "victim" }.serialize();
    writeLock(original);
    m_clock.set(std::chrono::system_clock::time_point(std::chrono::seconds(stamped + age)));

    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto s = lock->status(staleSeconds);
    QVERIFY(s.ok());
    QCOMPARE(s->holderAlive, holderAlive);
    QCOMPARE(s->ageSeconds, age);
    QCOMPARE(s->stale, takenOver);

    LockOptions o;
    o.holderPid = 4242;
    o.staleSeconds = staleSeconds;
    auto r = lock->tryAcquire(o);
    QVERIFY(r.ok());
    QCOMPARE(r->acquired, takenOver);
    QCOMPARE(r->tookOverStale, takenOver);
    if (takenOver) {
        QVERIFY(readAll(lockPath()).startsWith("pid=4242\n"));
    } else {
        QCOMPARE(readAll(lockPath()), QByteArray::fromStdString(original));
        QCOMPARE(r->holder.info.pid, holder);
    }
}

void TestLockFile::reusedPidCountsAsDead()
{
    // Our own (live) pid in a lock stamped long before this process started: the number
    // must have been reused, so the real holder is gone.
    writeLock(LockInfo { ::getpid(), 1000, {} }.serialize());
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto s = lock->status(3600);
    QVERIFY(s.ok());
    QVERIFY(!s->holderAlive);
    QVERIFY(s->stale);
}

void TestLockFile::corruptLockIsHeldUntilOld()
{
    writeLock("pid=garbage\n");
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto s = lock->status(3600);
    QVERIFY(s.ok());
    QVERIFY(s->exists);
    QVERIFY(s->corrupt);
    QVERIFY(QString::fromStdString(s->corruptReason).contains(QStringLiteral("timestamp")));
    QVERIFY(!s->stale);
    LockOptions o;
    auto r = lock->tryAcquire(o);
    QVERIFY(r.ok());
    QVERIFY(!r->acquired);
    QVERIFY(r->holder.corrupt);

    // Its modification time is all we can judge it by: two hours on, it is stale.
    m_clock.advance(2h);
    r = lock->tryAcquire(o);
    QVERIFY(r.ok());
    QVERIFY(r->acquired);
    QVERIFY(r->tookOverStale);
}

void TestLockFile::corruptLockIsRemovedByForceAndClean()
{
    writeLock(std::string("\0\0\0", 3));
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto rel = lock->release(::getpid(), false);
    QVERIFY(rel.ok());
    QCOMPARE(rel->state, ReleaseState::NotOwner);
    rel = lock->release(::getpid(), true);
    QVERIFY(rel.ok());
    QCOMPARE(rel->state, ReleaseState::Released);
    QVERIFY(rel->before.corrupt);

    writeLock("");
    auto c = lock->clean(3600);
    QVERIFY(c.ok());
    QVERIFY(!c->removedLock); // fresh: a writer may be mid-way
    m_clock.advance(2h);
    c = lock->clean(3600);
    QVERIFY(c.ok());
    QVERIFY(c->removedLock);
    QVERIFY(!QFile::exists(QString::fromStdString(lockPath())));
}

void TestLockFile::hugeLockFileIsNotRead()
{
    {
        QFile f(QString::fromStdString(lockPath()));
        QVERIFY(f.open(QIODevice::WriteOnly));
        QVERIFY(f.resize(512LL * 1024 * 1024)); // sparse: costs no disk
    }
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto s = lock->status(3600);
    QVERIFY(s.ok());
    QVERIFY(s->corrupt);
    QVERIFY2(QString::fromStdString(s->corruptReason).contains(QStringLiteral("larger than")),
        s->corruptReason.c_str());
}

void TestLockFile::releaseOnlyByOwnerUnlessForced()
{
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    LockOptions o;
    o.holderPid = 1; // recorded holder: init, alive
    QVERIFY(lock->tryAcquire(o)->acquired);
    auto r = lock->release(::getpid(), false);
    QVERIFY(r.ok());
    QCOMPARE(r->state, ReleaseState::NotOwner);
    QCOMPARE(r->before.info.pid, qint64(1));
    QVERIFY(QFile::exists(QString::fromStdString(lockPath())));
    r = lock->release(1, false);
    QCOMPARE(r->state, ReleaseState::Released);
    QVERIFY(lock->tryAcquire(o)->acquired);
    r = lock->release(::getpid(), true);
    QCOMPARE(r->state, ReleaseState::Released);
    QVERIFY(!QFile::exists(QString::fromStdString(lockPath())));
}

void TestLockFile::releaseOfFreeLock()
{
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto r = lock->release(::getpid(), false);
    QVERIFY(r.ok());
    QCOMPARE(r->state, ReleaseState::NotLocked);
}

void TestLockFile::dotDotAndNulRefused()
{
    for (const std::string& bad : { std::string("../x.lock"), std::string("/tmp/a/../b.lock"),
             std::string(".."), std::string("a/..\0/b", 7), std::string("x\0y", 3), std::string() }) {
        auto lock = LockFile::open(bad, m_clock, m_probe);
        QVERIFY(!lock.ok());
        QCOMPARE(lock.error().kind, ErrorKind::Usage);
    }
    QVERIFY(LockFile::open("/tmp/a..b.lock", m_clock, m_probe).ok()); // ".." only as a component
}

void TestLockFile::symlinkLockRefused()
{
    const QString target = m_dir->path() + QStringLiteral("/elsewhere");
    QFile t(target);
    QVERIFY(t.open(QIODevice::WriteOnly));
    t.write("pid=1\ntimestamp=1\n");
    t.close();
    QVERIFY(QFile::link(target, QString::fromStdString(lockPath())));
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto s = lock->status(3600);
    QVERIFY(!s.ok());
    QCOMPARE(s.error().kind, ErrorKind::Permission);
    QVERIFY(QString::fromStdString(s.error().describe()).contains(QStringLiteral("symbolic link")));
    LockOptions o;
    QVERIFY(!lock->tryAcquire(o).ok());
    QVERIFY(!lock->release(::getpid(), true).ok());
    QCOMPARE(readAll(target.toStdString()), QByteArray("pid=1\ntimestamp=1\n")); // untouched
}

void TestLockFile::directoryAsLockRefused()
{
    QVERIFY(QDir(m_dir->path()).mkdir(QStringLiteral("test.lock")));
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto s = lock->status(3600);
    QVERIFY(!s.ok());
    QVERIFY(QString::fromStdString(s.error().describe()).contains(QStringLiteral("not a regular file")));
}

void TestLockFile::cleanRemovesOnlyDeadWritersTempFiles()
{
    const QString base = QString::fromStdString(lockPath());
    const QString dead = base + QStringLiteral(".%1.0123456789abcdef.tmp").arg(TestSupport::deadPid());
    const QString live = base + QStringLiteral(".%1.fedcba9876543210.tmp").arg(::getpid());
    const QString other = base + QStringLiteral(".notes.txt");
    for (const QString& p : { dead, live, other }) {
        QFile f(p);
        QVERIFY(f.open(QIODevice::WriteOnly));
    }
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto c = lock->clean(3600);
    QVERIFY(c.ok());
    QCOMPARE(c->removedTemps.size(), std::size_t(1));
    QVERIFY(!QFile::exists(dead));
    QVERIFY(QFile::exists(live));
    QVERIFY(QFile::exists(other));
}

void TestLockFile::acquireTimesOut()
{
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    LockOptions o;
    QVERIFY(lock->tryAcquire(o)->acquired);
    auto r = lock->acquire(o, std::chrono::steady_clock::now() + 50ms);
    QVERIFY(r.ok());
    QVERIFY(!r->acquired);
    QCOMPARE(r->holder.info.pid, qint64(::getpid()));
}

void TestLockFile::waitReturnsWhenFree()
{
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto s = lock->waitUntilFree(3600, std::chrono::steady_clock::now() + 10s);
    QVERIFY(s.ok());
    QVERIFY(!s->exists);
}

// Runs `work` in a forked child and waits for it with a deadline: a call that blocks (an open
// of a FIFO without O_NONBLOCK waits for a writer for ever) fails the test instead of hanging
// it. The child reports through its exit code: 0 = every expectation held.
static bool finishesInTime(const std::function<int()>& work, int& exitCode)
{
    const pid_t child = ::fork();
    if (child == 0)
        ::_exit(work());
    if (child < 0)
        return false;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    int status = 0;
    while (::waitpid(child, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() >= deadline) {
            ::kill(child, SIGKILL);
            ::waitpid(child, &status, 0);
            return false;
        }
        QTest::qWait(5);
    }
    exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
}

void TestLockFile::nonRegularLockPathRefusedWithoutBlocking_data()
{
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("expected"); // in every error message
    QTest::newRow("FIFO") << QStringLiteral("fifo") << QStringLiteral("FIFO");
    QTest::newRow("socket") << QStringLiteral("socket") << QStringLiteral("socket");
    QTest::newRow("directory") << QStringLiteral("dir") << QStringLiteral("directory");
}

void TestLockFile::nonRegularLockPathRefusedWithoutBlocking()
{
    QFETCH(QString, kind);
    QFETCH(QString, expected);
    int sock = -1;
    if (kind == QLatin1String("fifo")) {
        QCOMPARE(::mkfifo(lockPath().c_str(), 0666), 0);
    } else if (kind == QLatin1String("dir")) {
        QCOMPARE(::mkdir(lockPath().c_str(), 0755), 0);
    } else {
        sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
        QVERIFY(sock >= 0);
        sockaddr_un addr {};
        addr.sun_family = AF_UNIX;
        QVERIFY(lockPath().size() < sizeof addr.sun_path);
        std::memcpy(addr.sun_path, lockPath().c_str(), lockPath().size() + 1);
        QCOMPARE(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
        QCOMPARE(::listen(sock, 1), 0);
    }
    const std::string want = expected.toStdString();
    int code = -1;
    // Each step must come back with an error that says what the path is, not block and not
    // say "No such device or address".
    const bool returned = finishesInTime(
        [&]() -> int {
            auto lock = LockFile::open(lockPath(), m_clock, m_probe);
            if (!lock)
                return 10;
            const auto refused = [&](const auto& r) {
                return !r.ok() && r.error().describe().find(want) != std::string::npos
                    && r.error().describe().find("not a regular file") != std::string::npos
                    && r.error().kind != ErrorKind::NotFound;
            };
            if (!refused(lock->status(3600)))
                return 11;
            LockOptions o;
            o.staleSeconds = 1;
            if (!refused(lock->tryAcquire(o)))
                return 12;
            if (!refused(lock->acquire(o, std::chrono::steady_clock::now() + 100ms)))
                return 13;
            if (!refused(lock->release(::getpid(), true)))
                return 14;
            if (!refused(lock->clean(1)))
                return 15;
            if (!refused(lock->waitUntilFree(1, std::chrono::steady_clock::now() + 100ms)))
                return 16;
            return 0;
        },
        code);
    if (sock >= 0)
        ::close(sock);
    QVERIFY2(returned, "a lock operation blocked on a non-regular file at the lock path");
    QCOMPARE(code, 0);
    struct stat st
    {
    };
    QCOMPARE(::lstat(lockPath().c_str(), &st), 0); // never removed
}

void TestLockFile::cleanLeavesNonRegularTempNamesAlone()
{
    // Named like a dead writer's temp file, but not a file we could have written: clean must
    // neither open (and block on) it nor remove it.
    const std::string base = lockPath();
    const std::string fifo = base + "." + std::to_string(TestSupport::deadPid()) + ".0123456789abcdef.tmp";
    const std::string dir = base + "." + std::to_string(TestSupport::deadPid()) + ".fedcba9876543210.tmp";
    const std::string file = base + "." + std::to_string(TestSupport::deadPid()) + ".00112233445566aa.tmp";
    QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
    QCOMPARE(::mkdir(dir.c_str(), 0700), 0);
    QFile f(QString::fromStdString(file));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.close();
    int code = -1;
    const bool returned = finishesInTime(
        [&]() -> int {
            auto lock = LockFile::open(lockPath(), m_clock, m_probe);
            auto c = lock->clean(3600);
            if (!c)
                return 10;
            return c->removedTemps == std::vector<std::string> { file } ? 0 : 11;
        },
        code);
    QVERIFY(returned);
    QCOMPARE(code, 0);
    struct stat st
    {
    };
    QCOMPARE(::lstat(fifo.c_str(), &st), 0);
    QVERIFY(S_ISFIFO(st.st_mode));
    QCOMPARE(::lstat(dir.c_str(), &st), 0);
    QVERIFY(!QFile::exists(QString::fromStdString(file)));
}

void TestLockFile::futureTimestampIsSuspiciousAndAgesByMtime_data()
{
    // Seconds ahead of now (taken when the row runs: rows made here run later, under load
    // more than a second later), or an absolute time.
    QTest::addColumn<qint64>("timestamp");
    QTest::addColumn<bool>("ahead");
    QTest::newRow("the issue's example") << qint64(98204578435) << true;
    QTest::newRow("61 s ahead") << qint64(LockFile::FUTURE_TOLERANCE_SECONDS + 1) << true;
    QTest::newRow("year 9999") << qint64(253402300799) << false;
    QTest::newRow("int64 max") << qint64(INT64_MAX) << false;
}

void TestLockFile::futureTimestampIsSuspiciousAndAgesByMtime()
{
    QFETCH(qint64, timestamp);
    QFETCH(bool, ahead);
    if (ahead)
        timestamp += std::chrono::duration_cast<std::chrono::seconds>(m_clock.now().time_since_epoch()).count();
    const std::string original
        = LockInfo { TestSupport::deadPid(), timestamp, "from the future" }.serialize();
    writeLock(original);
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto s = lock->status(1);
    QVERIFY(s.ok());
    QVERIFY(!s->corrupt);
    QVERIFY2(s->suspicion.find("timestamp in the future") != std::string::npos, s->suspicion.c_str());
    QVERIFY(s->ageSeconds >= 0); // judged by the file's mtime: just written
    QVERIFY(s->ageSeconds <= 5);
    QVERIFY(!s->stale);

    // Two hours on (by the lock's own mtime), with a dead holder: stale, like any other lock.
    m_clock.advance(2h);
    s = lock->status(3600);
    QVERIFY(s.ok());
    // (the "61 s ahead" timestamp is in the past by now, and judged by itself again)
    QVERIFY(s->ageSeconds >= 7200 - 61 && s->ageSeconds <= 7205);
    QVERIFY(!s->holderAlive);
    QVERIFY(s->stale);
    auto c = lock->clean(3600);
    QVERIFY(c.ok());
    QVERIFY(c->removedLock);

    writeLock(original);
    LockOptions o;
    o.staleSeconds = 3600;
    auto r = lock->tryAcquire(o);
    QVERIFY(r.ok());
    QVERIFY(r->acquired);
    QVERIFY(r->tookOverStale);
}

void TestLockFile::futureTimestampWithLiveHolderStaysHeld()
{
    writeLock(LockInfo { ::getpid(), INT64_MAX, {} }.serialize());
    m_clock.advance(2h);
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto s = lock->status(3600);
    QVERIFY(s.ok());
    QVERIFY(!s->suspicion.empty());
    QVERIFY(s->holderAlive); // we started before the file was written
    QVERIFY(!s->stale);
    LockOptions o;
    auto r = lock->tryAcquire(o);
    QVERIFY(r.ok());
    QVERIFY(!r->acquired);
}

void TestLockFile::futureTimestampWithinToleranceIsTrusted()
{
    // A peer whose clock runs a little fast: no suspicion, age 0 rather than negative.
    const qint64 now = m_clock.unixSeconds();
    writeLock(LockInfo { TestSupport::deadPid(), now + 30, {} }.serialize());
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto s = lock->status(3600);
    QVERIFY(s.ok());
    QVERIFY2(s->suspicion.empty(), s->suspicion.c_str());
    QCOMPARE(s->ageSeconds, qint64(0));
    m_clock.advance(std::chrono::seconds(3600 + 31));
    s = lock->status(3600);
    QCOMPARE(s->ageSeconds, qint64(3601));
    QVERIFY(s->stale);
}

void TestLockFile::futureMtimeFallsBackToChangeTime()
{
    // Both the timestamp and the mtime (utimensat) claim the future; only the inode change
    // time, which no user can set, is left to judge the age by. Same for a corrupt file,
    // which is judged by its mtime alone.
    for (const std::string& content :
        { LockInfo { TestSupport::deadPid(), INT64_MAX, {} }.serialize(), std::string("garbage") }) {
        writeLock(content);
        const timespec times[2] = { { 253402300799, 0 }, { 253402300799, 0 } };
        QCOMPARE(::utimensat(AT_FDCWD, lockPath().c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
        m_clock.set(std::chrono::system_clock::now());
        auto lock = LockFile::open(lockPath(), m_clock, m_probe);
        auto s = lock->status(3600);
        QVERIFY(s.ok());
        QVERIFY(s->ageSeconds >= 0 && s->ageSeconds <= 5);
        QVERIFY2(s->suspicion.find("in the future") != std::string::npos, s->suspicion.c_str());
        QVERIFY(!s->stale);
        m_clock.advance(2h);
        auto c = lock->clean(3600);
        QVERIFY(c.ok());
        QVERIFY(c->lock.ageSeconds >= 7200);
        QVERIFY(c->removedLock);
    }
}

// The dashboard's "release this lock": between the look and the confirmation the lock may be
// released and taken again (even with the same pid); only the file seen may be removed.
void TestLockFile::releaseIfSameActsOnlyOnTheLockSeen()
{
    const qint64 dead = TestSupport::deadPid();
    const std::string first = LockInfo { dead, m_clock.unixSeconds() - 10, "" }.serialize();
    writeLock(first);
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    QVERIFY(lock.ok());
    auto seen = lock->status(3600);
    QVERIFY(seen.ok() && seen->exists);
    QVERIFY(seen->identity.valid());
    QCOMPARE(seen->identity.content, first);
    const LockIdentity old = seen->identity;

    // Same bytes, another inode: released and taken again. (The old file is kept open so that
    // its inode number cannot be reused for the new one.)
    QFile keep(QString::fromStdString(lockPath()));
    QVERIFY(keep.open(QIODevice::ReadOnly));
    QVERIFY(QFile::remove(QString::fromStdString(lockPath())));
    writeLock(first);
    auto r = lock->releaseIfSame(old, 3600);
    QVERIFY(r.ok());
    QCOMPARE(r->state, SameReleaseState::Changed);
    QCOMPARE(r->found.identity.content, first);
    QVERIFY(r->found.identity.inode != old.inode);
    QVERIFY(QFile::exists(QString::fromStdString(lockPath())));

    // Same inode, other bytes (rewritten in place).
    auto now = lock->status(3600);
    QVERIFY(now.ok());
    const std::string second = LockInfo { dead, m_clock.unixSeconds(), "" }.serialize();
    {
        QFile f(QString::fromStdString(lockPath()));
        QVERIFY(f.open(QIODevice::ReadWrite | QIODevice::Truncate));
        f.write(second.data(), static_cast<qint64>(second.size()));
    }
    r = lock->releaseIfSame(now->identity, 3600);
    QVERIFY(r.ok());
    QCOMPARE(r->state, SameReleaseState::Changed);
    QCOMPARE(r->found.identity.content, second);
    QVERIFY(QFile::exists(QString::fromStdString(lockPath())));

    // The same lock: the decision is made on the status judged under the flock.
    now = lock->status(3600);
    QVERIFY(now.ok());
    bool asked = false;
    r = lock->releaseIfSame(now->identity, 3600, [&](const LockStatus& s) {
        asked = true;
        return s.holderAlive;
    });
    QVERIFY(r.ok());
    QVERIFY(asked);
    QCOMPARE(r->state, SameReleaseState::Kept);
    QCOMPARE(r->found.info.pid, std::int64_t(dead));
    r = lock->releaseIfSame(now->identity, 3600, [](const LockStatus& s) { return !s.holderAlive; });
    QVERIFY(r.ok());
    QCOMPARE(r->state, SameReleaseState::Released);
    QVERIFY(r->found.identity == now->identity);
    QVERIFY(!QFile::exists(QString::fromStdString(lockPath())));
    r = lock->releaseIfSame(now->identity, 3600);
    QVERIFY(r.ok());
    QCOMPARE(r->state, SameReleaseState::Gone);
}

void TestLockFile::cleanReportsTheLockJudgedUnderTheFlock()
{
    const std::string bytes
        = LockInfo { TestSupport::deadPid(), m_clock.unixSeconds() - 7200, "cron" }.serialize();
    writeLock(bytes);
    auto lock = LockFile::open(lockPath(), m_clock, m_probe);
    auto c = lock->clean(3600);
    QVERIFY(c.ok());
    QVERIFY(c->removedLock);
    QCOMPARE(c->lock.identity.content, bytes); // exactly what was removed
    QCOMPARE(c->lock.info.tag, std::string("cron"));
}

QTEST_GUILESS_MAIN(TestLockFile)
#include "tst_lockfile.moc"
