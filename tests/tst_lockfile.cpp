// LockFile inside one process: acquire/release/status/clean semantics, the stale matrix
// (with an injected clock: no sleeps), corrupt files, hostile paths and file modes.
// Cross-process exclusion is in tst_lockprocesses.

#include "lockfile.h"
#include "manualclock.h"
#include "testsupport.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <sys/stat.h>
#include <unistd.h>

using namespace tollgate;
using namespace std::chrono_literals;

class TestLockFile final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void init();
    void acquireWritesExactBytesWithMode0600();
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

void TestLockFile::acquireWritesExactBytesWithMode0600()
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
    const QByteArray expected = "pid=" + QByteArray::number(::getpid()) + "\ntimestamp="
        + QByteArray::number(static_cast<qint64>(m_clock.unixSeconds())) + "\n";
    QCOMPARE(readAll(lockPath()), expected);
    struct stat st {};
    QCOMPARE(::stat(lockPath().c_str(), &st), 0);
    QCOMPARE(st.st_mode & 07777, mode_t(0600));
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
    QCOMPARE(QDir(m_dir->path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden), QStringList {});
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
    for (const std::string& bad : { std::string("../x.lock"), std::string("/tmp/a/../b.lock"), std::string(".."),
             std::string("a/..\0/b", 7), std::string("x\0y", 3), std::string() }) {
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

QTEST_GUILESS_MAIN(TestLockFile)
#include "tst_lockfile.moc"
