// `tollgate-dashboard --screenshot FILE` as a user runs it: writes a PNG and exits 0.

#include <QImage>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>
#include <QTest>

class TestDashboardCli final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void screenshotWritesPng();
    void screenshotToUnwritablePathFails();
};

static QProcess* startDashboard(const QStringList& args, QProcess& p)
{
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(TOLLGATE_DASHBOARD_PATH), args);
    return &p;
}

void TestDashboardCli::screenshotWritesPng()
{
    QTemporaryDir dir;
    const QString png = dir.path() + QStringLiteral("/shot.png");
    QProcess p;
    startDashboard({ QStringLiteral("--home"), dir.path() + QStringLiteral("/home"), QStringLiteral("--screenshot"), png },
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
    startDashboard({ QStringLiteral("--screenshot"), dir.path() + QStringLiteral("/no/such/dir/shot.png") }, p);
    QVERIFY(p.waitForFinished(60000));
    QVERIFY(p.exitCode() != 0);
    QVERIFY(p.readAllStandardError().contains("cannot write the screenshot"));
}

QTEST_GUILESS_MAIN(TestDashboardCli)
#include "tst_dashboardcli.moc"
