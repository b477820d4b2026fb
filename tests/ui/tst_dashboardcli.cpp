// `tollgate-dashboard --screenshot FILE` as a user runs it: writes a PNG and exits 0.

#include <QDir>
#include <QFile>
#include <QImage>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>
#include <QTest>

class TestDashboardCli final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void screenshotWritesPng();
    void screenshotToUnwritablePathFails();
    void screenshotOfLiveHome();
};

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

QTEST_GUILESS_MAIN(TestDashboardCli)
#include "tst_dashboardcli.moc"
