// tollgate-dashboard: the desktop window onto Tollgate.

#include "base/textsanitizer.h"
#include "dashboardsettings.h"
#include "displaycheck.h"
#include "keyedtableview.h"
#include "mainwindow.h"
#include "store/homespec.h"
#include "theme.h"
#include "traycontroller.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QRegularExpression>
#include <QTimer>
#include <optional>

namespace {

// --screenshot waits for the first snapshot and history; if the worker hangs (a stopped
// process holding state.lock), the window is captured as it is rather than never.
constexpr int SCREENSHOT_DEADLINE_MS = 15000;

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
        QStringLiteral(
            "Colours for this run: system, light or dark (default: the theme chosen in Settings)."),
        QStringLiteral("NAME"));
    QCommandLineOption settingsOption(QStringLiteral("settings"),
        QStringLiteral("Settings file (default: ~/.config/tollgate/dashboard.ini)."), QStringLiteral("FILE"));
    parser.addOption(homeOption);
    parser.addOption(locksOption);
    parser.addOption(screenshotOption);
    parser.addOption(settingsOption);
    parser.addOption(sizeOption);
    parser.addOption(paletteOption);
    parser.process(app);

    // --palette is for this run; without it, the theme chosen in Settings.
    std::optional<tollgate::ui::Theme::Kind> theme;
    if (parser.isSet(paletteOption)) {
        theme = tollgate::ui::Theme::parse(parser.value(paletteOption));
        if (!theme) {
            qCritical("tollgate-dashboard: --palette must be system, light or dark (got %s)",
                qPrintable(parser.value(paletteOption)));
            return 2;
        }
    } else {
        theme = tollgate::ui::DashboardSettings(parser.value(settingsOption)).theme();
    }
    tollgate::ui::Theme::apply(*theme);
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
    if (parser.isSet(homeOption)) {
        explicitHome = parser.value(homeOption).toStdString();
        // As the CLI: an empty --home (an unset variable in a script) is no home, not the default one.
        if (explicitHome->empty()) {
            qCritical("tollgate-dashboard: --home must not be empty (leave --home out for the default home)");
            return 2;
        }
    }
    auto home = tollgate::HomeSpec::resolve(explicitHome);
    if (!home) {
        qCritical(
            "tollgate-dashboard: %s", tollgate::TextSanitizer::clean(home.error().describe(), 2000).c_str());
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
