// tollgate-dashboard: the desktop window onto Tollgate.

#include "displaycheck.h"
#include "keyedtableview.h"
#include "mainwindow.h"
#include "base/textsanitizer.h"
#include "store/homespec.h"
#include "traycontroller.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QPalette>
#include <QRegularExpression>
#include <QStyle>
#include <QStyleFactory>
#include <QTimer>

namespace {

// --screenshot waits for the first snapshot and history; if the worker hangs (a stopped
// process holding state.lock), the window is captured as it is rather than never.
constexpr int SCREENSHOT_DEADLINE_MS = 15000;

// A dark palette like the desktops' dark themes (Fusion's roles, Breeze Dark's tones), so
// --palette dark shows what a dark desktop gets: the charts and tiles follow the palette.
QPalette darkPalette()
{
    QPalette p;
    const QColor window(0x2a, 0x2e, 0x32);
    const QColor base(0x1b, 0x1e, 0x20);
    const QColor text(0xfc, 0xfc, 0xfc);
    const QColor disabled(0x7f, 0x8c, 0x8d);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, QColor(0x23, 0x26, 0x29));
    p.setColor(QPalette::ToolTipBase, QColor(0x31, 0x36, 0x3b));
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, disabled);
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, QColor(0x31, 0x36, 0x3b));
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, QColor(0xff, 0x6b, 0x6b));
    p.setColor(QPalette::Light, QColor(0x40, 0x46, 0x4c));
    p.setColor(QPalette::Midlight, QColor(0x36, 0x3b, 0x40));
    p.setColor(QPalette::Mid, QColor(0x5a, 0x61, 0x68));
    p.setColor(QPalette::Dark, QColor(0x15, 0x17, 0x19));
    p.setColor(QPalette::Shadow, QColor(0x0c, 0x0d, 0x0e));
    p.setColor(QPalette::Highlight, QColor(0x3d, 0xae, 0xe9));
    p.setColor(QPalette::HighlightedText, QColor(0x10, 0x10, 0x10));
    p.setColor(QPalette::Link, QColor(0x3d, 0xae, 0xe9));
    for (QPalette::ColorRole role : { QPalette::WindowText, QPalette::Text, QPalette::ButtonText })
        p.setColor(QPalette::Disabled, role, disabled);
    return p;
}

} // namespace

int main(int argc, char** argv)
{
    // Before QApplication: without a display it would end in Qt's platform-plugin wall.
    if (const int code = tollgate::dashboard::DisplayCheck::check(argc, argv); code >= 0)
        return code;
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("tollgate-dashboard"));
    QApplication::setOrganizationName(QStringLiteral("tollgate"));
    QApplication::setApplicationVersion(QStringLiteral(TOLLGATE_VERSION));

    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Watch and steer the API quota shared through Tollgate."));
    parser.addHelpOption();
    parser.addVersionOption();
    QCommandLineOption homeOption(QStringLiteral("home"),
        QStringLiteral(
            "Tollgate state directory (default: $TOLLGATE_HOME, else $XDG_STATE_HOME/tollgate, else "
            "~/.local/state/tollgate)."),
        QStringLiteral("DIR"));
    QCommandLineOption locksOption(QStringLiteral("locks"),
        QStringLiteral("Also watch the *.lock files in DIR (repeatable; remembered)."),
        QStringLiteral("DIR"));
    QCommandLineOption screenshotOption(QStringLiteral("screenshot"),
        QStringLiteral("Render the window to a PNG file once the state has loaded, and exit."),
        QStringLiteral("FILE"));
    QCommandLineOption sizeOption(QStringLiteral("size"),
        QStringLiteral(
            "Window size WxH (e.g. 1280x720), for --screenshot; the screen's size does not limit it."),
        QStringLiteral("WxH"));
    QCommandLineOption paletteOption(QStringLiteral("palette"),
        QStringLiteral("Colours: system (default), light or dark."), QStringLiteral("NAME"),
        QStringLiteral("system"));
    QCommandLineOption settingsOption(QStringLiteral("settings"),
        QStringLiteral("Settings file (default: ~/.config/tollgate/dashboard.ini)."), QStringLiteral("FILE"));
    parser.addOption(homeOption);
    parser.addOption(locksOption);
    parser.addOption(screenshotOption);
    parser.addOption(settingsOption);
    parser.addOption(sizeOption);
    parser.addOption(paletteOption);
    parser.process(app);

    const QString paletteName = parser.value(paletteOption);
    if (paletteName == QLatin1String("dark") || paletteName == QLatin1String("light")) {
        // Fusion draws every widget from the palette; the platform style may not.
        QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
        QApplication::setPalette(
            paletteName == QLatin1String("dark") ? darkPalette() : QApplication::style()->standardPalette());
    } else if (paletteName != QLatin1String("system")) {
        qCritical(
            "tollgate-dashboard: --palette must be system, light or dark (got %s)", qPrintable(paletteName));
        return 2;
    }
    QSize size;
    if (parser.isSet(sizeOption)) {
        const auto m
            = QRegularExpression(QStringLiteral("^(\\d{3,5})x(\\d{3,5})$")).match(parser.value(sizeOption));
        // Bounded: a screenshot of 99999x99999 would be a 40 GB image.
        if (m.hasMatch())
            size = QSize(m.captured(1).toInt(), m.captured(2).toInt());
        if (!m.hasMatch() || size.width() < 320 || size.width() > 7680 || size.height() < 240
            || size.height() > 4320) {
            qCritical("tollgate-dashboard: --size must be WIDTHxHEIGHT between 320x240 and 7680x4320, e.g. "
                      "1280x720 (got %s)",
                qPrintable(parser.value(sizeOption)));
            return 2;
        }
    }

    std::optional<std::string> explicitHome;
    if (parser.isSet(homeOption))
        explicitHome = parser.value(homeOption).toStdString();
    auto home = tollgate::HomeSpec::resolve(explicitHome);
    if (!home) {
        qCritical("tollgate-dashboard: %s", tollgate::TextSanitizer::clean(home.error().describe(), 2000).c_str());
        return 2;
    }
    tollgate::ui::DashboardOptions options;
    // A directory, or the Redis URL (its canonical form: never a password).
    options.home = QString::fromStdString(home->isDirectory() ? home->dir() : home->text());
    for (const QString& dir : parser.values(locksOption))
        options.lockDirs.append(QDir(dir).absolutePath());
    options.settingsPath = parser.value(settingsOption);

    tollgate::ui::MainWindow window(options);
    if (window.tray()->available() && !parser.isSet(screenshotOption))
        QApplication::setQuitOnLastWindowClosed(false);
    if (size.isValid()) {
        window.resize(size);
        window.resetLayout(); // the proportions of that size, not of the remembered one
    }
    window.show();

    if (parser.isSet(screenshotOption)) {
        const QString file = parser.value(screenshotOption);
        int code = 0;
        bool done = false;
        auto capture = [&window, &file, &code, &done] {
            if (done)
                return;
            done = true;
            // One more turn of the event loop lets the views lay out what just arrived.
            QTimer::singleShot(50, &window, [&window, &file, &code] {
                // Columns are fitted on a timer while rows arrive; a picture gets them now.
                for (auto* view : window.findChildren<tollgate::ui::KeyedTableView*>())
                    view->fitColumns();
                QApplication::processEvents();
                if (!window.grab().save(file, "PNG")) {
                    qCritical("tollgate-dashboard: cannot write the screenshot to %s", qPrintable(file));
                    code = 3;
                }
                QApplication::exit(code);
            });
        };
        QObject::connect(&window, &tollgate::ui::MainWindow::loaded, &window, capture);
        if (window.isLoaded())
            capture();
        QTimer::singleShot(SCREENSHOT_DEADLINE_MS, &window, capture);
        const int rc = app.exec();
        return code != 0 ? code : rc;
    }
    return app.exec();
}
