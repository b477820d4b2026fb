// The dashboard window under QT_QPA_PLATFORM=offscreen.

#include "mainwindow.h"

#include <QLabel>
#include <QTemporaryDir>
#include <QTest>

class TestMainWindow final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void opensOnMissingHome();
    void rendersToPixmap();
};

void TestMainWindow::opensOnMissingHome()
{
    QTemporaryDir dir;
    const QString missing = dir.path() + QStringLiteral("/not/there");
    tollgate::ui::MainWindow w(missing);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* empty = w.findChild<QLabel*>(QStringLiteral("emptyState"));
    QVERIFY(empty);
    QVERIFY(empty->text().contains(QStringLiteral("No callers yet")));
    QVERIFY(empty->text().contains(missing));
}

void TestMainWindow::rendersToPixmap()
{
    tollgate::ui::MainWindow w(QStringLiteral("/tmp/tollgate-test-home"));
    w.show();
    const QImage img = w.grab().toImage();
    QVERIFY(!img.isNull());
    QVERIFY(img.width() >= 600 && img.height() >= 400);
    // not a blank canvas: the text drew some pixels darker than the background
    bool dark = false;
    for (int y = 0; y < img.height() && !dark; y += 2)
        for (int x = 0; x < img.width() && !dark; x += 2)
            dark = qGray(img.pixel(x, y)) < 100;
    QVERIFY(dark);
}

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
