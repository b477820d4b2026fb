// tsanrace: a deliberate data race in our own code, in a process whose Qt bus thread is
// talking to a session bus through libdbus (when DBUS_SESSION_BUS_ADDRESS names one), so
// tst_tsansuppressions can show that tests/sanitizers/tsan.supp, which silences reports
// inside libdbus, still lets a race between two of our functions through.
//
// With --in-slots the two racing increments run where the dashboard's code runs: called by
// Qt (a signal of the worker thread, a timer of the main event loop), with Qt's frames under
// them. Nothing orders them but a relaxed flag, which ThreadSanitizer does not take as an
// ordering: the main thread's increment comes after the worker's in time, never in
// happens-before.

#include <QCoreApplication>
#include <QDBusConnection>
#include <QDBusConnectionInterface>
#include <QDeadlineTimer>
#include <QThread>
#include <QTimer>
#include <atomic>
#include <cstdio>
#include <thread>

namespace {

int g_counter = 0; // unguarded on purpose

void tollgateRacyIncrement()
{
    for (int i = 0; i < 1000; ++i)
        ++g_counter;
}

} // namespace

int main(int argc, char** argv)
{
    QCoreApplication app(argc, argv);
    if (argc > 1 && qstrcmp(argv[1], "--in-slots") == 0) {
        std::atomic<bool> workerDone { false };
        QThread worker;
        QObject::connect(&worker, &QThread::started, [&workerDone] {
            tollgateRacyIncrement();
            workerDone.store(true, std::memory_order_relaxed);
        });
        QTimer::singleShot(0, &app, [&] {
            const QDeadlineTimer deadline(60000);
            while (!workerDone.load(std::memory_order_relaxed) && !deadline.hasExpired())
                QThread::yieldCurrentThread();
            tollgateRacyIncrement();
            app.quit();
        });
        worker.start();
        app.exec();
        worker.quit();
        worker.wait();
        std::printf("in slots, counter %d\n", g_counter);
        return 0;
    }
    const QDBusConnection bus = QDBusConnection::sessionBus();
    if (bus.isConnected())
        (void)bus.interface()->registeredServiceNames(); // a round trip on Qt's bus thread
    std::thread a(tollgateRacyIncrement);
    std::thread b(tollgateRacyIncrement);
    a.join();
    b.join();
    std::printf("bus %s, counter %d\n", bus.isConnected() ? "connected" : "absent", g_counter);
    return 0;
}
