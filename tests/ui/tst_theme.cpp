// The theme (Settings → Theme, remembered) and the keyboard focus ring: Dark and Light switch
// the whole application to Fusion with their palette, System gives back what it started with,
// and in every theme the focused widget is ringed 2 px wide in the highlight colour.

#include "dashboardsettings.h"
#include "focusringstyle.h"
#include "settingsdialog.h"
#include "theme.h"

#include <QApplication>
#include <QComboBox>
#include <QFocusFrame>
#include <QImage>
#include <QLineEdit>
#include <QPainter>
#include <QStyleOptionFocusRect>
#include <QTemporaryDir>
#include <QVBoxLayout>
#include <QtTest>

using tollgate::ui::DashboardSettings;
using tollgate::ui::FocusRingStyle;
using tollgate::ui::SettingsDialog;
using tollgate::ui::Theme;

namespace {

// The style under the focus ring (a proxy has no name of its own).
QString baseStyleName()
{
    auto* ring = qobject_cast<FocusRingStyle*>(QApplication::style());
    return ring ? ring->baseStyle()->name() : QApplication::style()->name();
}

} // namespace

class TestTheme final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void themeNamesRoundTrip();
    void settingsRememberTheTheme();
    void theDialogShowsAndReturnsTheTheme();
    void darkLightAndSystemSwitchTheWholeApplication();
    void theFocusedWidgetIsRinged();
    void theRingIsTwoPixelsOfHighlight();
};

void TestTheme::themeNamesRoundTrip()
{
    for (Theme::Kind k : { Theme::Kind::System, Theme::Kind::Light, Theme::Kind::Dark })
        QCOMPARE(Theme::parse(Theme::name(k)), std::optional<Theme::Kind>(k));
    QVERIFY(!Theme::parse(QStringLiteral("purple")));
    QVERIFY(!Theme::parse(QStringLiteral("Dark"))); // the settings file's spelling only
    QVERIFY(!Theme::parse(QString()));
}

void TestTheme::settingsRememberTheTheme()
{
    QTemporaryDir dir;
    const QString path = dir.path() + QStringLiteral("/dashboard.ini");
    {
        DashboardSettings s(path);
        QCOMPARE(s.theme(), Theme::Kind::System); // unset
        s.setTheme(Theme::Kind::Dark);
        s.sync();
    }
    QCOMPARE(DashboardSettings(path).theme(), Theme::Kind::Dark);
    // A value the user mistyped in the file reads as System, not as an error or a crash.
    {
        QSettings raw(path, QSettings::IniFormat);
        raw.setValue(QStringLiteral("window/theme"), QStringLiteral("purple"));
    }
    QCOMPARE(DashboardSettings(path).theme(), Theme::Kind::System);
}

void TestTheme::theDialogShowsAndReturnsTheTheme()
{
    SettingsDialog d(5, 60, {}, 300);
    auto* combo = d.findChild<QComboBox*>(QStringLiteral("themeChoice"));
    QVERIFY(combo);
    QCOMPARE(combo->count(), 3);
    d.setTheme(Theme::Kind::Light);
    QCOMPARE(d.theme(), Theme::Kind::Light);
    combo->setCurrentIndex(combo->findText(QStringLiteral("Dark")));
    QCOMPARE(d.theme(), Theme::Kind::Dark);
}

void TestTheme::darkLightAndSystemSwitchTheWholeApplication()
{
    const QString startStyle = QApplication::style()->name();
    const QColor startWindow = QApplication::palette().color(QPalette::Window);
    Theme::apply(Theme::Kind::Dark);
    QCOMPARE(Theme::current(), Theme::Kind::Dark);
    QVERIFY(qobject_cast<FocusRingStyle*>(QApplication::style()));
    QCOMPARE(baseStyleName(), QStringLiteral("fusion"));
    QVERIFY(QApplication::palette().color(QPalette::Window).lightness() < 80);
    QCOMPARE(QApplication::palette().color(QPalette::Window), Theme::darkPalette().color(QPalette::Window));
    Theme::apply(Theme::Kind::Light);
    QVERIFY(QApplication::palette().color(QPalette::Window).lightness() > 150);
    QCOMPARE(baseStyleName(), QStringLiteral("fusion"));
    Theme::apply(Theme::Kind::System);
    QCOMPARE(baseStyleName(), startStyle);
    QCOMPARE(QApplication::palette().color(QPalette::Window), startWindow);
    // The ring stays in every theme.
    QVERIFY(qobject_cast<FocusRingStyle*>(QApplication::style()));
}

void TestTheme::theFocusedWidgetIsRinged()
{
    Theme::apply(Theme::Kind::Light);
    QWidget window;
    auto* layout = new QVBoxLayout(&window);
    auto* first = new QLineEdit(&window);
    auto* second = new QLineEdit(&window);
    layout->addWidget(first);
    layout->addWidget(second);
    window.show();
    QApplication::setActiveWindow(&window);
    QVERIFY(QTest::qWaitForWindowActive(&window));
    first->setFocus(Qt::TabFocusReason);
    QTRY_VERIFY(Theme::focusFrame());
    auto* frame = qobject_cast<QFocusFrame*>(Theme::focusFrame());
    QVERIFY(frame);
    QTRY_COMPARE(frame->widget(), static_cast<QWidget*>(first));
    QVERIFY(frame->isVisible());
    // The ring sits outside the widget, so it is not hidden under the widget's own frame.
    QVERIFY(frame->geometry().contains(first->geometry()));
    QVERIFY(frame->geometry() != first->geometry());
    QTest::keyClick(first, Qt::Key_Tab);
    QTRY_COMPARE(frame->widget(), static_cast<QWidget*>(second));
}

void TestTheme::theRingIsTwoPixelsOfHighlight()
{
    Theme::apply(Theme::Kind::Dark);
    QImage img(40, 30, QImage::Format_ARGB32);
    img.fill(Qt::black);
    QStyleOptionFocusRect option;
    option.rect = img.rect();
    option.palette = QApplication::palette();
    {
        QPainter painter(&img);
        QApplication::style()->drawPrimitive(QStyle::PE_FrameFocusRect, &option, &painter);
    }
    const QRgb highlight = QApplication::palette().color(QPalette::Active, QPalette::Highlight).rgb();
    // Both outer pixel rows and columns are highlight; the third and the middle are not.
    for (int i : { 0, 1 }) {
        QCOMPARE(img.pixel(20, i), highlight);
        QCOMPARE(img.pixel(20, img.height() - 1 - i), highlight);
        QCOMPARE(img.pixel(i, 15), highlight);
        QCOMPARE(img.pixel(img.width() - 1 - i, 15), highlight);
    }
    QVERIFY(img.pixel(20, 2) != highlight);
    QVERIFY(img.pixel(20, 15) != highlight);
    Theme::apply(Theme::Kind::System);
}

QTEST_MAIN(TestTheme)
#include "tst_theme.moc"
