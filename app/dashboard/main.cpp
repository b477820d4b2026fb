// tollgate-dashboard: the desktop window onto Tollgate.

#include "mainwindow.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QTimer>

int main(int argc, char** argv)
{
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("tollgate-dashboard"));
    QApplication::setApplicationVersion(QStringLiteral(TOLLGATE_VERSION));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Watch and steer the API quota shared through Tollgate."));
    parser.addHelpOption();
    parser.addVersionOption();
    QCommandLineOption homeOption(QStringLiteral("home"), QStringLiteral("Tollgate state directory."),
        QStringLiteral("DIR"));
    QCommandLineOption screenshotOption(QStringLiteral("screenshot"),
        QStringLiteral("Render the window to a PNG file and exit."), QStringLiteral("FILE"));
    parser.addOption(homeOption);
    parser.addOption(screenshotOption);
    parser.process(app);

    QString home = parser.value(homeOption);
    if (home.isEmpty())
        home = qEnvironmentVariable("TOLLGATE_HOME");
    if (home.isEmpty()) {
        const QString xdg = qEnvironmentVariable("XDG_STATE_HOME");
        home = (xdg.isEmpty() ? QDir::homePath() + QStringLiteral("/.local/state") : xdg) + QStringLiteral("/tollgate");
    }

    tollgate::ui::MainWindow window(home);
    window.show();

    if (parser.isSet(screenshotOption)) {
        const QString file = parser.value(screenshotOption);
        int code = 0;
        QTimer::singleShot(0, &window, [&window, &file, &code] {
            if (!window.grab().save(file, "PNG")) {
                qCritical("tollgate-dashboard: cannot write the screenshot to %s", qPrintable(file));
                code = 3;
            }
            QApplication::exit(code);
        });
        return app.exec();
    }
    return app.exec();
}
