// The ThreadSanitizer suppressions silence libraries that are not built with TSan (Qt, glib,
// libdbus) by module name, never Tollgate's code: a deliberate race between two of our own
// functions, in a process that has libdbus busy on Qt's bus thread, still fails the run.
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
};

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
    // The options of scripts/test.sh's phase 3, with the committed suppressions file.
    env.insert(QStringLiteral("TSAN_OPTIONS"),
        QStringLiteral("halt_on_error=1:second_deadlock_stack=1:die_after_fork=0:suppressions=")
            + QStringLiteral(TOLLGATE_TEST_DATA "/../sanitizers/tsan.supp"));
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

QTEST_APPLESS_MAIN(TestTsanSuppressions)
#include "tst_tsansuppressions.moc"
