// LimiterPool, `tollgate proxy`'s kept store connections: an entry the pool does not keep (too
// old to take again, or the pool is full) is destroyed outside the pool's mutex. Destroying a
// backend may wait for its store (a leave it owes, QuotaBackend::owesCleanUp, done once more as
// it goes), and no other request's take or give may wait with it. The store here is the memory
// store behind a gate the test holds shut (a store that stalls); the threads are the proxy's
// store threads.

#include "backend/localquotabackend.h"
#include "helpers/switchablestore.h"
#include "proxy/limiterpool.h"

#include <QTemporaryDir>
#include <QTest>
#include <atomic>
#include <memory>
#include <thread>
#include <unistd.h>

using namespace tollgate;
using namespace std::chrono_literals;
using proxy::LimiterPool;

class TestLimiterPool final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void anAgedEntryOwingACleanUpDoesNotHoldThePool();

private:
    // An entry over `store` whose backend owes a leave: a waiter queued, then its leave failed
    // while the store was down.
    static std::unique_ptr<LimiterPool::Entry> owingEntry(test::SwitchableStore& store);
};

std::unique_ptr<LimiterPool::Entry> TestLimiterPool::owingEntry(test::SwitchableStore& store)
{
    auto e = std::make_unique<LimiterPool::Entry>();
    auto backend = std::make_unique<LocalQuotaBackend>(store, e->clock, e->probe);
    ProviderLimits l;
    l.requests = 1;
    l.windowMs = 60000;
    if (!backend->setLimits("api", nullptr, l, "test", nullptr, ""))
        return nullptr;
    AdmitStep step;
    step.request.provider = "api";
    step.request.caller = "waiter";
    step.request.pid = ::getpid();
    step.startMs = e->clock.unixMs();
    step.request.deadlineMs = step.startMs + 600000;
    step.enqueue = true;
    for (int i = 0; i < 2; ++i) { // the first takes the one request, the second queues
        auto r = backend->admit(step);
        if (!r)
            return nullptr;
        step.ticket = r->decision.ticket;
    }
    if (step.ticket == 0)
        return nullptr;
    store.down = true;
    if (backend->leaveQueue(step, true, "deadline") || !backend->owesCleanUp())
        return nullptr;
    store.down = false;
    e->backend = std::move(backend);
    e->opened = LimiterPool::Steady::now();
    return e;
}

void TestLimiterPool::anAgedEntryOwingACleanUpDoesNotHoldThePool()
{
    QTemporaryDir home;
    QVERIFY(home.isValid());
    LimiterPool pool;
    pool.setHome(home.path().toStdString());
    test::SwitchableStore store;
    auto aged = owingEntry(store);
    QVERIFY(aged);
    aged->opened -= LimiterPool::MAX_AGE + 1s;
    pool.give(std::move(aged));

    // A store thread takes: the aged entry goes, and its last try of the leave waits at the
    // gate (the store stalls).
    store.hold();
    std::atomic<bool> took { false };
    std::thread taker([&] {
        auto e = pool.take(); // then a fresh one, for the directory home
        took = e.ok();
    });
    const bool stalled = store.someoneWaits(60s);

    // Meanwhile another request gives its entry back, and another takes it.
    std::atomic<bool> gaveAndTook { false };
    std::thread other([&] {
        auto fresh = std::make_unique<LimiterPool::Entry>();
        fresh->opened = LimiterPool::Steady::now();
        pool.give(std::move(fresh));
        gaveAndTook = pool.take().ok();
    });
    // (Before, both waited for the store: the aged entry went under the pool's mutex.)
    const bool notHeld = QTest::qWaitFor([&] { return gaveAndTook.load(); }, 60000);
    store.open();
    other.join();
    taker.join();
    QVERIFY(stalled);
    QVERIFY(notHeld);
    QVERIFY(took.load());
    // The leave was done as the backend went: the queue is empty.
    QuotaState state;
    QVERIFY(store.memory().transact(StoreWait {}, [&](QuotaTransaction& tx) -> Result<void> {
        state = tx.state;
        return {};
    }));
    ProviderState* p = state.provider("api");
    QVERIFY(p);
    QVERIFY(p->queue.empty());
}

QTEST_GUILESS_MAIN(TestLimiterPool)
#include "tst_limiterpool.moc"
