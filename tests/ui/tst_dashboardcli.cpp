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
    void screenshotSizeAndPalette();
    void badSizeOrPaletteIsAUsageError();
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

void TestDashboardCli::badSizeOrPaletteIsAUsageError()
{
    QTemporaryDir dir;
    const QList<QStringList> bad { { QStringLiteral("--size"), QStringLiteral("big") },
        { QStringLiteral("--size"), QStringLiteral("99999x99999") }, // a 40 GB picture
        { QStringLiteral("--size"), QStringLiteral("10x10") },
        { QStringLiteral("--size"), QStringLiteral("1280x720x3") },
        { QStringLiteral("--palette"), QStringLiteral("purple") } };
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
