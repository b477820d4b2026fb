// Desktop notices: over a real D-Bus (a private dbus-daemon this test starts) a fake
// org.freedesktop.Notifications receives the Notify call with the summary and body; without a
// bus, or with a bus but no such service, the tray fallback gets the notice instead; the
// "hidden to the tray" notice is given once, remembered in the settings file. Without the
// dbus-daemon program (Debian package dbus) only the no-bus fallback is tested.

#include "desktopnotifier.h"
#include "traycontroller.h"

#include <QDBusConnection>
#include <QDBusConnectionInterface>
#include <QProcess>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using tollgate::ui::DesktopNotifier;

namespace {

constexpr int TIMEOUT_MS = 20000;

#define REQUIRE_BUS()                                                                                        \
    if (m_address.isEmpty())                                                                                 \
    QSKIP("no dbus-daemon (Debian package dbus): only the fallback without a bus is tested")

// A stand-in for the desktop's notification daemon, exported on the private bus.
class FakeNotifications final : public QObject
{
    Q_OBJECT
    Q_CLASSINFO("D-Bus Interface", "org.freedesktop.Notifications")
public:
    struct Call
    {
        QString appName;
        QString summary;
        QString body;
        QVariantMap hints;
    };
    QList<Call> calls;

public Q_SLOTS:
    uint Notify(const QString& appName, uint replacesId, const QString& appIcon, const QString& summary,
        const QString& body, const QStringList& actions, const QVariantMap& hints, int expireTimeout)
    {
        Q_UNUSED(replacesId)
        Q_UNUSED(appIcon)
        Q_UNUSED(actions)
        Q_UNUSED(expireTimeout)
        calls.append({ appName, summary, body, hints });
        Q_EMIT notified();
        return static_cast<uint>(calls.size());
    }

Q_SIGNALS:
    void notified();
};

} // namespace

class TestDesktopNotifier final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void cleanupTestCase();
    void serviceReceivesTheNotice();
    void noServiceOnTheBusFallsBack();
    void noBusFallsBackAtOnce();
    void serviceWithoutTheObjectFallsBack();
    void hiddenToTrayNoticeIsGivenOnce();
    void trayAlertsGoThroughTheNotifier();

private:
    QDBusConnection connect(const QString& name);

    QTemporaryDir m_dir;
    QProcess m_daemon;
    QString m_address;
};

void TestDesktopNotifier::initTestCase()
{
    // A bus of our own: no service files (nothing can be activated) and nothing from the
    // user's session, so the test sees only the fake service.
    const QString config = m_dir.path() + QStringLiteral("/bus.conf");
    QFile f(config);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(
        QStringLiteral("<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\" "
                       "\"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
                       "<busconfig><type>session</type><listen>unix:dir=%1</listen>"
                       "<auth>EXTERNAL</auth><policy context=\"default\"><allow send_destination=\"*\" "
                       "eavesdrop=\"true\"/><allow eavesdrop=\"true\"/>"
                       "<allow own=\"*\"/></policy></busconfig>\n")
            .arg(m_dir.path())
            .toUtf8());
    f.close();
    const QString daemon = QStandardPaths::findExecutable(QStringLiteral("dbus-daemon"));
    if (daemon.isEmpty())
        return; // m_address stays empty: the tests that need a bus skip
    m_daemon.start(daemon,
        { QStringLiteral("--config-file=") + config, QStringLiteral("--nofork"),
            QStringLiteral("--print-address") });
    QVERIFY2(m_daemon.waitForStarted(TIMEOUT_MS), "dbus-daemon (Debian package dbus) did not start");
    QTRY_VERIFY_WITH_TIMEOUT(m_daemon.canReadLine() || m_daemon.state() != QProcess::Running, TIMEOUT_MS);
    m_address = QString::fromUtf8(m_daemon.readLine()).trimmed();
    QVERIFY2(m_address.startsWith(QStringLiteral("unix:")), qPrintable(m_address));
}

void TestDesktopNotifier::cleanupTestCase()
{
    if (m_daemon.state() == QProcess::NotRunning)
        return;
    m_daemon.terminate();
    if (!m_daemon.waitForFinished(TIMEOUT_MS))
        m_daemon.kill();
}

QDBusConnection TestDesktopNotifier::connect(const QString& name)
{
    QDBusConnection bus = QDBusConnection::connectToBus(m_address, name);
    return bus;
}

void TestDesktopNotifier::serviceReceivesTheNotice()
{
    REQUIRE_BUS();
    QDBusConnection server = connect(QStringLiteral("server"));
    QVERIFY(server.isConnected());
    FakeNotifications fake;
    QVERIFY(server.registerObject(
        QStringLiteral("/org/freedesktop/Notifications"), &fake, QDBusConnection::ExportAllSlots));
    QVERIFY(server.registerService(QStringLiteral("org.freedesktop.Notifications")));

    QDBusConnection client = connect(QStringLiteral("client"));
    int fallbacks = 0;
    DesktopNotifier notifier(
        client, [&fallbacks](const QString&, const QString&, DesktopNotifier::Urgency) { ++fallbacks; });
    QSignalSpy delivered(&notifier, &DesktopNotifier::delivered);
    notifier.notify(QStringLiteral("Tollgate: 429 storm on openai"), QStringLiteral("12 × 429 within 60 s"),
        DesktopNotifier::Urgency::Critical);
    QTRY_COMPARE_WITH_TIMEOUT(delivered.size(), 1, TIMEOUT_MS);
    QCOMPARE(delivered.at(0).at(0).value<DesktopNotifier::Route>(), DesktopNotifier::Route::Service);
    QCOMPARE(fake.calls.size(), 1);
    QCOMPARE(fake.calls.at(0).appName, QStringLiteral("Tollgate"));
    QCOMPARE(fake.calls.at(0).summary, QStringLiteral("Tollgate: 429 storm on openai"));
    QCOMPARE(fake.calls.at(0).body, QStringLiteral("12 × 429 within 60 s"));
    QCOMPARE(fake.calls.at(0).hints.value(QStringLiteral("urgency")).toInt(), 2);
    QCOMPARE(fake.calls.at(0).hints.value(QStringLiteral("desktop-entry")).toString(),
        QStringLiteral("io.github.tollgate.Dashboard"));
    QCOMPARE(fallbacks, 0);

    server.unregisterService(QStringLiteral("org.freedesktop.Notifications"));
    server.unregisterObject(QStringLiteral("/org/freedesktop/Notifications"));
    QDBusConnection::disconnectFromBus(QStringLiteral("server"));
    QDBusConnection::disconnectFromBus(QStringLiteral("client"));
}

void TestDesktopNotifier::noServiceOnTheBusFallsBack()
{
    REQUIRE_BUS();
    QDBusConnection client = connect(QStringLiteral("lonely"));
    QVERIFY(client.isConnected());
    QVERIFY(
        !client.interface()->isServiceRegistered(QStringLiteral("org.freedesktop.Notifications")).value());
    QStringList seen;
    DesktopNotifier notifier(
        client, [&seen](const QString& summary, const QString& body, DesktopNotifier::Urgency) {
            seen << summary << body;
        });
    QSignalSpy delivered(&notifier, &DesktopNotifier::delivered);
    notifier.notify(QStringLiteral("summary"), QStringLiteral("body"));
    QTRY_COMPARE_WITH_TIMEOUT(delivered.size(), 1, TIMEOUT_MS);
    QCOMPARE(delivered.at(0).at(0).value<DesktopNotifier::Route>(), DesktopNotifier::Route::Fallback);
    QCOMPARE(seen, (QStringList { QStringLiteral("summary"), QStringLiteral("body") }));
    QDBusConnection::disconnectFromBus(QStringLiteral("lonely"));
}

void TestDesktopNotifier::noBusFallsBackAtOnce()
{
    QDBusConnection none = QDBusConnection::connectToBus(
        m_dir.path() + QStringLiteral("/no-such-socket"), QStringLiteral("none"));
    QVERIFY(!none.isConnected());
    QStringList seen;
    DesktopNotifier notifier(
        none, [&seen](const QString& summary, const QString&, DesktopNotifier::Urgency urgency) {
            seen << summary;
            QCOMPARE(urgency, DesktopNotifier::Urgency::Critical);
        });
    QSignalSpy delivered(&notifier, &DesktopNotifier::delivered);
    notifier.notify(QStringLiteral("storm"), QStringLiteral("body"), DesktopNotifier::Urgency::Critical);
    QCOMPARE(seen, QStringList { QStringLiteral("storm") }); // synchronously: no bus to wait for
    QCOMPARE(delivered.size(), 1);
    QCOMPARE(delivered.at(0).at(0).value<DesktopNotifier::Route>(), DesktopNotifier::Route::Fallback);
    QDBusConnection::disconnectFromBus(QStringLiteral("none"));
}

void TestDesktopNotifier::serviceWithoutTheObjectFallsBack()
{
    REQUIRE_BUS();
    // A name on the bus that answers Notify with an error (nothing exported at the path): the
    // notice is not lost, it goes to the fallback.
    QDBusConnection server = connect(QStringLiteral("server4"));
    QVERIFY(server.registerService(QStringLiteral("org.freedesktop.Notifications")));
    QDBusConnection client = connect(QStringLiteral("client4"));
    QStringList seen;
    DesktopNotifier notifier(client,
        [&seen](const QString& summary, const QString&, DesktopNotifier::Urgency) { seen << summary; });
    QSignalSpy delivered(&notifier, &DesktopNotifier::delivered);
    notifier.notify(QStringLiteral("storm\n<b>on</b> \x01x"), QStringLiteral("body"));
    QTRY_COMPARE_WITH_TIMEOUT(delivered.size(), 1, TIMEOUT_MS);
    QCOMPARE(delivered.at(0).at(0).value<DesktopNotifier::Route>(), DesktopNotifier::Route::Fallback);
    QCOMPARE(seen, QStringList { QStringLiteral("storm\n<b>on</b> \x01x") });
    server.unregisterService(QStringLiteral("org.freedesktop.Notifications"));
    QDBusConnection::disconnectFromBus(QStringLiteral("server4"));
    QDBusConnection::disconnectFromBus(QStringLiteral("client4"));
}

void TestDesktopNotifier::hiddenToTrayNoticeIsGivenOnce()
{
    REQUIRE_BUS();
    QDBusConnection server = connect(QStringLiteral("server2"));
    FakeNotifications fake;
    QVERIFY(server.registerObject(
        QStringLiteral("/org/freedesktop/Notifications"), &fake, QDBusConnection::ExportAllSlots));
    QVERIFY(server.registerService(QStringLiteral("org.freedesktop.Notifications")));
    QDBusConnection client = connect(QStringLiteral("client2"));
    const QString file = m_dir.path() + QStringLiteral("/dashboard.ini");
    const QString key = QStringLiteral("tray/hiddenNoticeShown");
    {
        DesktopNotifier notifier(client, {});
        QSignalSpy delivered(&notifier, &DesktopNotifier::delivered);
        QSettings settings(file, QSettings::IniFormat);
        QVERIFY(notifier.notifyOnce(
            settings, key, QStringLiteral("Tollgate is still running"), QStringLiteral("b")));
        QVERIFY(!notifier.notifyOnce(
            settings, key, QStringLiteral("Tollgate is still running"), QStringLiteral("b")));
        QTRY_COMPARE_WITH_TIMEOUT(delivered.size(), 1, TIMEOUT_MS);
    }
    {
        // A later run reads the same file: still told.
        DesktopNotifier notifier(client, {});
        QSettings settings(file, QSettings::IniFormat);
        QVERIFY(!notifier.notifyOnce(
            settings, key, QStringLiteral("Tollgate is still running"), QStringLiteral("b")));
    }
    QCOMPARE(fake.calls.size(), 1);
    QCOMPARE(fake.calls.at(0).summary, QStringLiteral("Tollgate is still running"));
    server.unregisterService(QStringLiteral("org.freedesktop.Notifications"));
    QDBusConnection::disconnectFromBus(QStringLiteral("server2"));
    QDBusConnection::disconnectFromBus(QStringLiteral("client2"));
}

void TestDesktopNotifier::trayAlertsGoThroughTheNotifier()
{
    REQUIRE_BUS();
    QDBusConnection server = connect(QStringLiteral("server3"));
    FakeNotifications fake;
    QVERIFY(server.registerObject(
        QStringLiteral("/org/freedesktop/Notifications"), &fake, QDBusConnection::ExportAllSlots));
    QVERIFY(server.registerService(QStringLiteral("org.freedesktop.Notifications")));
    {
        // Offscreen has no tray: a storm alert still reaches the notification service.
        tollgate::ui::TrayController tray(connect(QStringLiteral("client3")), nullptr);
        QVERIFY(!tray.available());
        QSignalSpy delivered(tray.notifier(), &DesktopNotifier::delivered);
        tray.alert(QStringLiteral("Tollgate: 429 storm on demo-api"), QStringLiteral("3 × 429"));
        QTRY_COMPARE_WITH_TIMEOUT(delivered.size(), 1, TIMEOUT_MS);
        QCOMPARE(delivered.at(0).at(0).value<DesktopNotifier::Route>(), DesktopNotifier::Route::Service);
        QCOMPARE(fake.calls.size(), 1);
        QCOMPARE(fake.calls.at(0).hints.value(QStringLiteral("urgency")).toInt(), 2); // critical

        // Without a tray closing the window quits: no "still running" notice, nothing remembered.
        const QString file = m_dir.path() + QStringLiteral("/notray.ini");
        tray.announceHiddenToTray(file);
        QVERIFY(!QSettings(file, QSettings::IniFormat).contains(QStringLiteral("tray/hiddenNoticeShown")));
        QCOMPARE(fake.calls.size(), 1);
    }
    server.unregisterService(QStringLiteral("org.freedesktop.Notifications"));
    QDBusConnection::disconnectFromBus(QStringLiteral("server3"));
    QDBusConnection::disconnectFromBus(QStringLiteral("client3"));
}

QTEST_MAIN(TestDesktopNotifier)
#include "tst_desktopnotifier.moc"
