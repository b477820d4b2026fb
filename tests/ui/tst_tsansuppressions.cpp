// The ThreadSanitizer phase's options and suppressions hide what happens inside libraries not
// built with TSan (accesses by interceptors they call; libdbus by module name), never Tollgate's
// code: a deliberate race between two of our own functions still fails the run, whether it
// runs on plain threads in a process that has libdbus busy on Qt's bus thread, or inside slots
// that Qt's event loops call (Qt's frames in both stacks).
// Meaningful only in a TSan build (scripts/test.sh phase 3); elsewhere it skips.

#include <QDeadlineTimer>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

class TestTsanSuppressions final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void raceInOurCodeIsStillReported();
    void raceInSlotsCalledByQtIsStillReported();

private:
    static QString phaseOptions();
};

// The options of scripts/test.sh's phase 3, with the committed suppressions file.
QString TestTsanSuppressions::phaseOptions()
{
    return QStringLiteral("halt_on_error=1:second_deadlock_stack=1:die_after_fork=0:"
                          "ignore_noninstrumented_modules=1:suppressions=")
        + QStringLiteral(TOLLGATE_TEST_DATA "/../sanitizers/tsan.supp");
}

void TestTsanSuppressions::raceInOurCodeIsStillReported()
{
#ifndef TOLLGATE_TSAN
    QSKIP("not a ThreadSanitizer build (-DTOLLGATE_SANITIZE=thread)");
#else
    QTemporaryDir dir;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    QProcess bus;
    const QString daemon = QStandardPaths::findExecutable(QStringLiteral("dbus-daemon"));
    if (!daemon.isEmpty()) {
        bus.start(daemon,
            { QStringLiteral("--session"), QStringLiteral("--address=unix:dir=") + dir.path(),
                QStringLiteral("--nofork"), QStringLiteral("--print-address") });
        QVERIFY(bus.waitForStarted(10000));
        QByteArray address;
        QDeadlineTimer deadline(30000);
        while (!address.contains('\n') && !deadline.hasExpired() && bus.state() == QProcess::Running) {
            bus.waitForReadyRead(int(deadline.remainingTime()));
            address += bus.readAllStandardOutput();
        }
        QVERIFY2(address.startsWith("unix:"), bus.readAllStandardError().constData());
        env.insert(QStringLiteral("DBUS_SESSION_BUS_ADDRESS"), QString::fromUtf8(address.trimmed()));
    }
    env.insert(QStringLiteral("TSAN_OPTIONS"), phaseOptions());
    QProcess racer;
    racer.setProcessEnvironment(env);
    racer.start(QStringLiteral(TOLLGATE_TSANRACE_PATH), {});
    QVERIFY(racer.waitForFinished(120000));
    const QByteArray err = racer.readAllStandardError();
    if (bus.state() != QProcess::NotRunning) {
        bus.terminate();
        QVERIFY(bus.waitForFinished(10000));
    }
    QCOMPARE(racer.exitCode(), 66); // TSan's exit code: the race was reported, not suppressed
    QVERIFY2(err.contains("WARNING: ThreadSanitizer: data race"), err.constData());
    QVERIFY2(err.contains("tollgateRacyIncrement"), err.constData());
    QVERIFY2(
        err.contains("SUMMARY: ThreadSanitizer: data race") && err.contains("tsanrace.cpp"), err.constData());
#endif
}

void TestTsanSuppressions::raceInSlotsCalledByQtIsStillReported()
{
#ifndef TOLLGATE_TSAN
    QSKIP("not a ThreadSanitizer build (-DTOLLGATE_SANITIZE=thread)");
#else
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("TSAN_OPTIONS"), phaseOptions());
    QProcess racer;
    racer.setProcessEnvironment(env);
    racer.start(QStringLiteral(TOLLGATE_TSANRACE_PATH), { QStringLiteral("--in-slots") });
    QVERIFY(racer.waitForFinished(120000));
    const QByteArray err = racer.readAllStandardError();
    QCOMPARE(racer.exitCode(), 66); // reported, not suppressed
    QVERIFY2(err.contains("WARNING: ThreadSanitizer: data race"), err.constData());
    QVERIFY2(err.contains("tollgateRacyIncrement"), err.constData());
    // The stacks run through Qt: once, a suppression by Qt's module name hid exactly this.
    QVERIFY2(err.contains("libQt6Core.so"), err.constData());
#endif
}

QTEST_APPLESS_MAIN(TestTsanSuppressions)
#include "tst_tsansuppressions.moc"
