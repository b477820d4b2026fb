// ThreadInbox: jobs posted from other threads run in the inbox's thread, in the order each
// thread posted them, none lost and none run twice; a job that spins a nested event loop does
// not reorder the rest; an inbox destroyed with jobs waiting runs none of them. Under
// ThreadSanitizer (scripts/test.sh phase 3) the hand-over itself is checked too.

#include "threadinbox.h"

#include <QDeadlineTimer>
#include <QEventLoop>
#include <QTest>
#include <QThread>
#include <thread>
#include <vector>

using tollgate::ui::ThreadInbox;

class TestThreadInbox final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void jobsFromThreadsRunHereInTheirOrder();
    void aNestedEventLoopKeepsTheOrder();
    void aDestroyedInboxRunsNothing();
};

void TestThreadInbox::jobsFromThreadsRunHereInTheirOrder()
{
    constexpr int PER_THREAD = 2000;
    ThreadInbox inbox;
    std::vector<int> seen[2]; // touched only by jobs, in this thread
    bool elsewhere = false;
    QThread* const here = QThread::currentThread();
    auto poster = [&](int which) {
        for (int i = 0; i < PER_THREAD; ++i) {
            inbox.post([&seen, &elsewhere, here, which, i] {
                elsewhere = elsewhere || QThread::currentThread() != here;
                seen[which].push_back(i);
            });
        }
    };
    std::thread a(poster, 0);
    std::thread b(poster, 1);
    QDeadlineTimer deadline(60000);
    while ((seen[0].size() < PER_THREAD || seen[1].size() < PER_THREAD) && !deadline.hasExpired())
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
    a.join();
    b.join();
    QCoreApplication::processEvents(); // anything extra would run now
    QVERIFY(!elsewhere);
    for (const std::vector<int>& s : seen) {
        QCOMPARE(int(s.size()), PER_THREAD);
        for (int i = 0; i < PER_THREAD; ++i)
            QCOMPARE(s[size_t(i)], i);
    }
}

void TestThreadInbox::aNestedEventLoopKeepsTheOrder()
{
    ThreadInbox inbox;
    std::vector<int> order;
    inbox.post([&] {
        order.push_back(1);
        QEventLoop nested; // as a modal dialog would
        inbox.post([&] {
            order.push_back(3);
            nested.quit();
        });
        nested.exec();
        order.push_back(4);
    });
    inbox.post([&] { order.push_back(2); });
    QDeadlineTimer deadline(30000);
    while (order.size() < 4 && !deadline.hasExpired())
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
    QCOMPARE(order, (std::vector<int> { 1, 2, 3, 4 }));
}

void TestThreadInbox::aDestroyedInboxRunsNothing()
{
    int ran = 0;
    {
        ThreadInbox inbox;
        std::thread t([&inbox, &ran] { inbox.post([&ran] { ++ran; }); });
        t.join();
    }
    QCoreApplication::processEvents(); // the pending wake-up went with its receiver
    QCOMPARE(ran, 0);
}

QTEST_GUILESS_MAIN(TestThreadInbox)
#include "tst_threadinbox.moc"
