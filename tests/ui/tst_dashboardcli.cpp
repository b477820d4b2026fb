// `tollgate-dashboard --screenshot FILE` as a user runs it: writes a PNG and exits 0. And
// where there is no display (a server over ssh): one plain paragraph and exit 2, never Qt's
// platform-plugin wall; --help and --version still work; scripts/run.sh says the same.

#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QLibraryInfo>
#include <QProcess>
#include <QProcessEnvironment>
#include <QSettings>
#include <QStandardPaths>
#include <QStringList>
#include <QTemporaryDir>
#include <QTest>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

class TestDashboardCli final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void screenshotWritesPng();
    void screenshotToUnwritablePathFails();
    void screenshotOfLiveHome();
    void noDisplaySaysSoAndExits2_data();
    void noDisplaySaysSoAndExits2();
    void helpAndVersionNeedNoDisplay_data();
    void helpAndVersionNeedNoDisplay();
    void screenshotNeedsNoDisplay_data();
    void screenshotNeedsNoDisplay();
    void explicitPlatformIsLeftToQt();
    void displayOnTheCommandLineIsChecked();
    void liveXDisplayIsUsed();
    void qtFailingOnAnAnsweringDisplayIsPlainToo();
    void runScriptSaysTheSameWithoutDisplay();
    void screenshotSizeAndPalette();
    void theThemeChosenInSettingsIsUsedUnlessPaletteSaysOtherwise();
    void badSizeOrPaletteIsAUsageError();
};

namespace {

using Vars = QList<QPair<QString, QByteArray>>;

// The environment of an ssh session without X forwarding: no display of any kind, then `set`.
// XDG_RUNTIME_DIR is a fresh directory, so no real Wayland compositor can answer.
QProcessEnvironment withoutDisplay(const Vars& set = {})
{
    static QTemporaryDir runtime;
    auto env = QProcessEnvironment::systemEnvironment();
    env.remove(QStringLiteral("DISPLAY"));
    env.remove(QStringLiteral("WAYLAND_DISPLAY"));
    env.remove(QStringLiteral("QT_QPA_PLATFORM"));
    env.insert(QStringLiteral("XDG_RUNTIME_DIR"), runtime.path());
    static QTemporaryDir config;
    env.insert(QStringLiteral("XDG_CONFIG_HOME"), config.path());
    for (const auto& [name, value] : set)
        env.insert(name, QString::fromLocal8Bit(value));
    return env;
}

struct Ran
{
    int code = -1;
    QByteArray out;
    QByteArray err;
};

Ran runWithout(const QString& program, const QStringList& args, const QProcessEnvironment& env)
{
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(program, args);
    Ran r;
    if (!p.waitForFinished(60000))
        return r;
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

} // namespace

static QProcess* startDashboard(const QStringList& args, QProcess& p)
{
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    // Runs without --settings must not touch the user's own dashboard settings.
    static QTemporaryDir config;
    env.insert(QStringLiteral("XDG_CONFIG_HOME"), config.path());
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(TOLLGATE_DASHBOARD_PATH), args);
    return &p;
}

void TestDashboardCli::screenshotWritesPng()
{
    QTemporaryDir dir;
    const QString png = dir.path() + QStringLiteral("/shot.png");
    QProcess p;
    startDashboard({ QStringLiteral("--home"), dir.path() + QStringLiteral("/home"),
                       QStringLiteral("--screenshot"), png },
        p);
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 0);
    QImage img(png);
    QVERIFY(!img.isNull());
    QVERIFY(img.width() >= 600);
}

void TestDashboardCli::screenshotToUnwritablePathFails()
{
    QTemporaryDir dir;
    QProcess p;
    startDashboard(
        { QStringLiteral("--screenshot"), dir.path() + QStringLiteral("/no/such/dir/shot.png") }, p);
    QVERIFY(p.waitForFinished(60000));
    QVERIFY(p.exitCode() != 0);
    QVERIFY(p.readAllStandardError().contains("cannot write the screenshot"));
}

void TestDashboardCli::screenshotOfLiveHome()
{
    QTemporaryDir dir;
    const QString home = dir.path() + QStringLiteral("/home");
    auto cli = [&home](QStringList args) {
        QProcess p;
        p.start(QStringLiteral(TOLLGATE_CLI_PATH), args << QStringLiteral("--home") << home);
        return p.waitForFinished(30000) && p.exitCode() == 0;
    };
    QVERIFY(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
        QStringLiteral("--requests"), QStringLiteral("10"), QStringLiteral("--window"),
        QStringLiteral("60") }));
    QVERIFY(cli({ QStringLiteral("acquire"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("me") }));
    QVERIFY(cli({ QStringLiteral("report-429"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("me") }));
    auto stateBytes = [&home] {
        QFile f(home + QStringLiteral("/state.bin"));
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    };
    const QByteArray before = stateBytes();
    const QStringList filesBefore = QDir(home).entryList(QDir::Files | QDir::Hidden, QDir::Name);
    const QString png = dir.path() + QStringLiteral("/live.png");
    QProcess p;
    startDashboard(
        { QStringLiteral("--home"), home, QStringLiteral("--locks"), dir.path(), QStringLiteral("--settings"),
            dir.path() + QStringLiteral("/dashboard.ini"), QStringLiteral("--screenshot"), png },
        p);
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 0);
    QImage img(png);
    QVERIFY(!img.isNull());
    QVERIFY(img.width() >= 600 && img.height() >= 400);
    // Looking wrote nothing into the home.
    QCOMPARE(stateBytes(), before);
    QCOMPARE(QDir(home).entryList(QDir::Files | QDir::Hidden, QDir::Name), filesBefore);
}

void TestDashboardCli::noDisplaySaysSoAndExits2_data()
{
    QTest::addColumn<Vars>("vars");
    QTest::addColumn<QByteArray>("opening");
    const QByteArray none
        = "tollgate-dashboard: no display found (DISPLAY and WAYLAND_DISPLAY are not set),\n";
    const QByteArray dead = "tollgate-dashboard: no display answers (";
    const QString d = QStringLiteral("DISPLAY");
    const QString w = QStringLiteral("WAYLAND_DISPLAY");
    const QString q = QStringLiteral("QT_QPA_PLATFORM");
    QTest::newRow("unset") << Vars {} << none;
    QTest::newRow("DISPLAY empty") << Vars { { d, "" } } << none;
    QTest::newRow("WAYLAND_DISPLAY empty") << Vars { { w, "" } } << none;
    QTest::newRow("QT_QPA_PLATFORM empty") << Vars { { q, "" } } << none;
    // xcb is Qt's default anyway: naming it changes nothing about there being no X server.
    QTest::newRow("QT_QPA_PLATFORM=xcb") << Vars { { q, "xcb" } } << none;
    QTest::newRow("DISPLAY=:987") << Vars { { d, ":987" } } << dead + "DISPLAY=\":987\"),\n";
    QTest::newRow("DISPLAY=:987 and xcb")
        << Vars { { d, ":987" }, { q, "xcb" } } << dead + "DISPLAY=\":987\"),\n";
    // TCP (as ssh -X sets it, localhost:10.0): a port nothing listens on is refused at once.
    QTest::newRow("DISPLAY=127.0.0.1:987")
        << Vars { { d, "127.0.0.1:987" } } << dead + "DISPLAY=\"127.0.0.1:987\"),\n";
    QTest::newRow("DISPLAY garbage") << Vars { { d, "not a display" } }
                                     << dead + "DISPLAY=\"not a display\"),\n";
    QTest::newRow("DISPLAY only a colon") << Vars { { d, ":" } } << dead + "DISPLAY=\":\"),\n";
    QTest::newRow("DISPLAY huge number")
        << Vars { { d, ":99999999999999999999" } } << dead + "DISPLAY=\":99999999999999999999\"),\n";
    QTest::newRow("DISPLAY path") << Vars { { d, "/nonexistent/x11:0" } }
                                  << dead + "DISPLAY=\"/nonexistent/x11:0\"),\n";
    // Control bytes must not reach the terminal: a title change and a bell, escaped.
    QTest::newRow("DISPLAY control bytes")
        << Vars { { d, "\x1b]0;pwned\x07:0" } } << dead + "DISPLAY=\"\\x1b]0;pwned\\x07:0\"),\n";
    QTest::newRow("DISPLAY huge") << Vars { { d, QByteArray(100000, 'x') + ":0" } }
                                  << dead + "DISPLAY=\"" + QByteArray(60, 'x') + "\"... (100002 bytes)),\n";
    QTest::newRow("WAYLAND_DISPLAY no compositor")
        << Vars { { w, "wayland-987" } } << dead + "WAYLAND_DISPLAY=\"wayland-987\"),\n";
    QTest::newRow("WAYLAND_DISPLAY huge path")
        << Vars { { w, "/" + QByteArray(5000, 'w') } }
        << dead + "WAYLAND_DISPLAY=\"/" + QByteArray(59, 'w') + "\"... (5001 bytes)),\n";
    QTest::newRow("both dead") << Vars { { w, "wayland-987" }, { d, ":987" } }
                               << dead + "WAYLAND_DISPLAY=\"wayland-987\", DISPLAY=\":987\"),\n";
}

void TestDashboardCli::noDisplaySaysSoAndExits2()
{
    QFETCH(Vars, vars);
    QFETCH(QByteArray, opening);
    QTemporaryDir dir;
    const QString home = dir.path() + QStringLiteral("/home");
    const Ran r = runWithout(
        QStringLiteral(TOLLGATE_DASHBOARD_PATH), { QStringLiteral("--home"), home }, withoutDisplay(vars));
    QCOMPARE(r.code, 2);
    QVERIFY(r.out.isEmpty());
    QVERIFY2(r.err.startsWith(opening), r.err.left(300).constData());
    QVERIFY(r.err.contains("so the window cannot open here. Instead:\n"));
    QVERIFY(r.err.contains("tollgate status --watch"));
    QVERIFY(r.err.contains("ssh -X"));
    QVERIFY(r.err.contains("tollgate-dashboard --screenshot FILE"));
    QVERIFY(r.err.contains("QT_QPA_PLATFORM=offscreen"));
    // One short paragraph, nothing of Qt's (its plugin wall names xcb and "plugin"), no abort.
    QVERIFY(r.err.size() < 1000);
    QVERIFY(!r.err.trimmed().contains("\n\n"));
    QVERIFY(!r.err.contains("xcb"));
    QVERIFY(!r.err.contains("plugin"));
    QVERIFY(!r.err.contains("qt."));
    QVERIFY(!r.err.contains('\x1b'));
    QVERIFY(!r.err.contains('\x07'));
    QVERIFY(!QFileInfo::exists(home));
}

void TestDashboardCli::helpAndVersionNeedNoDisplay_data()
{
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<Vars>("vars");
    QTest::addColumn<QByteArray>("expected");
    const Vars none;
    const Vars dead { { QStringLiteral("DISPLAY"), ":987" } };
    QTest::newRow("--help") << QStringList { QStringLiteral("--help") } << none << QByteArray("--screenshot");
    QTest::newRow("-h") << QStringList { QStringLiteral("-h") } << none << QByteArray("--screenshot");
    QTest::newRow("--version") << QStringList { QStringLiteral("--version") } << none
                               << QByteArray("tollgate-dashboard");
    QTest::newRow("--help, DISPLAY=:987")
        << QStringList { QStringLiteral("--help") } << dead << QByteArray("--screenshot");
    QTest::newRow("--version, DISPLAY=:987")
        << QStringList { QStringLiteral("--version") } << dead << QByteArray("tollgate-dashboard");
    QTest::newRow("--help after --home DIR")
        << QStringList { QStringLiteral("--home"), QStringLiteral("/tmp"), QStringLiteral("--help") } << none
        << QByteArray("--screenshot");
}

void TestDashboardCli::helpAndVersionNeedNoDisplay()
{
    QFETCH(QStringList, args);
    QFETCH(Vars, vars);
    QFETCH(QByteArray, expected);
    const Ran r = runWithout(QStringLiteral(TOLLGATE_DASHBOARD_PATH), args, withoutDisplay(vars));
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.contains(expected), r.out.constData());
    QVERIFY(!r.err.contains("no display"));
    QVERIFY(!r.err.contains("plugin"));
}

void TestDashboardCli::screenshotNeedsNoDisplay_data()
{
    QTest::addColumn<Vars>("vars");
    QTest::addColumn<bool>("joined");
    QTest::newRow("unset") << Vars {} << false;
    QTest::newRow("unset, --screenshot=FILE") << Vars {} << true;
    QTest::newRow("DISPLAY=:987") << Vars { { QStringLiteral("DISPLAY"), ":987" } } << false;
    QTest::newRow("QT_QPA_PLATFORM=xcb") << Vars { { QStringLiteral("QT_QPA_PLATFORM"), "xcb" } } << false;
}

// The screenshot is a file, not a window: without a display it is rendered off-screen.
void TestDashboardCli::screenshotNeedsNoDisplay()
{
    QFETCH(Vars, vars);
    QFETCH(bool, joined);
    QTemporaryDir dir;
    const QString png = dir.path() + QStringLiteral("/headless.png");
    QStringList args { QStringLiteral("--home"), dir.path() + QStringLiteral("/home") };
    if (joined)
        args << QStringLiteral("--screenshot=") + png;
    else
        args << QStringLiteral("--screenshot") << png;
    const Ran r = runWithout(QStringLiteral(TOLLGATE_DASHBOARD_PATH), args, withoutDisplay(vars));
    QVERIFY2(r.code == 0, r.err.constData());
    QVERIFY(!r.err.contains("no display"));
    // The offscreen plugin's own notes ("This plugin does not support ...") are not the wall.
    QVERIFY(!r.err.contains("platform plugin"));
    QImage img(png);
    QVERIFY(!img.isNull());
    QVERIFY(img.width() >= 600);
}

// A platform the user chose is Qt's business, errors included: no second-guessing.
void TestDashboardCli::explicitPlatformIsLeftToQt()
{
    QTemporaryDir dir;
    const QString png = dir.path() + QStringLiteral("/chosen.png");
    const QStringList args { QStringLiteral("--home"), dir.path() + QStringLiteral("/home"),
        QStringLiteral("--screenshot"), png };
    const Ran viaEnv = runWithout(QStringLiteral(TOLLGATE_DASHBOARD_PATH), args,
        withoutDisplay({ { QStringLiteral("QT_QPA_PLATFORM"), "offscreen" } }));
    QCOMPARE(viaEnv.code, 0);
    QVERIFY(!QImage(png).isNull());
    QVERIFY(QFile::remove(png));
    const Ran viaArg = runWithout(QStringLiteral(TOLLGATE_DASHBOARD_PATH),
        QStringList { QStringLiteral("-platform"), QStringLiteral("offscreen") } + args, withoutDisplay());
    QCOMPARE(viaArg.code, 0);
    QVERIFY(!QImage(png).isNull());
    // Qt's own refusal of a platform that does not exist stands (not our paragraph).
    const Ran bogus = runWithout(QStringLiteral(TOLLGATE_DASHBOARD_PATH), args,
        withoutDisplay({ { QStringLiteral("QT_QPA_PLATFORM"), "no-such-platform" } }));
    QVERIFY(bogus.code != 0);
    QVERIFY(!bogus.err.contains("no display"));
}

// Qt's own -display NAME wins over DISPLAY, so it is what is checked.
void TestDashboardCli::displayOnTheCommandLineIsChecked()
{
    QTemporaryDir dir;
    const QString home = dir.path() + QStringLiteral("/home");
    const Ran r = runWithout(QStringLiteral(TOLLGATE_DASHBOARD_PATH),
        { QStringLiteral("-display"), QStringLiteral(":987"), QStringLiteral("--home"), home },
        withoutDisplay());
    QCOMPARE(r.code, 2);
    QVERIFY2(
        r.err.startsWith("tollgate-dashboard: no display answers (-display=\":987\"),\n"), r.err.constData());
    QVERIFY(!r.err.contains("plugin"));
    QVERIFY(!QFileInfo::exists(home));
}

// The check must not refuse a display that works: a real X server (Xvfb, if installed), with a
// session bus as on a desktop.
void TestDashboardCli::liveXDisplayIsUsed()
{
    const QString xvfb = QStandardPaths::findExecutable(QStringLiteral("Xvfb"));
    if (xvfb.isEmpty())
        QSKIP("Xvfb is not installed (Debian: xvfb)");
    QProcess server;
    // -displayfd 1: Xvfb picks a free display and writes its number once it accepts clients.
    server.start(xvfb,
        { QStringLiteral("-displayfd"), QStringLiteral("1"), QStringLiteral("-nolisten"),
            QStringLiteral("tcp"), QStringLiteral("-screen"), QStringLiteral("0"),
            QStringLiteral("1600x1000x24") });
    QVERIFY(server.waitForStarted(10000));
    QByteArray number;
    QDeadlineTimer deadline(30000);
    while (!number.contains('\n') && !deadline.hasExpired() && server.state() == QProcess::Running) {
        server.waitForReadyRead(int(deadline.remainingTime()));
        number += server.readAllStandardOutput();
    }
    QVERIFY2(number.contains('\n'), server.readAllStandardError().constData());
    const QByteArray display = ':' + number.trimmed();

    QTemporaryDir dir;
    // A session bus as on a desktop (if dbus-daemon is installed): with X and a bus the
    // dashboard talks D-Bus from Qt's bus thread, which the ThreadSanitizer phase must pass
    // (libdbus, not built with TSan, is suppressed by name in tests/sanitizers/tsan.supp).
    QProcess bus;
    QByteArray busAddress;
    const QString daemon = QStandardPaths::findExecutable(QStringLiteral("dbus-daemon"));
    if (!daemon.isEmpty()) {
        // The distribution's session configuration (what a desktop runs), its socket here.
        bus.start(daemon,
            { QStringLiteral("--session"), QStringLiteral("--address=unix:dir=") + dir.path(),
                QStringLiteral("--nofork"), QStringLiteral("--print-address") });
        QVERIFY(bus.waitForStarted(10000));
        QDeadlineTimer busDeadline(30000);
        while (!busAddress.contains('\n') && !busDeadline.hasExpired() && bus.state() == QProcess::Running) {
            bus.waitForReadyRead(int(busDeadline.remainingTime()));
            busAddress += bus.readAllStandardOutput();
        }
        QVERIFY2(busAddress.startsWith("unix:"), bus.readAllStandardError().constData());
    }
    auto env = withoutDisplay(
        { { QStringLiteral("DISPLAY"), display }, { QStringLiteral("QT_DEBUG_PLUGINS"), "1" } });
    if (!busAddress.isEmpty())
        env.insert(QStringLiteral("DBUS_SESSION_BUS_ADDRESS"), QString::fromUtf8(busAddress.trimmed()));

    const QString png = dir.path() + QStringLiteral("/x.png");
    // Qt's plugin log names the platform it loaded: the screenshot would succeed off-screen too,
    // so only this tells that the display was used rather than wrongly judged dead.
    const Ran r = runWithout(QStringLiteral(TOLLGATE_DASHBOARD_PATH),
        { QStringLiteral("--home"), dir.path() + QStringLiteral("/home"), QStringLiteral("--screenshot"),
            png },
        env);
    server.terminate();
    QVERIFY(server.waitForFinished(10000));
    if (bus.state() != QProcess::NotRunning) {
        bus.terminate();
        QVERIFY(bus.waitForFinished(10000));
    }
    QVERIFY2(r.code == 0, r.err.constData());
    QVERIFY(!r.err.contains("no display"));
    QVERIFY(!r.err.contains("could not open"));
    QVERIFY(r.err.contains("libqxcb.so\" loaded library"));
    QVERIFY(!r.err.contains("libqoffscreen.so\" loaded library"));
    QImage img(png);
    QVERIFY(!img.isNull());
    QVERIFY(img.width() >= 600);
}

// A Wayland socket that accepts connections but is no compositor Qt can use (here: no
// compositor at all, and, on this machine, no Wayland plugin): the probe lets it through, Qt
// fails, and its fatal wall is replaced by the same kind of plain paragraph.
void TestDashboardCli::qtFailingOnAnAnsweringDisplayIsPlainToo()
{
    const QString plugins = QLibraryInfo::path(QLibraryInfo::PluginsPath) + QStringLiteral("/platforms");
    if (!QDir(plugins).entryList({ QStringLiteral("*wayland*") }).isEmpty())
        QSKIP("a Wayland platform plugin is installed: Qt would wait on the fake compositor");
    QTemporaryDir runtime;
    const QByteArray path = QFile::encodeName(runtime.path() + QStringLiteral("/wayland-fake"));
    const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    QVERIFY(listener >= 0);
    sockaddr_un addr {};
    addr.sun_family = AF_UNIX;
    QVERIFY(size_t(path.size()) < sizeof(addr.sun_path));
    std::memcpy(addr.sun_path, path.constData(), size_t(path.size()));
    QCOMPARE(::bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    QCOMPARE(::listen(listener, 8), 0);

    auto env = withoutDisplay({ { QStringLiteral("WAYLAND_DISPLAY"), "wayland-fake" } });
    env.insert(QStringLiteral("XDG_RUNTIME_DIR"), runtime.path());
    env.remove(QStringLiteral("XDG_SESSION_TYPE"));
    QTemporaryDir dir;
    const Ran r = runWithout(QStringLiteral(TOLLGATE_DASHBOARD_PATH),
        { QStringLiteral("--home"), dir.path() + QStringLiteral("/home") }, env);
    ::close(listener);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains(
                 "tollgate-dashboard: Qt could not open the display (WAYLAND_DISPLAY=\"wayland-fake\"),\n"
                 "so the window cannot open here. Instead:\n"),
        r.err.constData());
    QVERIFY(r.err.contains("tollgate status --watch"));
    // Not the wall: Qt's fatal text is gone, and no abort.
    QVERIFY(!r.err.contains("no Qt platform plugin could be initialized"));
    QVERIFY(!r.err.contains("Available platform plugins"));
}

void TestDashboardCli::runScriptSaysTheSameWithoutDisplay()
{
    const QString script = QStringLiteral(TOLLGATE_TEST_DATA "/../../scripts/run.sh");
    QVERIFY(QFileInfo::exists(script));
    auto env = withoutDisplay();
    // A build directory with no dashboard: the script must not need one to say this.
    QTemporaryDir dir;
    env.insert(QStringLiteral("TOLLGATE_BUILD_DIR"), dir.path());
    const Ran fromScript = runWithout(QStringLiteral("bash"), { script }, env);
    const Ran fromBinary = runWithout(QStringLiteral(TOLLGATE_DASHBOARD_PATH), {}, withoutDisplay());
    QVERIFY(fromBinary.err.startsWith("tollgate-dashboard: no display found"));
    QCOMPARE(fromScript.code, 2);
    QCOMPARE(fromBinary.code, 2);
    QCOMPARE(fromScript.err, fromBinary.err);
    QVERIFY(fromScript.out.isEmpty());
}

void TestDashboardCli::screenshotSizeAndPalette()
{
    QTemporaryDir dir;
    auto shoot = [&dir](const QString& size, const QString& palette) {
        const QString png = dir.path() + QStringLiteral("/%1-%2.png").arg(size, palette);
        QProcess p;
        startDashboard(
            { QStringLiteral("--home"), dir.path() + QStringLiteral("/home"), QStringLiteral("--settings"),
                dir.path() + QStringLiteral("/dashboard.ini"), QStringLiteral("--size"), size,
                QStringLiteral("--palette"), palette, QStringLiteral("--screenshot"), png },
            p);
        if (!p.waitForFinished(60000) || p.exitCode() != 0)
            return QImage();
        return QImage(png);
    };
    auto meanGray = [](const QImage& img) {
        qint64 sum = 0;
        qint64 n = 0;
        for (int y = 0; y < img.height(); y += 7) {
            for (int x = 0; x < img.width(); x += 7) {
                sum += qGray(img.pixel(x, y));
                ++n;
            }
        }
        return n > 0 ? sum / n : 0;
    };
    // The size asked for, larger than the offscreen screen too.
    const QImage small = shoot(QStringLiteral("1280x720"), QStringLiteral("light"));
    QCOMPARE(small.size(), QSize(1280, 720));
    const QImage big = shoot(QStringLiteral("1920x1080"), QStringLiteral("light"));
    QCOMPARE(big.size(), QSize(1920, 1080));
    QVERIFY(meanGray(small) > 160);
    // Dark: mostly dark, with light text on it.
    const QImage dark = shoot(QStringLiteral("1280x720"), QStringLiteral("dark"));
    QCOMPARE(dark.size(), QSize(1280, 720));
    QVERIFY2(meanGray(dark) < 90, qPrintable(QString::number(meanGray(dark))));
    bool light = false;
    for (int y = 0; y < dark.height() && !light; y += 2) {
        for (int x = 0; x < dark.width() && !light; x += 2)
            light = qGray(dark.pixel(x, y)) > 200;
    }
    QVERIFY(light);
}

void TestDashboardCli::theThemeChosenInSettingsIsUsedUnlessPaletteSaysOtherwise()
{
    QTemporaryDir dir;
    const QString ini = dir.path() + QStringLiteral("/dashboard.ini");
    {
        QFile f(ini);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("[window]\ntheme=dark\n");
    }
    auto shootGray = [&dir, &ini](const QStringList& extra) {
        const QString png = dir.path() + QStringLiteral("/shot.png");
        QFile::remove(png);
        QProcess p;
        startDashboard(QStringList { QStringLiteral("--home"), dir.path() + QStringLiteral("/home"),
                           QStringLiteral("--settings"), ini, QStringLiteral("--size"),
                           QStringLiteral("800x600"), QStringLiteral("--screenshot"), png }
                + extra,
            p);
        if (!p.waitForFinished(60000) || p.exitCode() != 0)
            return -1;
        const QImage img(png);
        qint64 sum = 0;
        qint64 n = 0;
        for (int y = 0; y < img.height(); y += 7) {
            for (int x = 0; x < img.width(); x += 7) {
                sum += qGray(img.pixel(x, y));
                ++n;
            }
        }
        return n > 0 ? int(sum / n) : -1;
    };
    const int chosen = shootGray({});
    QVERIFY2(chosen >= 0 && chosen < 90, qPrintable(QString::number(chosen)));
    // --palette is for this run only: the window is light, and Settings still say dark.
    const int light = shootGray({ QStringLiteral("--palette"), QStringLiteral("light") });
    QVERIFY2(light > 160, qPrintable(QString::number(light)));
    QSettings saved(ini, QSettings::IniFormat);
    QCOMPARE(saved.value(QStringLiteral("window/theme")).toString(), QStringLiteral("dark"));
}

void TestDashboardCli::badSizeOrPaletteIsAUsageError()
{
    QTemporaryDir dir;
    const QList<QStringList> bad { { QStringLiteral("--size"), QStringLiteral("big") },
        { QStringLiteral("--size"), QStringLiteral("99999x99999") }, // a 40 GB picture
        { QStringLiteral("--size"), QStringLiteral("10x10") },
        { QStringLiteral("--size"), QStringLiteral("1280x720x3") },
        { QStringLiteral("--palette"), QStringLiteral("purple") },
        // The last --home wins: an empty one (an unset variable) is refused, as by the CLI,
        // not taken for the default home.
        { QStringLiteral("--home"), QString() } };
    for (const QStringList& args : bad) {
        QProcess p;
        startDashboard(QStringList { QStringLiteral("--home"), dir.path() + QStringLiteral("/home"),
                           QStringLiteral("--screenshot"), dir.path() + QStringLiteral("/x.png") }
                + args,
            p);
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 2);
        QVERIFY(!QFile::exists(dir.path() + QStringLiteral("/x.png")));
    }
}

QTEST_GUILESS_MAIN(TestDashboardCli)
#include "tst_dashboardcli.moc"
