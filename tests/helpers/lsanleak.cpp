// lsanleak: a deliberate leak in our own code, made where the dashboard's and the tests' code
// runs: inside a slot that Qt's event loop calls (a timer of QCoreApplication's loop, or of
// QGuiApplication's with --gui), so Qt's frames are under the allocation. tst_lsansuppressions
// runs it with scripts/test.sh's phase 2 options and tests/sanitizers/lsan.supp: LeakSanitizer
// must still report it (a suppression by module name, such as libQt6Core.so, matches any frame
// of the allocation's stack, and hid every leak of every test slot).

#include <QCoreApplication>
#include <QGuiApplication>
#include <QTimer>
#include <cstdio>
#include <memory>

namespace {

// Kept out of line so the report names it.
[[gnu::noinline]] void tollgateDeliberateLeak()
{
    auto* leaked = new char[4096];
    leaked[0] = 1;
    std::printf("leaked %d\n", leaked[0]); // used, so it is not optimised away; then lost
    std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv)
{
    const bool gui = argc > 1 && qstrcmp(argv[1], "--gui") == 0;
    std::unique_ptr<QCoreApplication> app;
    if (gui)
        app = std::make_unique<QGuiApplication>(argc, argv);
    else
        app = std::make_unique<QCoreApplication>(argc, argv);
    QTimer::singleShot(0, app.get(), [] {
        tollgateDeliberateLeak();
        QCoreApplication::quit();
    });
    return app->exec();
}
