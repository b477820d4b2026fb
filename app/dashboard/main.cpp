// tollgate-dashboard: the desktop window onto Tollgate.

#include "displaycheck.h"
#include "homedir.h"
#include "mainwindow.h"
#include "traycontroller.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QTimer>

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
    QCommandLineOption settingsOption(QStringLiteral("settings"),
        QStringLiteral("Settings file (default: ~/.config/tollgate/dashboard.ini)."), QStringLiteral("FILE"));
    parser.addOption(homeOption);
    parser.addOption(locksOption);
    parser.addOption(screenshotOption);
    parser.addOption(settingsOption);
    parser.process(app);

    std::optional<std::string> explicitHome;
    if (parser.isSet(homeOption))
        explicitHome = parser.value(homeOption).toStdString();
    auto home = tollgate::HomeDir::resolve(explicitHome);
    if (!home) {
        qCritical("tollgate-dashboard: %s", home.error().describe().c_str());
        return 2;
    }

    tollgate::ui::DashboardOptions options;
    options.home = QString::fromStdString(*home);
    for (const QString& dir : parser.values(locksOption))
        options.lockDirs.append(QDir(dir).absolutePath());
    options.settingsPath = parser.value(settingsOption);

    tollgate::ui::MainWindow window(options);
    if (window.tray()->available() && !parser.isSet(screenshotOption))
        QApplication::setQuitOnLastWindowClosed(false);
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
