// tsanrace: a deliberate data race in our own code, in a process whose Qt bus thread is
// talking to a session bus through libdbus (when DBUS_SESSION_BUS_ADDRESS names one), so
// tst_tsansuppressions can show that tests/sanitizers/tsan.supp, which silences reports
// inside libdbus, still lets a race between two of our functions through.

#include <QCoreApplication>
#include <QDBusConnection>
#include <QDBusConnectionInterface>
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
