// LockQueue: the first-come-first-served hand-over of state.lock. The order, the skipping of
// waiters that left, and recovery from garbage are shown in one process with a stand-in lock
// (the queue's logic does not care who holds what); what happens when a queued PROCESS is
// SIGKILLed, and when the doorbell holds garbage, is shown with real `tollgate` processes on
// the real flock.

#include "store/doorbell.h"
#include "store/lockqueue.h"
#include "system/futex.h"
#include "system/homedir.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <array>
#include <atomic>
#include <fcntl.h>
#include <mutex>
#include <signal.h>
#include <string>
#include <sys/file.h>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace tollgate;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

// Polls `done` until it holds or 20 s pass (a deadline, not a timing assertion).
template <class Done> bool eventually(Done done)
{
    const auto until = Clock::now() + 20s;
    while (!done()) {
        if (Clock::now() > until)
            return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

// The words of a doorbell plus a stand-in for the flock, in this process.
struct Bench
{
    std::array<std::atomic<std::uint32_t>, LockQueue::END> words {};
    std::atomic<bool> locked { false };
    std::mutex orderMutex;
    std::vector<std::string> order;

    LockQueue::TryLock tryLock()
    {
        return [this]() -> Result<bool> {
            bool expected = false;
            return locked.compare_exchange_strong(expected, true);
        };
    }
    void unlock()
    {
        locked.store(false);
        words[LockQueue::TURN].fetch_add(1);
        if (words[LockQueue::TURN_SLEEPERS].load() != 0)
            futex::wake(&words[LockQueue::TURN], 1);
    }
    std::uint32_t queued() const { return words[LockQueue::NEXT].load() - words[LockQueue::SERVING].load(); }
    // A thread that takes the lock through the queue, notes its name, and lets go.
    std::thread waiter(
        std::string name, std::chrono::nanoseconds stall, Clock::duration patience, std::atomic<int>* outcome)
    {
        return std::thread([this, name, stall, patience, outcome] {
            LockQueue q(words.data(), stall);
            auto r = q.acquire(tryLock(), Clock::now() + patience);
            if (!r) {
                outcome->store(-1);
                return;
            }
            if (*r) {
                {
                    std::lock_guard<std::mutex> g(orderMutex);
                    order.push_back(name);
                }
                unlock();
            }
            outcome->store(*r ? 1 : 2);
        });
    }
};

} // namespace

class TestLockQueue : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void uncontendedTakesNoTicket();
    void waitersGetTheLockInArrivalOrder();
    void aHeadThatWaitedLongStopsNewcomersTakingTheLock();
    void aWaiterThatLeftIsSkippedWithoutAStall();
    void aTicketNobodyServesCostsOneStall();
    void garbageInTheWordsIsNotAQueue();
    void spinLeasesNobodyGivesBackDoNotStopTheQueue();
    void aWaiterSpinsOnlyWithASpinLease();
    void aKilledQueuedProcessDoesNotWedgeTheOthers();
    void aHostileDoorbellDoesNotStopTheCli();
    void aCancelEndsTheWaitAndLeavesTheQueue();
};

void TestLockQueue::uncontendedTakesNoTicket()
{
    Bench b;
    LockQueue q(b.words.data());
    auto r = q.acquire(b.tryLock(), Clock::now() + 1s);
    QVERIFY(r && *r);
    QCOMPARE(b.words[LockQueue::NEXT].load(), 0U);
    b.unlock();
}

void TestLockQueue::waitersGetTheLockInArrivalOrder()
{
    Bench b;
    b.locked = true; // "another process" holds it while the queue forms
    // No stall barging in this test: the order must come from the queue alone.
    const auto stall = std::chrono::nanoseconds(60s);
    std::array<std::atomic<int>, 4> outcome {};
    std::vector<std::thread> threads;
    const char* names[] = { "a", "b", "c", "d" };
    for (std::uint32_t i = 0; i < 4; ++i) {
        threads.push_back(b.waiter(names[i], stall, 30s, &outcome[i]));
        QVERIFY(eventually([&] { return b.queued() == i + 1; }));
    }
    b.unlock();
    for (auto& t : threads)
        t.join();
    for (auto& o : outcome)
        QCOMPARE(o.load(), 1);
    QCOMPARE(b.order, (std::vector<std::string> { "a", "b", "c", "d" }));
    QCOMPARE(b.queued(), 0U);
}

void TestLockQueue::aHeadThatWaitedLongStopsNewcomersTakingTheLock()
{
    Bench b;
    b.locked = true;
    // The head cannot take the lock until we say so: what a newcomer does with a free lock
    // is then seen without a race.
    std::atomic<bool> headMayTry { false };
    std::atomic<int> head { 0 };
    std::thread headThread([&] {
        LockQueue q(b.words.data(), std::chrono::nanoseconds(60s));
        auto inner = b.tryLock();
        auto r = q.acquire(
            [&]() -> Result<bool> {
                if (!headMayTry.load())
                    return false;
                return inner();
            },
            Clock::now() + 30s);
        if (r && *r) {
            {
                std::lock_guard<std::mutex> g(b.orderMutex);
                b.order.push_back("head");
            }
            b.unlock();
        }
        head.store(r ? (*r ? 1 : 2) : -1);
    });
    QVERIFY(eventually([&] { return b.queued() == 1; }));
    // The head has waited a whole second (as if running processes kept taking the lock).
    const auto nowUs = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch());
    b.words[LockQueue::HEAD_SINCE].store(static_cast<std::uint32_t>((nowUs - 1s).count()));
    b.unlock();
    std::atomic<int> newcomer { 0 };
    auto t = b.waiter("newcomer", std::chrono::nanoseconds(60s), 30s, &newcomer);
    // Either it took the free lock at once (wrong) or it queued behind the head (right).
    QVERIFY(eventually([&] { return newcomer.load() != 0 || b.queued() == 2; }));
    headMayTry = true;
    headThread.join();
    t.join();
    QCOMPARE(head.load(), 1);
    QCOMPARE(newcomer.load(), 1);
    QCOMPARE(b.order, (std::vector<std::string> { "head", "newcomer" }));
}

void TestLockQueue::aWaiterThatLeftIsSkippedWithoutAStall()
{
    Bench b;
    b.locked = true;
    const auto stall = std::chrono::nanoseconds(60s); // a stall would outlast every deadline here
    std::atomic<int> head { 0 }, leaver { 0 }, last { 0 };
    auto t1 = b.waiter("head", stall, 30s, &head);
    QVERIFY(eventually([&] { return b.queued() == 1; }));
    auto t2 = b.waiter("leaver", stall, 50ms, &leaver);
    QVERIFY(eventually([&] { return leaver.load() != 0; }));
    QCOMPARE(leaver.load(), 2); // its deadline passed while queued
    auto t3 = b.waiter("last", stall, 30s, &last);
    QVERIFY(eventually([&] { return b.queued() == 3; }));
    b.unlock();
    t1.join();
    t2.join();
    t3.join();
    QCOMPARE(head.load(), 1);
    QCOMPARE(last.load(), 1);
    QCOMPARE(b.order, (std::vector<std::string> { "head", "last" }));
}

void TestLockQueue::aTicketNobodyServesCostsOneStall()
{
    Bench b;
    b.locked = true;
    // A process took ticket 0 and died: nobody will ever take its turn.
    b.words[LockQueue::NEXT].store(1);
    std::atomic<int> next { 0 };
    auto t = b.waiter("next", 5ms, 30s, &next);
    QVERIFY(eventually([&] { return b.queued() == 2; }));
    b.unlock();
    t.join();
    QCOMPARE(next.load(), 1);
    QCOMPARE(b.queued(), 0U); // the dead ticket was passed
}

void TestLockQueue::garbageInTheWordsIsNotAQueue()
{
    for (const std::uint32_t next : { 0x40000000U, 0xFFFFFFF0U }) {
        Bench b;
        b.words[LockQueue::NEXT].store(next);
        b.words[LockQueue::SERVING].store(0x10U);
        for (int i = LockQueue::WAKE; i < LockQueue::END; ++i)
            b.words[static_cast<std::size_t>(i)].store(0xFFFFFFFFU);
        LockQueue q(b.words.data(), 5ms);
        auto r = q.acquire(b.tryLock(), Clock::now() + 20s);
        QVERIFY(r && *r);
        b.unlock();
        QCOMPARE(b.queued(), 0U);
    }
}

// A waiter spins only with a spin lease. Leases that look taken for ever (a writer that keeps
// them fresh, or garbage) only mean nobody spins: every waiter sleeps and is woken by the
// unlock, in order, and none waits past the unlock.
void TestLockQueue::spinLeasesNobodyGivesBackDoNotStopTheQueue()
{
    Bench b;
    b.locked = true;
    std::atomic<bool> done { false };
    std::thread hog([&] {
        while (!done.load()) {
            const auto us = static_cast<std::uint32_t>(
                std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch())
                    .count());
            for (int i = 0; i < LockQueue::MAX_SPINNERS; ++i)
                b.words[static_cast<std::size_t>(LockQueue::SPIN_LEASE + i)].store(us | 1U);
            std::this_thread::yield();
        }
    });
    std::atomic<int> first { 0 };
    std::atomic<int> second { 0 };
    // Stall far beyond the test: a waiter that slept through its wake-up would show as a
    // timeout, not be rescued by the stall rule.
    auto a = b.waiter("first", 60s, 30s, &first);
    QVERIFY(eventually([&] { return b.queued() == 1; }));
    auto c = b.waiter("second", 60s, 30s, &second);
    QVERIFY(eventually([&] { return b.queued() == 2; }));
    b.unlock();
    a.join();
    c.join();
    done = true;
    hog.join();
    QCOMPARE(first.load(), 1);
    QCOMPARE(second.load(), 1);
    QCOMPARE(b.order, (std::vector<std::string> { "first", "second" }));
}

// The head of the queue spins on the lock's release word only with a spin lease: with one
// free it spins before it sleeps; with every lease taken it goes to sleep without spinning. Observed through
// the turn-sleepers word, which the head raises only after its spin (or its decision not to spin).
void TestLockQueue::aWaiterSpinsOnlyWithASpinLease()
{
    if (std::thread::hardware_concurrency() < 2)
        QSKIP("one CPU: no waiter ever spins here");
    for (const bool leasesTaken : { false, true }) {
        Bench b;
        b.locked = true;
        // Taken leases: stamped 0.9 s ahead (a stamp less than ~1 s ahead is a live lease read
        // before its taker's clock; further ahead is garbage), and kept so until the end, so a
        // stamp never turns stale however the threads are scheduled.
        std::atomic<bool> done { false };
        auto stampAhead = [&] {
            const auto us = static_cast<std::uint32_t>(
                std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch())
                    .count());
            for (int i = 0; i < LockQueue::MAX_SPINNERS; ++i)
                b.words[static_cast<std::size_t>(LockQueue::SPIN_LEASE + i)].store((us + 900000U) | 1U);
        };
        if (leasesTaken)
            stampAhead();
        std::thread hog([&] {
            while (leasesTaken && !done.load()) {
                stampAhead();
                std::this_thread::yield();
            }
        });
        std::uint64_t spins = 0;
        std::atomic<int> outcome { 0 };
        std::thread waiter([&] {
            LockQueue q(b.words.data(), 60s);
            auto r = q.acquire(b.tryLock(), Clock::now() + 30s);
            spins = q.spinLeasesTaken();
            outcome = r && *r ? 1 : -1;
            if (r && *r)
                b.unlock();
        });
        QVERIFY(eventually([&] { return b.words[LockQueue::TURN_SLEEPERS].load() == 1; }));
        b.unlock();
        waiter.join();
        done = true;
        hog.join();
        QCOMPARE(outcome.load(), 1);
        if (leasesTaken)
            QCOMPARE(spins, std::uint64_t { 0 });
        else
            QVERIFY(spins >= 1);
    }
}

namespace {

struct Home
{
    QTemporaryDir dir;
    QString path() const { return dir.path() + QStringLiteral("/home"); }
    QStringList withHome(std::initializer_list<const char*> args) const
    {
        QStringList all;
        for (const char* a : args)
            all << QString::fromUtf8(a);
        return all << QStringLiteral("--home") << path();
    }
    int cli(std::initializer_list<const char*> args) const
    {
        QProcess p;
        p.start(QStringLiteral(TOLLGATE_CLI_PATH), withHome(args));
        if (!p.waitForFinished(60000))
            return -1;
        return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    }
    std::unique_ptr<QProcess> start(std::initializer_list<const char*> args) const
    {
        auto p = std::make_unique<QProcess>();
        p->setProcessChannelMode(QProcess::ForwardedChannels);
        p->start(QStringLiteral(TOLLGATE_CLI_PATH), withHome(args));
        return p;
    }
};

// The doorbell of a home, mapped here to watch (and spoil) the queue.
struct Words
{
    std::atomic<std::uint32_t>* words = nullptr;
    explicit Words(const QString& home)
    {
        const int fd
            = ::open((home + QStringLiteral("/doorbell")).toLocal8Bit().constData(), O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return;
        void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
        if (p != MAP_FAILED)
            words = static_cast<std::atomic<std::uint32_t>*>(p);
    }
    ~Words()
    {
        if (words)
            ::munmap(words, 4096);
    }
    std::uint32_t queued() const { return words[LockQueue::NEXT].load() - words[LockQueue::SERVING].load(); }
};

// Holds state.lock as some other process would (without the queue's protocol).
struct StateLock
{
    int fd = -1;
    explicit StateLock(const QString& home)
    {
        fd = ::open((home + QStringLiteral("/state.lock")).toLocal8Bit().constData(), O_RDWR | O_CLOEXEC);
        if (fd >= 0 && ::flock(fd, LOCK_EX) != 0) {
            ::close(fd);
            fd = -1;
        }
    }
    ~StateLock()
    {
        if (fd >= 0)
            ::close(fd); // drops the flock
    }
};

} // namespace

void TestLockQueue::aKilledQueuedProcessDoesNotWedgeTheOthers()
{
    Home h;
    QVERIFY(h.dir.isValid());
    QCOMPARE(h.cli({ "limits", "set", "p", "--requests", "1000", "--window", "60" }), 0);
    Words w(h.path());
    QVERIFY(w.words);
    auto held = std::make_unique<StateLock>(h.path());
    QVERIFY(held->fd >= 0);
    const std::uint32_t before = w.queued();
    QCOMPARE(before, 0U);
    auto head = h.start({ "acquire", "p", "--caller", "head", "--timeout", "60" });
    QVERIFY(eventually([&] { return w.queued() == 1; }));
    auto second = h.start({ "acquire", "p", "--caller", "second", "--timeout", "60" });
    QVERIFY(eventually([&] { return w.queued() == 2; }));
    ::kill(static_cast<pid_t>(head->processId()), SIGKILL);
    QVERIFY(head->waitForFinished(20000));
    held.reset();
    QVERIFY(second->waitForFinished(60000));
    QCOMPARE(second->exitStatus(), QProcess::NormalExit);
    QCOMPARE(second->exitCode(), 0);
    QCOMPARE(w.queued(), 0U);
    QCOMPARE(h.cli({ "acquire", "p", "--caller", "after", "--timeout", "10" }), 0);
}

void TestLockQueue::aHostileDoorbellDoesNotStopTheCli()
{
    Home h;
    QVERIFY(h.dir.isValid());
    QCOMPARE(h.cli({ "limits", "set", "p", "--requests", "1000", "--window", "60" }), 0);
    Words w(h.path());
    QVERIFY(w.words);
    for (const std::uint32_t next : { 0x7FFFFFFFU, 0x5U, 0xFFFFFFFFU, 0x105U }) {
        w.words[LockQueue::NEXT].store(next);
        w.words[LockQueue::SERVING].store(0x100U);
        for (int i = LockQueue::WAKE; i < LockQueue::END; ++i)
            w.words[i].store(next);
        QCOMPARE(h.cli({ "acquire", "p", "--caller", "c", "--timeout", "10" }), 0);
        QCOMPARE(h.cli({ "acquire", "p", "--caller", "c", "--timeout", "10" }), 0);
    }
}

QTEST_GUILESS_MAIN(TestLockQueue)
void TestLockQueue::aCancelEndsTheWaitAndLeavesTheQueue()
{
    // What a signal does to a command waiting for state.lock (its handler sets the flag; the
    // sleeps here are short, and a signal interrupts them): the wait ends while the lock is
    // still held and the deadline an hour away, and the ticket is skipped like one whose
    // deadline passed.
    Bench b;
    b.locked = true;
    std::atomic<bool> cancel { false };
    std::atomic<int> head { 0 }, cancelled { 0 };
    std::thread first = b.waiter("head", LockQueue::STALL, 1h, &head);
    std::thread second;
    // Whatever fails below, no thread is left waiting for its hour.
    struct Joiner
    {
        Bench& b;
        std::atomic<bool>& cancel;
        std::thread& first;
        std::thread& second;
        ~Joiner()
        {
            cancel.store(true);
            if (b.locked.load())
                b.unlock();
            for (std::thread* t : { &first, &second }) {
                if (t->joinable())
                    t->join();
            }
        }
    } joiner { b, cancel, first, second };
    QVERIFY(eventually([&] { return b.queued() == 1; }));
    second = std::thread([&] {
        LockQueue q(b.words.data());
        auto r = q.acquire(b.tryLock(), Clock::now() + 1h, &cancel);
        cancelled.store(!r ? -1 : (*r ? 1 : 2));
    });
    QVERIFY(eventually([&] { return b.queued() == 2; }));
    cancel.store(true);
    QVERIFY(eventually([&] { return cancelled.load() != 0; }));
    QCOMPARE(cancelled.load(), 2); // not taken, no error
    QVERIFY(b.locked.load()); // still held by "another process": the cancel ended the wait
    QCOMPARE(head.load(), 0);
    b.unlock();
    QVERIFY(eventually([&] { return head.load() != 0; }));
    QCOMPARE(head.load(), 1);
    QCOMPARE(b.queued(), 0U); // the head moved the queue past the ticket that left
}

#include "tst_lockqueue.moc"
