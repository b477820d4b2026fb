// SharedMapping: a shared file mapping truncated under the process answers the fault with
// private pages (the process lives and is told), and every other SIGBUS still does what it
// did before (kills, or reaches the handler that was there first). The faults that must kill
// run in a process of their own (helpers/sigbusprobe.cpp).

#include "base/systemclock.h"
#include "store/doorbell.h"
#include "store/filequotastore.h"
#include "system/futex.h"
#include "system/homedir.h"
#include "system/sharedmapping.h"

#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace tollgate;

class TestSharedMapping final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void aTruncatedMappingIsAnsweredAndTold();
    void otherFaultsAreNotSwallowed_data();
    void otherFaultsAreNotSwallowed();
    void aFutexOnATruncatedPageReturns();
    void aTruncatedDoorbellIsReopenedByTheStore();

private:
    struct Probe
    {
        bool crashed = false;
        int code = -1; // the exit code, or the signal when crashed
        QByteArray out;
        QByteArray err;
    };
    static Probe probe(const QString& mode, const QString& file)
    {
        QProcess p;
        // The sanitizers' own SIGBUS handler (ASan's handle_sigbus) would turn the death
        // this test looks for into a report and an abort: without it, SIGBUS is as in a
        // plain process, which is what is checked here.
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (const char* name : { "ASAN_OPTIONS", "UBSAN_OPTIONS" }) {
            const QString n = QString::fromLatin1(name);
            const QString v = env.value(n);
            env.insert(
                n, v + (v.isEmpty() ? QString() : QStringLiteral(":")) + QStringLiteral("handle_sigbus=0"));
        }
        p.setProcessEnvironment(env);
        p.start(QStringLiteral(TOLLGATE_SIGBUSPROBE_PATH), { mode, file });
        if (!p.waitForFinished(60000))
            qFatal("sigbusprobe did not finish");
        return { p.exitStatus() == QProcess::CrashExit, p.exitCode(), p.readAllStandardOutput(),
            p.readAllStandardError() };
    }
};

void TestSharedMapping::aTruncatedMappingIsAnsweredAndTold()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const Probe r = probe(QStringLiteral("rescue"), dir.filePath(QStringLiteral("f")));
    QVERIFY2(!r.crashed,
        qPrintable(QStringLiteral("died by signal %1: %2").arg(r.code).arg(QString::fromLocal8Bit(r.err))));
    QCOMPARE(r.code, 0);
    QCOMPARE(r.out.trimmed(), QByteArray("rescued"));
}

void TestSharedMapping::otherFaultsAreNotSwallowed_data()
{
    QTest::addColumn<QString>("mode");
    QTest::addColumn<bool>("crashed");
    QTest::addColumn<int>("code");
    // A mapping that is not a SharedMapping, truncated: the fault kills, as without us.
    QTest::newRow("fault outside") << QStringLiteral("foreign") << true << int(SIGBUS);
    // The same with a handler installed before ours: that handler gets the fault.
    QTest::newRow("chained to the earlier handler") << QStringLiteral("chain") << false << 42;
    // A SIGBUS sent by kill(2) is no truncation: it kills.
    QTest::newRow("sent") << QStringLiteral("sent") << true << int(SIGBUS);
}

void TestSharedMapping::otherFaultsAreNotSwallowed()
{
    QFETCH(QString, mode);
    QFETCH(bool, crashed);
    QFETCH(int, code);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const Probe r = probe(mode, dir.filePath(QStringLiteral("f")));
    QVERIFY2(r.crashed == crashed && r.code == code,
        qPrintable(QStringLiteral("%1 %2: %3")
                       .arg(r.crashed ? QStringLiteral("died by signal") : QStringLiteral("exited with"))
                       .arg(r.code)
                       .arg(QString::fromLocal8Bit(r.err))));
}

void TestSharedMapping::aFutexOnATruncatedPageReturns()
{
    // futex(2) on a page past the end of its file answers EFAULT rather than faulting: the
    // wait returns (after its short pause), it does not sleep out its timeout nor crash.
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    auto fd = Fd::open(dir.filePath(QStringLiteral("f")).toStdString(), O_RDWR | O_CREAT, 0600);
    QVERIFY(fd);
    QVERIFY(fd->truncate(4096));
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
    QVERIFY(p != MAP_FAILED);
    QVERIFY(fd->truncate(0));
    auto* word = static_cast<std::atomic<std::uint32_t>*>(p);
    QCOMPARE(futex::wait(word, 0, std::chrono::hours(1)), EFAULT);
    futex::wake(word); // nothing to wake, nothing to fault on
    ::munmap(p, 4096);
}

void TestSharedMapping::aTruncatedDoorbellIsReopenedByTheStore()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString home = dir.filePath(QStringLiteral("home"));
    const QString bellPath = home + QStringLiteral("/doorbell");
    SystemClock clock;
    auto store = FileQuotaStore::open(home.toStdString(), clock);
    QVERIFY(store);
    auto noop = [](QuotaTransaction& tx) -> Result<void> {
        tx.ring = true;
        return {};
    };
    QVERIFY((*store)->transact(noop));
    QCOMPARE(QFileInfo(bellPath).size(), qint64(4096));
    for (int round = 0; round < 3; ++round) {
        QVERIFY(::truncate(bellPath.toLocal8Bit().constData(), 0) == 0);
        // The transaction touches the words (the lock queue, the ring): the fault is answered,
        // and the transaction is done all the same (the flock is the lock).
        QVERIFY((*store)->transact(noop));
        QCOMPARE(QFileInfo(bellPath).size(), qint64(0));
        (void)(*store)->changeMark();
        // The next operation opens the doorbell again, which grows it back.
        QVERIFY((*store)->transact(noop));
        QCOMPARE(QFileInfo(bellPath).size(), qint64(4096));
    }
    // Shared again: a ring by another opener moves this store's mark.
    auto homeFd = HomeDir::open(home.toStdString(), HomeDir::Create::Nothing);
    QVERIFY(homeFd);
    auto other = Doorbell::open(*homeFd);
    QVERIFY(other);
    const std::uint32_t before = (*store)->changeMark();
    other->ring();
    QCOMPARE((*store)->changeMark(), before + 1);
    QVERIFY((*store)->takeWarnings().empty());
}

QTEST_GUILESS_MAIN(TestSharedMapping)
#include "tst_sharedmapping.moc"
