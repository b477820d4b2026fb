// The icon set: every alias the views use resolves, renders through Qt's SVG support, keeps
// the two-palette colour rule (see stateicon.h), and each tray state has its own look.

#include "stateicon.h"

#include <QFile>
#include <QImage>
#include <QPainter>
#include <QRegularExpression>
#include <QSvgRenderer>
#include <QTest>
#include <cmath>

using tollgate::ui::StateIcon;
using tollgate::ui::TrayState;

namespace {

const QStringList NAMES = { QStringLiteral("tollgate"), QStringLiteral("state-ok"),
    QStringLiteral("state-near"), QStringLiteral("state-blocked"), QStringLiteral("state-paused"),
    QStringLiteral("state-error"), QStringLiteral("pause"), QStringLiteral("resume"),
    QStringLiteral("refresh"), QStringLiteral("release"), QStringLiteral("clean"), QStringLiteral("settings"),
    QStringLiteral("undo"), QStringLiteral("filter") };

double luminance(QColor c)
{
    auto lin = [](double v) { return v <= 0.03928 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * lin(c.redF()) + 0.7152 * lin(c.greenF()) + 0.0722 * lin(c.blueF());
}

double contrast(QColor a, QColor b)
{
    const double la = luminance(a);
    const double lb = luminance(b);
    return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

int opaquePixels(const QImage& image)
{
    int n = 0;
    for (int y = 0; y < image.height(); ++y) {
        for (int x = 0; x < image.width(); ++x)
            n += qAlpha(image.pixel(x, y)) > 128 ? 1 : 0;
    }
    return n;
}

} // namespace

class TestIcons final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void everyAliasRenders_data();
    void everyAliasRenders();
    void coloursReadOnLightAndDark_data() { everyAliasRenders_data(); }
    void coloursReadOnLightAndDark();
    void trayStatesHaveDistinctIcons();
    void iconEngineLoadsTheSvgs();
};

void TestIcons::everyAliasRenders_data()
{
    QTest::addColumn<QString>("name");
    for (const QString& name : NAMES)
        QTest::newRow(qPrintable(name)) << name;
}

void TestIcons::everyAliasRenders()
{
    QFETCH(QString, name);
    const QString path = QStringLiteral(":/icons/%1.svg").arg(name);
    QVERIFY2(QFile::exists(path), qPrintable(path));
    QSvgRenderer renderer(path);
    QVERIFY(renderer.isValid());
    QImage image(32, 32, QImage::Format_ARGB32_Premultiplied);
    image.fill(Qt::transparent);
    QPainter painter(&image);
    renderer.render(&painter);
    painter.end();
    // Something visible, and not a full square (the shapes are drawn, not a background).
    const int n = opaquePixels(image);
    QVERIFY2(n > 32 * 32 / 8, qPrintable(QString::number(n)));
    QVERIFY2(n < 32 * 32, qPrintable(QString::number(n)));
}

void TestIcons::coloursReadOnLightAndDark()
{
    QFETCH(QString, name);
    QFile file(QStringLiteral(":/icons/%1.svg").arg(name));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QString svg = QString::fromUtf8(file.readAll());
    // currentColor and named colours would follow nothing in Qt's renderer: explicit only.
    QVERIFY(!svg.contains(QStringLiteral("currentColor"), Qt::CaseInsensitive));
    static const QRegularExpression paint(QStringLiteral("(?:fill|stroke)=\"([^\"]*)\""));
    int colours = 0;
    for (auto it = paint.globalMatch(svg); it.hasNext();) {
        const QString value = it.next().captured(1);
        if (value == QStringLiteral("none"))
            continue;
        QVERIFY2(
            QRegularExpression(QStringLiteral("^#[0-9a-f]{6}$")).match(value).hasMatch(), qPrintable(value));
        ++colours;
        if (value == QStringLiteral("#ffffff"))
            continue; // only ever drawn inside a coloured shape
        const QColor c(value);
        QVERIFY2(contrast(c, Qt::white) >= 3.0, qPrintable(value + QStringLiteral(" on white")));
        QVERIFY2(
            contrast(c, QColor(0x2d, 0x2d, 0x2d)) >= 3.0, qPrintable(value + QStringLiteral(" on #2d2d2d")));
    }
    QVERIFY(colours > 0);
}

void TestIcons::trayStatesHaveDistinctIcons()
{
    const QList<TrayState> states
        = { TrayState::Normal, TrayState::Backoff, TrayState::Paused, TrayState::Storm };
    QList<QImage> images;
    for (TrayState s : states) {
        QVERIFY(QFile::exists(StateIcon::resourcePath(s)));
        images.append(StateIcon::icon(s).pixmap(22, 22).toImage());
    }
    for (int i = 0; i < images.size(); ++i) {
        for (int j = i + 1; j < images.size(); ++j)
            QVERIFY2(
                images[i] != images[j], qPrintable(StateIcon::name(states[i]) + StateIcon::name(states[j])));
    }
    QCOMPARE(StateIcon::resourcePath(TrayState::Backoff), QStringLiteral(":/icons/state-blocked.svg"));
}

void TestIcons::iconEngineLoadsTheSvgs()
{
    // QIcon reads SVG through the svg icon engine plugin (Debian libqt6svg6); without it the
    // icons are silently empty. Sizes the tray and toolbars ask for all come out drawn.
    for (int size : { 16, 22, 24, 48 }) {
        QVERIFY(opaquePixels(StateIcon::icon(TrayState::Paused).pixmap(size, size).toImage()) > size);
        QVERIFY(opaquePixels(StateIcon::toolbarIcon(QStringLiteral("refresh")).pixmap(size, size).toImage())
            > size);
        QVERIFY(opaquePixels(StateIcon::appIcon().pixmap(size, size).toImage()) > size);
    }
}

QTEST_MAIN(TestIcons)
#include "tst_icons.moc"
