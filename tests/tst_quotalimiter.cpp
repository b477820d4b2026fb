// QuotaLimiter over every store: the same behaviour on the file store, the memory store, the
// memory store in strict mode (every transaction function run twice, as an optimistic store
// may), and a Redis home (the policy in the server's Lua script, on a private redis-server;
// its clock is the test's, sent with every call). One test body per behaviour, run once per store (Qt Test
// global data): a store that breaks the contract, or a limiter that relies on one store's habits, fails here.
// Time is a ManualClock; every acquire is a try (deadline = now), so nothing sleeps.

#include "backend/quotalimiter.h"
#include "backend/storefactory.h"
#include "base/manualclock.h"
#include "helpers/redisserver.h"
#include "quota/capacity.h"
#include "quota/limitmismatch.h"
#include "store/filequotastore.h"
#include "store/memoryquotastore.h"
#include "testsupport.h"

#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <poll.h>
#include <thread>

using namespace tollgate;
using namespace std::chrono_literals;

namespace {

// Cancels a wait after `after` of real time: the clock is manual, so no deadline passes while
// a limiter waits. A limiter that waits where it should not is then cancelled, and its
// result ("cancelled ...") fails the test instead of hanging it.
class Watchdog
{
public:
    Watchdog(std::atomic<bool>& cancel, std::chrono::seconds after)
        : m_thread([&cancel, after](std::stop_token stop) {
            std::mutex m;
            std::unique_lock lock(m);
            std::condition_variable_any cv;
            (void)cv.wait_for(lock, stop, after, [] { return false; });
            if (!stop.stop_requested())
                cancel = true;
        })
    {
    }

private:
    std::jthread m_thread;
};

// The store under test and its read side.
struct StoreUnderTest
{
    std::unique_ptr<QuotaStore> store; // local stores
    std::unique_ptr<QuotaBackend> backend; // Redis
    QuotaReader* reader = nullptr; // owned by store or by ownReader
    std::unique_ptr<QuotaReader> ownReader;
};

} // namespace

class TestQuotaLimiter final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void initTestCase_data();
    void init();
    void cleanup();

    void windowAdmitsThenRefusesUntilItMoves();
    void aClockPutRightCostsOneWindowNotYears();
    void tokensAndModelLimitsBothHold();
    void slotIsHeldUntilReleased();
    void deadHolderIsReclaimed();
    void backoffHonoursRetryAfterAndEnds();
    void pauseStopsEveryoneUntilResumed();
    void fencesOnlyGrow();
    void limitsCompareAndSet();
    void importSetsEveryProviderInOneOperation();
    void unknownProviderIsRefused();
    void releaseByFenceAndRenewTheLease();
    void resetBackoffAndSuccessEndTheStreak();
    void holdUntilStopsEveryoneUntilThenWithoutA429();
    void providerReportedLimitsAreKeptAndAMismatchIsSaidOnce();
    void realUsageReplacesTheEstimate();
    void finishEndsTheCallInOneStep();
    void removedProviderIsForgotten();
    void recordedEventsReachTheHistory();
    void waiterKeepsItsPlaceAndLeavesOnGivingUp();
    void roomAfterTheDeadlineIsRefusedAtOnceNamingTheTime();
    void roomBeforeTheDeadlineIsWaitedFor();
    void aQueueAheadIsWaitedFor();
    void heldSlotsAreWaitedFor();
    void aPauseIsRefusedAtOnce();
    void releaseStaleCountsEachHolderOnce();
    void jitterIsDrawnOncePerReport();
    void readerSeesStateLimitsAndHistory();
    void changeFeedWakesOnEveryKindOfChange();

    // The strict store itself: proves that it does run functions twice (else the runs above
    // would prove nothing).
    void strictStoreRunsEveryFunctionTwice();

private:
    QuotaLimiter& limiter() { return *m_limiter; }
    // An acquire that may wait (deadline `within` from now on the manual clock), cancelled
    // after 30 s of real time should it wait where it must not (a Redis waiter looks every 5 s).
    static Result<Permit> acquireWithin(QuotaLimiter& limiter, const ManualClock& clock, const char* caller,
        std::chrono::milliseconds within, bool slot = false)
    {
        AdmitRequest r;
        r.provider = "p";
        r.caller = caller;
        r.wantsSlot = slot;
        std::atomic<bool> cancel { false };
        Watchdog watchdog(cancel, 30s);
        return limiter.acquire(r, clock.now() + within, &cancel);
    }
    // Polls the reader (up to 10 s) until the provider's queue holds `n` waiters.
    bool waitForQueue(std::size_t n)
    {
        for (int i = 0; i < 2000; ++i) {
            auto view = m_store.reader->snapshot();
            if (view.ok() && view->state && view->state->provider("p")
                && view->state->provider("p")->queue.size() == n)
                return true;
            std::this_thread::sleep_for(5ms);
        }
        return false;
    }
    bool gaveUp(const char* caller, const char* why)
    {
        auto batch = m_store.reader->history()->poll();
        return batch.ok()
            && std::any_of(batch->events.begin(), batch->events.end(), [&](const HistoryEvent& e) {
                   return e.type == EventType::GaveUp && e.caller == caller
                       && e.reason.find(why) != std::string::npos;
               });
    }
    Result<Permit> tryAcquire(const char* caller, std::int64_t tokens = 0, bool slot = false,
        const char* model = "", std::int64_t pid = 0)
    {
        AdmitRequest r;
        r.provider = "p";
        r.caller = caller;
        r.tokens = tokens;
        r.wantsSlot = slot;
        r.model = model;
        r.pid = pid;
        return m_limiter->acquire(r, m_clock.now());
    }
    static ProviderLimits requestsPerMinute(std::int64_t n)
    {
        ProviderLimits l;
        l.requests = n;
        l.windowMs = 60000;
        return l;
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    ManualClock m_clock { std::chrono::system_clock::now() };
    ProcessProbe m_probe;
    StoreUnderTest m_store;
    std::unique_ptr<QuotaLimiter> m_limiter;
    std::optional<HomeSpec> m_spec; // the file or Redis home (a second opener's way in)
    std::unique_ptr<RedisServer> m_redis; // started by the first Redis row, kept for the rest
    int m_homes = 0;
};

void TestQuotaLimiter::initTestCase_data()
{
    QTest::addColumn<QString>("kind");
    QTest::newRow("file") << QStringLiteral("file");
    QTest::newRow("memory") << QStringLiteral("memory");
    QTest::newRow("memory-strict") << QStringLiteral("memory-strict");
    QTest::newRow("redis") << QStringLiteral("redis");
}

void TestQuotaLimiter::init()
{
    QFETCH_GLOBAL(QString, kind);
    m_clock.set(std::chrono::system_clock::now());
    m_store = {};
    m_spec.reset();
    if (kind == QStringLiteral("file")) {
        m_dir = std::make_unique<QTemporaryDir>();
        QVERIFY(m_dir->isValid());
        auto spec = HomeSpec::parse(m_dir->path().toStdString() + "/home");
        QVERIFY(spec.ok());
        auto store = StoreFactory::openStore(*spec, m_clock);
        QVERIFY(store.ok());
        m_store.store = std::move(store).value();
        m_spec = *spec;
        auto reader = StoreFactory::openReader(*spec);
        QVERIFY(reader.ok());
        m_store.ownReader = std::move(reader).value();
        m_store.reader = m_store.ownReader.get();
    } else if (kind == QStringLiteral("redis")) {
        // A home of its own for each test: a prefix never used before on this server.
        const auto home = RedisServer::testHome(m_redis, QStringLiteral("t"), ++m_homes);
        if (!home.skip.isEmpty())
            QSKIP(qPrintable(home.skip));
        QVERIFY2(home.failure.isEmpty(), qPrintable(home.failure));
        auto spec = HomeSpec::parse(home.url);
        QVERIFY(spec.ok());
        auto backend = StoreFactory::openBackend(*spec, m_clock, m_probe, &m_clock);
        QVERIFY2(backend.ok(), backend.ok() ? "" : backend.error().describe().c_str());
        m_store.backend = std::move(backend).value();
        m_spec = *spec;
        auto reader = StoreFactory::openReader(*spec);
        QVERIFY(reader.ok());
        m_store.ownReader = std::move(reader).value();
        m_store.reader = m_store.ownReader.get();
    } else {
        auto memory = std::make_unique<MemoryQuotaStore>(kind == QStringLiteral("memory-strict"));
        m_store.reader = memory.get();
        m_store.store = std::move(memory);
    }
    m_limiter = m_store.backend ? std::make_unique<QuotaLimiter>(*m_store.backend, m_clock, m_probe)
                                : std::make_unique<QuotaLimiter>(*m_store.store, m_clock, m_probe);
    m_limiter->seedJitter(7);
}

void TestQuotaLimiter::cleanup()
{
    m_limiter.reset();
    m_store = {};
    m_dir.reset();
}

void TestQuotaLimiter::windowAdmitsThenRefusesUntilItMoves()
{
    QVERIFY(limiter().setLimits("p", requestsPerMinute(2), "test").ok());
    QVERIFY(tryAcquire("a").ok());
    QVERIFY(tryAcquire("b").ok());
    auto third = tryAcquire("c");
    QVERIFY(!third.ok());
    QCOMPARE(third.error().kind, ErrorKind::Timeout);
    QVERIFY(QString::fromStdString(third.error().message).contains(QStringLiteral("window")));
    m_clock.advance(30s);
    QVERIFY(!tryAcquire("c").ok()); // still inside the rolling window: no fixed-window reset
    m_clock.advance(33s); // the window plus the width of a bucket or two
    auto later = tryAcquire("c");
    QVERIFY2(later.ok(), later.ok() ? "" : later.error().message.c_str());
}

// Admissions made while the clock said 2200 (a wrong date, put right by NTP or by hand; the
// kernel's clock ends in 2262) are stamped in buckets of that year: counted from the first
// look after the correction, for one window, not until 2200. On every store (the Redis script
// mirrors RollingWindow::boundFuture).
void TestQuotaLimiter::aClockPutRightCostsOneWindowNotYears()
{
    QVERIFY(limiter().setLimits("p", requestsPerMinute(2), "test").ok());
    const auto right = m_clock.now();
    m_clock.set(
        std::chrono::system_clock::time_point(std::chrono::milliseconds(7258118400000))); // 2200-01-01
    for (const char* caller : { "a", "b" }) {
        auto admitted = tryAcquire(caller);
        QVERIFY2(admitted.ok(), admitted.ok() ? "" : admitted.error().describe().c_str());
    }
    m_clock.set(right);
    auto full = tryAcquire("c");
    QVERIFY(!full.ok()); // still counted: the window is full
    m_clock.advance(63s); // one window and a bucket or two
    auto later = tryAcquire("c");
    QVERIFY2(later.ok(), later.ok() ? "" : later.error().message.c_str());
}

void TestQuotaLimiter::tokensAndModelLimitsBothHold()
{
    ProviderLimits l = requestsPerMinute(100);
    l.tokens = 1000;
    ModelLimits big;
    big.requests = 1;
    l.models["big"] = big;
    QVERIFY(limiter().setLimits("p", l, "test").ok());
    QVERIFY(tryAcquire("a", 600).ok());
    auto over = tryAcquire("a", 500);
    QVERIFY(!over.ok());
    QVERIFY(QString::fromStdString(over.error().message).contains(QStringLiteral("tokens")));
    QVERIFY(tryAcquire("a", 400).ok());
    m_clock.advance(63s);
    QVERIFY(tryAcquire("a", 10, false, "big").ok());
    QVERIFY(!tryAcquire("a", 10, false, "big").ok()); // the model's own limit
    QVERIFY(tryAcquire("a", 10, false, "small").ok()); // another model: only the provider's
}

void TestQuotaLimiter::slotIsHeldUntilReleased()
{
    ProviderLimits l = requestsPerMinute(100);
    l.parallel = 1;
    QVERIFY(limiter().setLimits("p", l, "test").ok());
    auto first = tryAcquire("a", 0, true);
    QVERIFY(first.ok());
    QVERIFY(first->holdsSlot());
    auto second = tryAcquire("b", 0, true);
    QVERIFY(!second.ok());
    QVERIFY(QString::fromStdString(second.error().message).contains(QStringLiteral("slots")));
    QVERIFY(first->release().ok());
    QVERIFY(tryAcquire("b", 0, true).ok());
}

void TestQuotaLimiter::deadHolderIsReclaimed()
{
    ProviderLimits l = requestsPerMinute(100);
    l.parallel = 1;
    QVERIFY(limiter().setLimits("p", l, "test").ok());
    auto ghost = tryAcquire("ghost", 0, true, "", TestSupport::deadPid());
    QVERIFY(ghost.ok());
    ghost->detach(); // the "holder" is a process that has exited
    QVERIFY(tryAcquire("b", 0, true).ok());
}

void TestQuotaLimiter::backoffHonoursRetryAfterAndEnds()
{
    ProviderLimits l = requestsPerMinute(100);
    l.backoffBaseMs = 1000;
    QVERIFY(limiter().setLimits("p", l, "test").ok());
    auto backoff = limiter().report429("p", "a", 20000);
    QVERIFY(backoff.ok());
    QVERIFY(*backoff >= 20000);
    QVERIFY(*backoff <= 20000 + QuotaPolicy::MAX_JITTER_MS);
    auto blocked = tryAcquire("b");
    QVERIFY(!blocked.ok());
    QVERIFY(QString::fromStdString(blocked.error().message).contains(QStringLiteral("backoff")));
    // A second 429 doubles the exponential part; Retry-After still sets the floor.
    auto again = limiter().report429("p", "a", std::nullopt);
    QVERIFY(again.ok());
    m_clock.advance(std::chrono::milliseconds(QuotaPolicy::MAX_STOP_MS + 1));
    // After a backoff, admissions are paced; a later look finds the way open.
    bool admitted = false;
    for (int i = 0; i < 200 && !admitted; ++i) {
        admitted = tryAcquire("b").ok();
        m_clock.advance(1s);
    }
    QVERIFY(admitted);
}

void TestQuotaLimiter::pauseStopsEveryoneUntilResumed()
{
    QVERIFY(limiter().setLimits("p", requestsPerMinute(100), "test").ok());
    QVERIFY(limiter().pause("", "maintenance", "test").ok());
    auto paused = tryAcquire("a");
    QVERIFY(!paused.ok());
    QVERIFY(QString::fromStdString(paused.error().message).contains(QStringLiteral("paused")));
    QVERIFY(limiter().resume("", "test").ok());
    QVERIFY(tryAcquire("a").ok());
    QVERIFY(limiter().pause("p", "", "test").ok());
    QVERIFY(!tryAcquire("a").ok());
    QVERIFY(limiter().resume("p", "test").ok());
    QVERIFY(tryAcquire("a").ok());
}

void TestQuotaLimiter::fencesOnlyGrow()
{
    ProviderLimits l = requestsPerMinute(1000);
    l.parallel = 3;
    QVERIFY(limiter().setLimits("p", l, "test").ok());
    std::uint64_t last = 0;
    for (int i = 0; i < 30; ++i) {
        auto permit = tryAcquire("a", 0, i % 2 == 0);
        QVERIFY(permit.ok());
        QVERIFY(permit->fence() > last);
        last = permit->fence();
    }
}

void TestQuotaLimiter::limitsCompareAndSet()
{
    const ProviderLimits first = requestsPerMinute(10);
    QVERIFY(limiter().setLimits("p", first, "test").ok());
    std::optional<ProviderLimits> found;
    auto stale = limiter().setLimitsIf("p", requestsPerMinute(99), requestsPerMinute(20), "test", &found);
    QVERIFY(stale.ok());
    QVERIFY(!*stale);
    QVERIFY(found && *found == first);
    auto set = limiter().setLimitsIf("p", first, requestsPerMinute(20), "test");
    QVERIFY(set.ok());
    QVERIFY(*set);
    auto now = limiter().limits();
    QVERIFY(now.ok());
    QCOMPARE(now->find("p")->requests, std::optional<std::int64_t>(20));
}

void TestQuotaLimiter::importSetsEveryProviderInOneOperation()
{
    QVERIFY(limiter().setLimits("a", requestsPerMinute(1), "test").ok());
    QVERIFY(limiter().setLimits("b", requestsPerMinute(2), "test").ok());
    QuotaLimits incoming;
    QVERIFY(incoming.set("b", requestsPerMinute(20)).ok());
    QVERIFY(incoming.set("c", requestsPerMinute(30)).ok());
    auto merged = limiter().importLimits(incoming, false, "test");
    QVERIFY(merged.ok());
    QCOMPARE(merged->size(), std::size_t(2)); // b changed, c added; a untouched
    QVERIFY(limiter().limits()->find("a"));
    auto again = limiter().importLimits(incoming, true, "test");
    QVERIFY(again.ok());
    QCOMPARE(*again, std::vector<std::string> { "a" }); // only the removal: b and c are as given
    auto now = limiter().limits();
    QVERIFY(now.ok());
    QVERIFY(!now->find("a"));
    QCOMPARE(now->find("b")->requests, std::optional<std::int64_t>(20));
    QCOMPARE(now->find("c")->requests, std::optional<std::int64_t>(30));
}

void TestQuotaLimiter::unknownProviderIsRefused()
{
    QVERIFY(limiter().setLimits("known", requestsPerMinute(10), "test").ok());
    auto r = tryAcquire("a");
    QVERIFY(!r.ok());
    QVERIFY(QString::fromStdString(r.error().message).contains(QStringLiteral("known")));
}

void TestQuotaLimiter::releaseByFenceAndRenewTheLease()
{
    ProviderLimits l = requestsPerMinute(100);
    l.parallel = 1;
    QVERIFY(limiter().setLimits("p", l, "test").ok());
    auto permit = tryAcquire("a", 0, true);
    QVERIFY(permit.ok());
    const std::uint64_t fence = permit->fence();
    permit->detach(); // held by "the script", released by fence
    auto renewed = limiter().renewSlot("p", fence, 5000);
    QVERIFY(renewed.ok() && *renewed);
    auto snap = limiter().snapshot();
    QVERIFY(snap.ok());
    QCOMPARE(snap->state.provider("p")->slots.front().leaseUntilMs, snap->nowMs + 5000);
    QVERIFY(!tryAcquire("b", 0, true).ok());
    auto released = limiter().releaseSlot("p", fence, "test");
    QVERIFY(released.ok() && *released);
    auto twice = limiter().releaseSlot("p", fence, "test");
    QVERIFY(twice.ok() && !*twice); // already gone: said, not an error
    auto renewGone = limiter().renewSlot("p", fence, 5000);
    QVERIFY(renewGone.ok() && !*renewGone);
    QVERIFY(tryAcquire("b", 0, true).ok());
}

void TestQuotaLimiter::resetBackoffAndSuccessEndTheStreak()
{
    QVERIFY(limiter().setLimits("p", requestsPerMinute(100), "test").ok());
    QVERIFY(limiter().report429("p", "a", 30000).ok());
    QVERIFY(limiter().report429("p", "a", 30000).ok());
    QVERIFY(!tryAcquire("a").ok());
    QVERIFY(limiter().resetBackoff("p", "test").ok());
    QVERIFY(tryAcquire("a").ok()); // no backoff, no pacing
    QVERIFY(limiter().report429("p", "a", 1000).ok());
    QCOMPARE(limiter().snapshot()->state.provider("p")->consecutive429, 1);
    QVERIFY(limiter().reportSuccess("p", "a").ok());
    QCOMPARE(limiter().snapshot()->state.provider("p")->consecutive429, 0);
}

void TestQuotaLimiter::holdUntilStopsEveryoneUntilThenWithoutA429()
{
    // What the proxy does when the provider's headers say nothing is left until a time.
    QVERIFY(limiter().setLimits("p", requestsPerMinute(100), "test").ok());
    const std::int64_t now = limiter().snapshot()->nowMs;
    QVERIFY(limiter().holdUntil("p", now + 5000, "the provider reports nothing left\x1b[2J").ok());
    auto held = tryAcquire("a");
    QVERIFY(!held.ok());
    QCOMPARE(held.error().kind, ErrorKind::Timeout);
    QCOMPARE(limiter().snapshot()->state.provider("p")->consecutive429, 0); // not a 429
    // An earlier (or equal) time changes nothing and records nothing: every answer repeats it.
    QVERIFY(limiter().holdUntil("p", now + 3000, "again").ok());
    QVERIFY(limiter().holdUntil("p", now + 5000, "again").ok());
    const auto unknown = limiter().holdUntil("unknown", now + 1000, "x");
    QVERIFY(!unknown.ok()); // a provider without limits is refused, as everywhere
    auto batch = m_store.reader->history()->poll();
    QVERIFY(batch.ok());
    int holds = 0;
    for (const auto& e : batch->events) {
        if (e.type == EventType::Hold) {
            ++holds;
            QVERIFY(e.reason.find('\x1b') == std::string::npos);
            QCOMPARE(e.provider, std::string("p"));
        }
    }
    QCOMPARE(holds, 1);
    m_clock.advance(5001ms);
    QVERIFY(tryAcquire("a").ok()); // no pacing after a hold: the provider said when
    // A time at the end of time is bounded like one 429.
    QVERIFY(limiter().holdUntil("p", INT64_MAX, "for ever?").ok());
    const auto snap = limiter().snapshot();
    QVERIFY(snap->state.provider("p")->backoffUntilMs <= snap->nowMs + QuotaPolicy::MAX_STOP_MS);
}

// What the proxy does with the provider's own limits (its headers, per minute): kept in the
// state, a limit-mismatch event when a reported limit changes and differs from Tollgate's —
// once, not per answer — and not written again until it changes or a minute has passed.
void TestQuotaLimiter::providerReportedLimitsAreKeptAndAMismatchIsSaidOnce()
{
    ProviderLimits l = requestsPerMinute(60);
    l.tokens = 120000;
    l.windowMs = 120000; // 60 requests per 2 minutes: 30 a minute
    QVERIFY(limiter().setLimits("p", l, "test").ok());
    auto mismatches = [&] {
        std::vector<HistoryEvent> out;
        auto batch = m_store.reader->history()->poll();
        if (batch.ok()) {
            for (const auto& e : batch->events) {
                if (e.type == EventType::LimitMismatch)
                    out.push_back(e);
            }
        }
        return out;
    };
    auto reported = [&] { return *limiter().snapshot()->state.provider("p"); };
    // Whether the report was written; an error fails the test (as false never would).
    auto note = [&](std::int64_t requests, std::int64_t tokens) {
        auto r = limiter().noteReportedLimits("p", requests, tokens, "agent");
        if (!r)
            qWarning("noteReportedLimits: %s", r.error().describe().c_str());
        return r.ok() ? std::optional<bool>(*r) : std::nullopt;
    };

    // 40 requests/min against 60 per 2 minutes: differs. 60,000 tokens/min = 120,000 per 2 min.
    auto first = limiter().noteReportedLimits("p", 40, 60000, "agent\x1b[2J");
    QVERIFY2(first.ok(), first ? "" : first.error().describe().c_str());
    QVERIFY(*first);
    QCOMPARE(reported().reportedRequests, std::int64_t(40));
    QCOMPARE(reported().reportedTokens, std::int64_t(60000));
    const std::int64_t at = reported().reportedAtMs;
    QVERIFY(at > 0);
    auto events = mismatches();
    QCOMPARE(events.size(), std::size_t(1));
    QCOMPARE(
        events[0].reason, std::string("provider reports 40 requests/min; Tollgate is set to 60 per 120 s"));
    QCOMPARE(events[0].provider, std::string("p"));
    QVERIFY(events[0].caller.find('\x1b') == std::string::npos);

    // The same again: nothing written, nothing said. Not in the answer (-1): what is kept stays.
    QCOMPARE(note(40, 60000), std::optional<bool>(false));
    QCOMPARE(note(-1, -1), std::optional<bool>(false));
    QCOMPARE(reported().reportedAtMs, at);
    // A minute later the same report is written again (still reported), without a new event.
    m_clock.advance(std::chrono::milliseconds(LimitMismatch::REFRESH_MS));
    QCOMPARE(note(40, -1), std::optional<bool>(true));
    QVERIFY(reported().reportedAtMs > at);
    QCOMPARE(reported().reportedTokens, std::int64_t(60000));
    QCOMPARE(mismatches().size(), std::size_t(1));

    // What status and the dashboard show (Capacity), from the same state.
    auto snap = limiter().snapshot();
    const ProviderCapacity cap = Capacity::forProvider(snap->state, "p", snap->limits.find("p"), snap->nowMs);
    QCOMPARE(cap.limitNotices.size(), std::size_t(1));
    QCOMPARE(cap.limitNotices[0], events[0].reason);

    // The provider changes its mind: a new event per budget that now differs.
    QCOMPARE(note(30, 50000), std::optional<bool>(true));
    events = mismatches();
    QCOMPARE(events.size(), std::size_t(2));
    QCOMPARE(events[1].reason,
        std::string("provider reports 50000 tokens/min; Tollgate is set to 120000 per 120 s"));
    // Tollgate set to match: the notice goes, without any report.
    l.tokens = 100000;
    QVERIFY(limiter().setLimits("p", l, "test").ok());
    snap = limiter().snapshot();
    QVERIFY(
        Capacity::forProvider(snap->state, "p", snap->limits.find("p"), snap->nowMs).limitNotices.empty());

    // A huge figure is kept bounded; an unknown provider is refused as everywhere.
    QCOMPARE(note(INT64_MAX, -1), std::optional<bool>(true));
    QCOMPARE(reported().reportedRequests, LimitMismatch::MAX_REPORTED);
    QVERIFY(!limiter().noteReportedLimits("unknown", 1, 1, "agent").ok());
}

void TestQuotaLimiter::realUsageReplacesTheEstimate()
{
    ProviderLimits l = requestsPerMinute(100);
    l.tokens = 1000;
    ModelLimits m;
    m.tokens = 1000;
    l.models["m"] = m;
    QVERIFY(limiter().setLimits("p", l, "test").ok());
    auto first = tryAcquire("a", 900, false, "m");
    QVERIFY(first.ok());
    QVERIFY(!tryAcquire("a", 200, false, "m").ok()); // the estimate fills the window
    // The answer said 150 were used: the window (provider and model) counts 150, not 900.
    QVERIFY(limiter().correctTokens("p", "m", first->admittedAtMs(), 900, 150).ok());
    auto snap = limiter().snapshot();
    QVERIFY(snap.ok());
    QCOMPARE(snap->state.provider("p")->scope("")->window.usage(snap->nowMs).tokens, std::int64_t(150));
    QCOMPARE(snap->state.provider("p")->scope("m")->window.usage(snap->nowMs).tokens, std::int64_t(150));
    QVERIFY(tryAcquire("a", 800, false, "m").ok());
    // More than estimated counts too; a correction from the future changes nothing.
    QVERIFY(limiter().correctTokens("p", "", first->admittedAtMs(), 0, 40).ok());
    QVERIFY(limiter().correctTokens("p", "", snap->nowMs + 60000, 900, 0).ok());
    snap = limiter().snapshot();
    QCOMPARE(snap->state.provider("p")->scope("")->window.usage(snap->nowMs).tokens, std::int64_t(990));
    QCOMPARE(snap->state.provider("p")->scope("m")->window.usage(snap->nowMs).tokens, std::int64_t(950));
}

void TestQuotaLimiter::finishEndsTheCallInOneStep()
{
    ProviderLimits l = requestsPerMinute(100);
    l.tokens = 2000;
    l.parallel = 1;
    ModelLimits m;
    m.tokens = 2000;
    l.models["m"] = m;
    QVERIFY(limiter().setLimits("p", l, "test").ok());
    QVERIFY(limiter().report429("p", "x", 1).ok());
    m_clock.advance(std::chrono::minutes(5)); // past the backoff and the careful pace after it
    auto withSlot = tryAcquire("a", 900, true, "m");
    QVERIFY(withSlot.ok());
    QVERIFY(withSlot->holdsSlot());
    QVERIFY(!tryAcquire("b", 1, true).ok()); // the one slot is taken
    // The answer used 150 and succeeded: slot, usage and the 429 streak end together.
    QVERIFY(withSlot->finish(150, true).ok());
    QVERIFY(!withSlot->holdsSlot());
    auto snap = limiter().snapshot();
    QVERIFY(snap.ok());
    const ProviderState* p = snap->state.provider("p");
    QVERIFY(p->slots.empty());
    QCOMPARE(p->consecutive429, 0);
    QCOMPARE(p->scope("")->window.usage(snap->nowMs).tokens, std::int64_t(150));
    QCOMPARE(p->scope("m")->window.usage(snap->nowMs).tokens, std::int64_t(150));
    QVERIFY(withSlot->finish(5000, true).ok()); // once only: a second finish changes nothing
    QCOMPARE(limiter().snapshot()->state.provider("p")->scope("")->window.usage(snap->nowMs).tokens,
        std::int64_t(150));
    // An admission without a slot: the correction goes by what the permit itself counted;
    // a failure (-1: usage unknown) leaves the estimate and records no success.
    auto noSlot = tryAcquire("c", 700, false, "m");
    QVERIFY(noSlot.ok());
    QVERIFY(!noSlot->holdsSlot());
    QVERIFY(noSlot->finish(100, false).ok());
    auto unknown = tryAcquire("d", 300, false, "m");
    QVERIFY(unknown.ok());
    QVERIFY(unknown->finish(-1, false).ok());
    snap = limiter().snapshot();
    QCOMPARE(snap->state.provider("p")->scope("m")->window.usage(snap->nowMs).tokens,
        std::int64_t(150 + 100 + 300));
    auto batch = m_store.reader->history()->poll();
    QVERIFY(batch.ok());
    QStringList seen;
    for (const auto& e : batch->events) {
        if (e.type == EventType::Release || e.type == EventType::Ok)
            seen << QString::fromStdString(std::string(eventTypeName(e.type)) + ":" + e.caller);
    }
    QCOMPARE(seen, QStringList({ QStringLiteral("release:a"), QStringLiteral("ok:a") }));
}

void TestQuotaLimiter::removedProviderIsForgotten()
{
    QVERIFY(limiter().setLimits("p", requestsPerMinute(1), "test").ok());
    QVERIFY(tryAcquire("a").ok());
    QVERIFY(limiter().removeLimits("p", "test").ok());
    QVERIFY(!limiter().limits()->find("p"));
    QVERIFY(!limiter().snapshot()->state.provider("p"));
    QVERIFY(!tryAcquire("a").ok()); // unknown now
    auto again = limiter().removeLimits("p", "test");
    QVERIFY(!again.ok());
    QCOMPARE(again.error().kind, ErrorKind::Usage);
    // Set again: a fresh window, not the old one.
    QVERIFY(limiter().setLimits("p", requestsPerMinute(1), "test").ok());
    QVERIFY(tryAcquire("a").ok());
}

void TestQuotaLimiter::recordedEventsReachTheHistory()
{
    HistoryEvent e;
    e.timeMs = 12345;
    e.type = EventType::LockRelease;
    e.reason = "deploy.lock";
    QVERIFY(limiter().record({ e }).ok());
    auto batch = m_store.reader->history()->poll();
    QVERIFY(batch.ok());
    QCOMPARE(batch->events.size(), std::size_t(1));
    QCOMPARE(batch->events[0].type, EventType::LockRelease);
    QCOMPARE(batch->events[0].reason, std::string("deploy.lock"));
}

void TestQuotaLimiter::waiterKeepsItsPlaceAndLeavesOnGivingUp()
{
    // A waiter (deadline in the future) is queued; giving up (cancel) takes it out again and
    // records why, so the next caller is not stuck behind a ghost. The waiter runs on a thread;
    // this thread looks through the reader only (the store object is the waiter's).
    QVERIFY(limiter().setLimits("p", requestsPerMinute(1), "test").ok());
    QVERIFY(tryAcquire("a").ok());
    std::atomic<bool> cancel { false };
    Result<Permit> waited = Error::make(ErrorKind::Io, "", "not run");
    std::thread waiter([&] {
        AdmitRequest r;
        r.provider = "p";
        r.caller = "patient";
        // Past the window's end (a bucket or two after 60 s): a wait that room ends in time.
        waited = limiter().acquire(r, m_clock.now() + 120s, &cancel);
    });
    bool queued = false;
    for (int i = 0; i < 2000 && !queued; ++i) { // poll with a deadline (10 s)
        auto view = m_store.reader->snapshot();
        queued = view.ok() && view->state && view->state->provider("p")
            && view->state->provider("p")->queue.size() == 1;
        if (!queued)
            std::this_thread::sleep_for(5ms);
    }
    cancel = true;
    waiter.join();
    QVERIFY(queued);
    QVERIFY(!waited.ok());
    QCOMPARE(waited.error().kind, ErrorKind::Timeout);
    QVERIFY(QString::fromStdString(waited.error().message).contains(QStringLiteral("cancelled")));
    auto view = m_store.reader->snapshot();
    QVERIFY(view.ok() && view->state);
    QVERIFY(view->state->provider("p")->queue.empty());
    auto batch = m_store.reader->history()->poll();
    QVERIFY(batch.ok());
    QVERIFY(std::any_of(batch->events.begin(), batch->events.end(), [](const HistoryEvent& e) {
        return e.type == EventType::GaveUp && e.caller == "patient"
            && e.reason.find("cancelled") != std::string::npos;
    }));
}

// Issue 25 item 6: a full window whose room comes after the deadline is answered at once,
// naming when the room comes, instead of holding the caller until its deadline.
void TestQuotaLimiter::roomAfterTheDeadlineIsRefusedAtOnceNamingTheTime()
{
    QVERIFY(limiter().setLimits("p", requestsPerMinute(1), "test").ok());
    QVERIFY(tryAcquire("a").ok());
    const std::int64_t admittedAt = m_clock.unixMs();
    auto refused = acquireWithin(limiter(), m_clock, "late", 5s);
    QVERIFY(!refused.ok());
    QCOMPARE(refused.error().kind, ErrorKind::Timeout);
    QVERIFY(refused.error().path.empty());
    const QString message = QString::fromStdString(refused.error().message);
    QVERIFY2(message.contains(QStringLiteral("past this call's deadline")), qPrintable(message));
    QVERIFY2(message.contains(QStringLiteral("provider 'p' has no room before ")), qPrintable(message));
    QVERIFY2(message.contains(QStringLiteral("window")), qPrintable(message));
    const QuotaLimiter::Refusal& why = limiter().lastRefusal();
    QVERIFY(why.early);
    QVERIFY(!why.paused);
    QCOMPARE(why.reason, WaitReason::Window);
    QVERIFY(why.earliestMs.has_value());
    // When the admission leaves the window: a minute after it (plus a bucket or two).
    QVERIFY2(*why.earliestMs >= admittedAt + 60000 && *why.earliestMs <= admittedAt + 65000,
        qPrintable(QString::number(*why.earliestMs - admittedAt)));
    // The time is named as the clock reads it (UTC).
    const std::time_t t = static_cast<std::time_t>(*why.earliestMs / 1000);
    std::tm tm {};
    ::gmtime_r(&t, &tm);
    char hms[16];
    std::strftime(hms, sizeof hms, "%H:%M:%S UTC", &tm);
    QVERIFY2(message.contains(QString::fromLatin1(hms)), qPrintable(message));
    // Out of the queue again, and recorded as a deadline's giving up is.
    auto view = m_store.reader->snapshot();
    QVERIFY(view.ok() && view->state && view->state->provider("p"));
    QVERIFY(view->state->provider("p")->queue.empty());
    QVERIFY(gaveUp("late", "no room before the deadline"));

    // A backoff that outlasts the deadline is judged the same way.
    m_clock.advance(70s);
    QVERIFY(limiter().report429("p", "a", 600000).ok());
    auto backedOff = acquireWithin(limiter(), m_clock, "late", 5s);
    QVERIFY(!backedOff.ok());
    QVERIFY2(QString::fromStdString(backedOff.error().message).contains(QStringLiteral("backoff")),
        backedOff.error().message.c_str());
    QCOMPARE(limiter().lastRefusal().reason, WaitReason::Backoff);
    QVERIFY(limiter().lastRefusal().earliestMs >= m_clock.unixMs() + 600000);
}

// The room comes before the deadline: the caller waits for it and is admitted.
void TestQuotaLimiter::roomBeforeTheDeadlineIsWaitedFor()
{
    QVERIFY(limiter().setLimits("p", requestsPerMinute(1), "test").ok());
    QVERIFY(tryAcquire("a").ok());
    Result<Permit> waited = Error::make(ErrorKind::Io, "", "not run");
    std::thread waiter([&] { waited = acquireWithin(limiter(), m_clock, "patient", 120s); });
    const bool queued = waitForQueue(1);
    m_clock.advance(66s); // the window and a bucket or two: room
    waiter.join();
    QVERIFY(queued);
    QVERIFY2(waited.ok(), waited.ok() ? "" : waited.error().message.c_str());
}

// A queue ahead has no known end (the one ahead may be admitted any moment): waited for until
// the deadline, as before.
void TestQuotaLimiter::aQueueAheadIsWaitedFor()
{
    // The second caller has a store connection of its own, as another process would (the
    // memory store is one object, safe to share between threads).
    std::unique_ptr<QuotaStore> otherStore;
    std::unique_ptr<QuotaBackend> otherBackend;
    if (m_store.backend) {
        auto b = StoreFactory::openBackend(*m_spec, m_clock, m_probe, &m_clock);
        QVERIFY(b.ok());
        otherBackend = std::move(b).value();
    } else if (m_spec) {
        auto st = StoreFactory::openStore(*m_spec, m_clock);
        QVERIFY(st.ok());
        otherStore = std::move(st).value();
    }
    QuotaLimiter behind = otherBackend
        ? QuotaLimiter(*otherBackend, m_clock, m_probe)
        : QuotaLimiter(otherStore ? *otherStore : *m_store.store, m_clock, m_probe);
    QVERIFY(limiter().setLimits("p", requestsPerMinute(1), "test").ok());
    QVERIFY(tryAcquire("a").ok());
    Result<Permit> first = Error::make(ErrorKind::Io, "", "not run");
    std::thread ahead([&] { first = acquireWithin(limiter(), m_clock, "first", 120s); });
    const bool firstQueued = waitForQueue(1);
    Result<Permit> second = Error::make(ErrorKind::Io, "", "not run");
    std::thread secondThread([&] { second = acquireWithin(behind, m_clock, "second", 5s); });
    const bool secondQueued = waitForQueue(2);
    m_clock.advance(6s); // past the second's deadline, not the first's
    secondThread.join();
    m_clock.advance(60s);
    ahead.join();
    QVERIFY(firstQueued);
    QVERIFY(secondQueued);
    QVERIFY(!second.ok());
    const QString message = QString::fromStdString(second.error().message);
    QVERIFY2(message.contains(QStringLiteral("timed out waiting")), qPrintable(message));
    QVERIFY2(message.contains(QStringLiteral("queue")), qPrintable(message));
    QVERIFY(!behind.lastRefusal().early);
    QVERIFY(!behind.lastRefusal().earliestMs);
    QVERIFY2(first.ok(), first.ok() ? "" : first.error().message.c_str());
}

// Held slots have no known end either: waited for until the deadline.
void TestQuotaLimiter::heldSlotsAreWaitedFor()
{
    ProviderLimits l = requestsPerMinute(100);
    l.parallel = 1;
    QVERIFY(limiter().setLimits("p", l, "test").ok());
    auto held = tryAcquire("holder", 0, true);
    QVERIFY(held.ok());
    Result<Permit> waited = Error::make(ErrorKind::Io, "", "not run");
    std::thread waiter([&] { waited = acquireWithin(limiter(), m_clock, "patient", 5s, true); });
    const bool queued = waitForQueue(1);
    m_clock.advance(6s);
    waiter.join();
    QVERIFY(queued);
    QVERIFY(!waited.ok());
    const QString message = QString::fromStdString(waited.error().message);
    QVERIFY2(message.contains(QStringLiteral("timed out waiting")), qPrintable(message));
    QVERIFY2(message.contains(QStringLiteral("slots")), qPrintable(message));
    QVERIFY(!limiter().lastRefusal().early);
    QVERIFY(gaveUp("patient", "slots (deadline)"));
}

// A pause cannot end by waiting (issue 26 item 3): refused at once with its reason.
void TestQuotaLimiter::aPauseIsRefusedAtOnce()
{
    QVERIFY(limiter().setLimits("p", requestsPerMinute(100), "test").ok());
    QVERIFY(limiter().pause("p", "maintenance", "ops").ok());
    auto paused = acquireWithin(limiter(), m_clock, "patient", 60s);
    QVERIFY(!paused.ok());
    QCOMPARE(paused.error().kind, ErrorKind::Timeout);
    QVERIFY(paused.error().path.empty());
    QVERIFY2(paused.error().message.find("provider 'p' is paused: maintenance") != std::string::npos,
        paused.error().message.c_str());
    QVERIFY(limiter().lastRefusal().paused);
    QVERIFY(limiter().lastRefusal().early);
    QVERIFY(!limiter().lastRefusal().earliestMs);
    QCOMPARE(limiter().lastRefusal().pauseReason, std::string("maintenance"));
    QVERIFY(gaveUp("patient", "paused (no known end)"));
    QVERIFY(limiter().resume("p", "ops").ok());
    QVERIFY(limiter().pause("", "deploy", "ops").ok());
    auto all = acquireWithin(limiter(), m_clock, "patient", 60s);
    QVERIFY(!all.ok());
    QVERIFY2(all.error().message.find("everything is paused: deploy") != std::string::npos,
        all.error().message.c_str());
    QVERIFY(limiter().resume("", "ops").ok());
    QVERIFY(acquireWithin(limiter(), m_clock, "patient", 60s).ok());
}

void TestQuotaLimiter::releaseStaleCountsEachHolderOnce()
{
    ProviderLimits l = requestsPerMinute(100);
    l.parallel = 5;
    QVERIFY(limiter().setLimits("p", l, "test").ok());
    auto ghost = tryAcquire("ghost", 0, true, "", TestSupport::deadPid());
    QVERIFY(ghost.ok());
    ghost->detach(); // the "holder" is a process that has exited
    auto n = limiter().releaseStale(false, "test");
    QVERIFY(n.ok());
    QCOMPARE(*n, 1);
}

void TestQuotaLimiter::jitterIsDrawnOncePerReport()
{
    // The same seed gives the same backoffs on every store: a store that runs the function
    // twice must not draw the jitter twice.
    QVERIFY(limiter().setLimits("p", requestsPerMinute(100), "test").ok());
    MemoryQuotaStore reference;
    QuotaLimiter expected(reference, m_clock, m_probe);
    expected.seedJitter(7);
    QVERIFY(expected.setLimits("p", requestsPerMinute(100), "test").ok());
    for (int i = 0; i < 3; ++i) {
        QVERIFY(limiter().report429("p", "a", 60000).ok());
        QVERIFY(expected.report429("p", "a", 60000).ok());
        auto got = limiter().snapshot();
        auto want = expected.snapshot();
        QVERIFY(got.ok() && want.ok());
        // The end of the backoff holds the jitter (the returned backoff does not).
        QCOMPARE(got->state.provider("p")->backoffUntilMs, want->state.provider("p")->backoffUntilMs);
        m_clock.advance(std::chrono::milliseconds(QuotaPolicy::MAX_STOP_MS + 1));
    }
}

void TestQuotaLimiter::readerSeesStateLimitsAndHistory()
{
    auto before = m_store.reader->snapshot();
    QVERIFY(before.ok());
    QVERIFY(before->limits.providers().empty());
    QVERIFY(limiter().setLimits("p", requestsPerMinute(5), "test").ok());
    QVERIFY(tryAcquire("a", 0).ok());
    QVERIFY(limiter().report429("p", "a", 1000).ok());
    QVERIFY(limiter().pause("", "why", "test").ok());

    auto view = m_store.reader->snapshot();
    QVERIFY(view.ok());
    QVERIFY(view->corruptFile.empty());
    QVERIFY(view->limits.find("p"));
    QVERIFY(view->state);
    QVERIFY(view->state->pausedAll);
    QCOMPARE(view->state->provider("p")->consecutive429, 1);

    auto cursor = m_store.reader->history();
    auto batch = cursor->poll();
    QVERIFY(batch.ok());
    std::vector<EventType> types;
    for (const auto& e : batch->events)
        types.push_back(e.type);
    const std::vector<EventType> want { EventType::Limits, EventType::Admit, EventType::RateLimited,
        EventType::Pause };
    QVERIFY2(types == want, QByteArray::number(static_cast<qulonglong>(types.size())).constData());
    auto none = cursor->poll();
    QVERIFY(none.ok());
    QVERIFY(none->events.empty()); // each event once
    QVERIFY(limiter().resume("", "test").ok());
    auto next = cursor->poll();
    QVERIFY(next.ok());
    QCOMPARE(next->events.size(), std::size_t(1));
    QCOMPARE(next->events[0].type, EventType::Resume);
}

void TestQuotaLimiter::changeFeedWakesOnEveryKindOfChange()
{
    auto feed = m_store.reader->subscribe();
    QVERIFY2(feed.ok(), feed.ok() ? "" : feed.error().describe().c_str());
    auto readable = [&](int timeoutMs) {
        pollfd p { (*feed)->fd(), POLLIN, 0 };
        return ::poll(&p, 1, timeoutMs) == 1 && (p.revents & POLLIN);
    };
    (void)(*feed)->drain();
    QVERIFY(!readable(0));
    const std::vector<std::function<bool()>> changes {
        [&] { return limiter().setLimits("p", requestsPerMinute(5), "test").ok(); },
        [&] { return tryAcquire("a").ok(); },
        [&] { return limiter().report429("p", "a", 1000).ok(); },
        [&] { return limiter().pause("", "", "test").ok(); },
        [&] { return limiter().resume("", "test").ok(); },
    };
    for (std::size_t i = 0; i < changes.size(); ++i) {
        QVERIFY(changes[i]());
        QVERIFY2(readable(10000), QByteArray::number(static_cast<qulonglong>(i)).constData());
        QVERIFY((*feed)->drain());
        QVERIFY(!readable(0)); // drained: no busy loop for the one who waits on it
    }
}

void TestQuotaLimiter::strictStoreRunsEveryFunctionTwice()
{
    MemoryQuotaStore strict(true);
    int runs = 0;
    QVERIFY(strict
                .transact([&runs](QuotaTransaction&) -> Result<void> {
                    ++runs;
                    return {};
                })
                .ok());
    QCOMPARE(runs, 2);
    QCOMPARE(strict.functionRuns(), std::uint64_t(2));
    // ... and the first run's changes are thrown away: only the last run commits.
    QVERIFY(strict
                .transact([](QuotaTransaction& tx) -> Result<void> {
                    tx.state.nextFence += 10;
                    tx.changed = true;
                    return {};
                })
                .ok());
    auto view = strict.snapshot();
    QVERIFY(view.ok() && view->state);
    QCOMPARE(view->state->nextFence, std::uint64_t(11));
}

QTEST_APPLESS_MAIN(TestQuotaLimiter)
#include "tst_quotalimiter.moc"
