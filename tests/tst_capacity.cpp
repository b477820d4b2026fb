// Capacity: "can my next call go now?" from a known state at a fixed clock, and agreement
// with what QuotaLimiter::acquire decides on a real FileQuotaStore.

#include "backend/quotalimiter.h"
#include "base/manualclock.h"
#include "quota/capacity.h"
#include "quota/limitmismatch.h"
#include "store/filequotastore.h"

#include <QTemporaryDir>
#include <QTest>
#include <random>

using namespace tollgate;

namespace {

// 32 s windows have 1 s buckets (RollingWindow::BUCKETS = 32): times in the tests are exact.
constexpr std::int64_t WINDOW_MS = 32000;
constexpr std::int64_t T0 = 1'000'000'000'000; // a bucket edge

class FakeProbe final : public ProcessProbe
{
public:
    Liveness liveness(std::int64_t pid, std::optional<std::int64_t>) const override
    {
        return pid == m_dead ? Liveness::Dead : Liveness::Alive;
    }
    Liveness holderLiveness(std::int64_t pid, std::uint64_t) const override
    {
        return pid == m_dead ? Liveness::Dead : Liveness::Alive;
    }
    bool exists(std::int64_t pid) const override { return pid != m_dead; }
    std::uint64_t pidNamespace() const override { return NS; }
    std::int64_t m_dead = -1;
    static constexpr std::uint64_t NS = 4026531836;
};

AdmitRequest call(std::int64_t tokens = 1, bool slot = false, std::int64_t pid = 100)
{
    AdmitRequest r;
    r.provider = "p";
    r.caller = "c";
    r.tokens = tokens;
    r.wantsSlot = slot;
    r.pid = pid;
    r.pidNs = FakeProbe::NS;
    return r;
}

} // namespace

class TestCapacity final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void fullWindowSaysWhenTheNextRequestFrees();
    void backoffGivesItsRemainingTime();
    void pauseBlocksWithItsReason();
    void slotsInUseAndFree();
    void tokensLeftAndWhenTheyFree();
    void noLimitsIsOk();
    void headroomIsAppliedAsTheLimiterDoes();
    void modelWindowsAreFiguredToo();
    void stateFromTheFutureStaysBounded();
    void queuedCallersBlockANewcomer();
    void computeListsEveryProvider();
    void providerLimitsThatDifferAreNoticed();
    void agreesWithTheLimiter();

private:
    void admit(const AdmitRequest& r, std::int64_t nowMs);
    [[nodiscard]] ProviderCapacity at(std::int64_t nowMs, const ProcessProbe* probe = nullptr) const
    {
        return Capacity::forProvider(m_state, "p", &m_limits, nowMs, probe);
    }

    QuotaState m_state;
    ProviderLimits m_limits;
};

void TestCapacity::init()
{
    m_state = QuotaState {};
    m_limits = ProviderLimits {};
    m_limits.windowMs = WINDOW_MS;
}

void TestCapacity::admit(const AdmitRequest& r, std::int64_t nowMs)
{
    ProviderState& p = m_state.ensureProvider("p");
    QuotaPolicy::syncProvider(p, m_limits, nowMs);
    auto d = QuotaPolicy::admit(m_state, p, m_limits, r, 0, nowMs, false);
    QVERIFY(d.ok());
    QVERIFY2(d->admitted, waitReasonName(d->reason));
}

void TestCapacity::fullWindowSaysWhenTheNextRequestFrees()
{
    m_limits.requests = 3;
    admit(call(), T0); // bucket T0/1000, which stops counting at T0 + 1 s + 32 s
    admit(call(), T0 + 5000);
    admit(call(), T0 + 9000);

    const auto c = at(T0 + 10000);
    QCOMPARE(c.window.requestLimit, std::optional<std::int64_t>(3));
    QCOMPARE(c.window.requestsUsed, 3);
    QCOMPARE(c.window.requestsLeft, std::optional<std::int64_t>(0));
    QCOMPARE(c.window.nextRequestInMs, 23000); // T0 + 33 s − (T0 + 10 s)
    QCOMPARE(c.window.requestsPercent, 100);
    QCOMPARE(c.level, CapacityLevel::Blocked);
    QCOMPARE(c.blockedBy, WaitReason::Window);
    QCOMPARE(c.blockedUntilMs, std::optional<std::int64_t>(T0 + 33000));
    QCOMPARE(c.nextCallInMs, 23000);

    // One ms before the oldest leaves: still blocked; at that instant: one left, not blocked.
    QCOMPARE(at(T0 + 32999).window.nextRequestInMs, 1);
    const auto freed = at(T0 + 33000);
    QCOMPARE(freed.window.requestsLeft, std::optional<std::int64_t>(1));
    QCOMPARE(freed.window.nextRequestInMs, 0);
    QCOMPARE(freed.level, CapacityLevel::Ok); // 2 of 3 = 66 %
    QCOMPARE(freed.blockedUntilMs, std::nullopt);
    QCOMPARE(freed.nextCallInMs, 0);
}

void TestCapacity::backoffGivesItsRemainingTime()
{
    m_limits.requests = 100;
    m_limits.backoffBaseMs = 60000;
    ProviderState& p = m_state.ensureProvider("p");
    QuotaPolicy::syncProvider(p, m_limits, T0);
    QuotaPolicy::apply429(p, m_limits, T0 - 60000, std::nullopt, 0);
    // The next step of the storm (the first backoff has ended): 120 s.
    QuotaPolicy::apply429(p, m_limits, T0, std::nullopt, 0);

    const auto c = at(T0 + 15000);
    QCOMPARE(c.backoffRemainingMs, 105000);
    QCOMPARE(c.consecutive429, 2);
    QCOMPARE(c.level, CapacityLevel::Blocked);
    QCOMPARE(c.blockedBy, WaitReason::Backoff);
    QCOMPARE(c.blockedUntilMs, std::optional<std::int64_t>(T0 + 120000));
    QCOMPARE(c.nextCallInMs, 105000);

    // After the backoff: the first call goes at once; then the pacing spreads the restart.
    const auto after = at(T0 + 120000);
    QCOMPARE(after.backoffRemainingMs, 0);
    QCOMPARE(after.level, CapacityLevel::Ok);
    QCOMPARE(after.paceRemainingMs, WINDOW_MS);
    admit(call(), T0 + 120000);
    const auto paced = at(T0 + 120001);
    QCOMPARE(paced.level, CapacityLevel::Blocked);
    QCOMPARE(paced.blockedBy, WaitReason::Backoff);
    QCOMPARE(paced.blockedUntilMs, std::optional<std::int64_t>(T0 + 120000 + WINDOW_MS / 100));
}

void TestCapacity::pauseBlocksWithItsReason()
{
    m_limits.requests = 10;
    ProviderState& p = m_state.ensureProvider("p");
    p.paused = true;
    p.pauseReason = "maintenance (by ops)";
    p.pausedAtMs = T0;

    auto c = at(T0 + 4000);
    QVERIFY(c.paused);
    QVERIFY(!c.pausedAll);
    QCOMPARE(c.pauseReason, std::string("maintenance (by ops)"));
    QCOMPARE(c.pausedForMs, 4000);
    QCOMPARE(c.level, CapacityLevel::Blocked);
    QCOMPARE(c.blockedBy, WaitReason::Paused);
    QCOMPARE(c.blockedUntilMs, std::nullopt); // no time ends a pause
    QCOMPARE(c.nextCallInMs, Capacity::NEVER);

    p.paused = false;
    p.pauseReason.clear();
    m_state.pausedAll = true;
    m_state.pauseReason = "by alice";
    m_state.pausedAtMs = T0 + 1000;
    c = at(T0 + 4000);
    QVERIFY(c.paused);
    QVERIFY(c.pausedAll);
    QCOMPARE(c.pauseReason, std::string("by alice"));
    QCOMPARE(c.pausedForMs, 3000);
    QCOMPARE(c.level, CapacityLevel::Blocked);
}

void TestCapacity::slotsInUseAndFree()
{
    m_limits.parallel = 2;
    admit(call(1, true, 100), T0);
    auto c = at(T0);
    QCOMPARE(c.slotLimit, std::optional<std::int64_t>(2));
    QCOMPARE(c.slotsInUse, 1);
    QCOMPARE(c.slotsFree, std::optional<std::int64_t>(1));
    QCOMPARE(c.level, CapacityLevel::Ok); // 50 %

    admit(call(1, true, 200), T0);
    c = at(T0);
    QCOMPARE(c.slotsInUse, 2);
    QCOMPARE(c.slotsFree, std::optional<std::int64_t>(0));
    QCOMPARE(c.slotsPercent, 100);
    QCOMPARE(c.level, CapacityLevel::Blocked);
    QCOMPARE(c.blockedBy, WaitReason::Slots);
    QCOMPARE(c.blockedUntilMs, std::nullopt); // live holders: no set time
    QCOMPARE(c.nextCallInMs, Capacity::NEVER);

    // With a probe, a dead holder's slot counts as free, as acquire would reclaim it.
    FakeProbe probe;
    probe.m_dead = 200;
    c = at(T0, &probe);
    QCOMPARE(c.slotsInUse, 1);
    QCOMPARE(c.level, CapacityLevel::Ok);
    // The stored state is not touched.
    QCOMPARE(m_state.provider("p")->slots.size(), std::size_t(2));

    // Placeholders after a lost state expire after the longest a live holder may go without
    // renewing (placeholderHoldMs): a time-bound block.
    m_state = QuotaState {};
    QuotaPolicy::fillConservatively(m_state.ensureProvider("p"), m_limits, T0);
    c = at(T0 + 2000);
    QCOMPARE(c.slotsInUse, 2);
    QCOMPARE(c.blockedBy, WaitReason::Slots);
    const std::int64_t hold = QuotaPolicy::placeholderHoldMs(m_limits);
    QCOMPARE(c.blockedUntilMs, std::optional<std::int64_t>(T0 + hold));
    QCOMPARE(c.nextCallInMs, hold - 2000);
}

void TestCapacity::tokensLeftAndWhenTheyFree()
{
    m_limits.tokens = 1000;
    admit(call(900), T0);
    auto c = at(T0 + 3000);
    QCOMPARE(c.window.tokenLimit, std::optional<std::int64_t>(1000));
    QCOMPARE(c.window.tokensUsed, 900);
    QCOMPARE(c.window.tokensLeft, std::optional<std::int64_t>(100));
    QCOMPARE(c.window.tokensPercent, 90);
    QCOMPARE(c.window.tokensFreeInMs, 0);
    QCOMPARE(c.window.requestsLeft, std::nullopt);
    QCOMPARE(c.level, CapacityLevel::Near);

    admit(call(100), T0 + 3000);
    c = at(T0 + 4000);
    QCOMPARE(c.window.tokensLeft, std::optional<std::int64_t>(0));
    QCOMPARE(c.window.tokensFreeInMs, 33000 - 4000); // the first bucket leaves at T0 + 33 s
    QCOMPARE(c.level, CapacityLevel::Blocked);
    QCOMPARE(c.blockedBy, WaitReason::Tokens);
    QCOMPARE(c.blockedUntilMs, std::optional<std::int64_t>(T0 + 33000));
}

// The provider's limits (per minute, from its headers) against the limits set, exactly: a
// window that is not a minute is scaled without rounding, huge figures do not overflow, and
// the verdict never changes the level (the limits set are what the limiter applies).
void TestCapacity::providerLimitsThatDifferAreNoticed()
{
    QVERIFY(!LimitMismatch::differs(60, 60, 60000));
    QVERIFY(LimitMismatch::differs(40, 60, 60000));
    QVERIFY(!LimitMismatch::differs(30, 60, 120000)); // 60 per 2 min = 30/min
    QVERIFY(!LimitMismatch::differs(3600, 60, 1000)); // 60/s = 3,600/min
    QVERIFY(LimitMismatch::differs(3601, 60, 1000));
    QVERIFY(!LimitMismatch::differs(7, 7, 60000));
    QVERIFY(LimitMismatch::differs(1, 7, 420001)); // 7 per 420.001 s is not 1/min
    QVERIFY(!LimitMismatch::differs(1, 7, 420000));
    QVERIFY(LimitMismatch::differs(10, std::nullopt, 60000)); // nothing set: the key is unprotected
    QVERIFY(!LimitMismatch::differs(-1, 60, 60000)); // not reported: nothing to say
    // 2^40 per 7 days against its per-minute figure: no product is formed, so no overflow.
    const std::int64_t week = 604800000;
    const std::int64_t big = std::int64_t(1) << 40;
    QVERIFY(LimitMismatch::differs(big, big, week));
    QVERIFY(!LimitMismatch::differs(big / 10080 * 1, big / 10080 * 10080, week));

    m_limits.requests = 60;
    m_limits.tokens = 100000;
    m_limits.windowMs = 60000;
    ProviderState& p = m_state.ensureProvider("p");
    QVERIFY(at(T0).limitNotices.empty()); // never reported
    p.reportedAtMs = T0 - 5000;
    p.reportedRequests = 40;
    p.reportedTokens = 100000;
    auto c = at(T0);
    QCOMPARE(c.reportedRequests, std::int64_t(40));
    QCOMPARE(c.reportedAtMs, T0 - 5000);
    QCOMPARE(c.limitNotices,
        std::vector<std::string> { "provider reports 40 requests/min; Tollgate is set to 60" });
    QCOMPARE(c.level, CapacityLevel::Ok);
    m_limits.tokens.reset();
    m_limits.windowMs = 90500;
    c = at(T0);
    QCOMPARE(c.limitNotices,
        (std::vector<std::string> { "provider reports 40 requests/min; Tollgate is set to 60 per 90500 ms",
            "provider reports 100000 tokens/min; Tollgate sets no token limit" }));
}

void TestCapacity::noLimitsIsOk()
{
    // A provider with an entry but no request, token or slot limit.
    admit(call(5000, true), T0);
    const auto c = at(T0);
    QVERIFY(c.hasLimits);
    QCOMPARE(c.window.requestLimit, std::nullopt);
    QCOMPARE(c.window.requestsLeft, std::nullopt);
    QCOMPARE(c.window.tokensLeft, std::nullopt);
    QCOMPARE(c.slotsFree, std::nullopt);
    QCOMPARE(c.window.nextRequestInMs, 0);
    QCOMPARE(c.level, CapacityLevel::Ok);
    QCOMPARE(c.nextCallInMs, 0);

    // No limits entry at all, no state: Ok.
    const auto none = Capacity::forProvider(QuotaState {}, "ghost", nullptr, T0);
    QVERIFY(!none.hasLimits);
    QCOMPARE(none.provider, std::string("ghost"));
    QCOMPARE(none.level, CapacityLevel::Ok);
}

void TestCapacity::headroomIsAppliedAsTheLimiterDoes()
{
    m_limits.requests = 10;
    m_limits.tokens = 999;
    m_limits.headroomPercent = 50;
    for (int i = 0; i < 4; ++i)
        admit(call(), T0);
    auto c = at(T0);
    QCOMPARE(c.headroomPercent, 50);
    QCOMPARE(c.window.requestLimitGiven, std::optional<std::int64_t>(10));
    QCOMPARE(c.window.requestLimit, std::optional<std::int64_t>(5));
    QCOMPARE(c.window.tokenLimitGiven, std::optional<std::int64_t>(999));
    QCOMPARE(c.window.tokenLimit, std::optional<std::int64_t>(m_limits.effective(999)));
    QCOMPARE(c.window.requestsLeft, std::optional<std::int64_t>(1));
    QCOMPARE(c.window.requestsPercent, 80);
    QCOMPARE(c.level, CapacityLevel::Near);
    admit(call(), T0);
    c = at(T0);
    QCOMPARE(c.window.requestsLeft, std::optional<std::int64_t>(0));
    QCOMPARE(c.level, CapacityLevel::Blocked);
}

void TestCapacity::modelWindowsAreFiguredToo()
{
    m_limits.requests = 100;
    ModelLimits big;
    big.requests = 2;
    big.windowMs = WINDOW_MS;
    m_limits.models["big"] = big;
    AdmitRequest r = call();
    r.model = "big";
    admit(r, T0);
    admit(r, T0);
    const auto c = at(T0 + 1000);
    QCOMPARE(c.models.size(), std::size_t(1));
    QCOMPARE(c.models[0].model, std::string("big"));
    QCOMPARE(c.models[0].requestsLeft, std::optional<std::int64_t>(0));
    QCOMPARE(c.models[0].nextRequestInMs, 32000);
    // The probe call names no model: the provider may still be called, but is near a limit.
    QCOMPARE(c.level, CapacityLevel::Near);
    QCOMPARE(c.window.requestsLeft, std::optional<std::int64_t>(98));
}

void TestCapacity::stateFromTheFutureStaysBounded()
{
    m_limits.requests = 2;
    m_limits.parallel = 1;
    const std::int64_t future = T0 + 3'600'000; // the clock was moved back an hour
    admit(call(1, true), future);
    admit(call(), future);
    ProviderState& p = m_state.ensureProvider("p");
    p.backoffUntilMs = INT64_MAX - 1; // forged
    p.paceUntilMs = INT64_MAX;
    p.consecutive429 = -7;
    p.paused = true;
    p.pausedAtMs = future;
    m_state.pausedAtMs = INT64_MAX;
    m_state.pausedAll = true;

    const auto c = at(T0);
    QVERIFY(c.backoffRemainingMs <= QuotaPolicy::MAX_STOP_MS);
    QVERIFY(c.backoffRemainingMs > 0);
    QVERIFY(c.paceRemainingMs >= 0);
    QCOMPARE(c.consecutive429, 0);
    QCOMPARE(c.pausedForMs, 0);
    QCOMPARE(c.window.requestsPercent, 100);
    QVERIFY(c.window.nextRequestInMs > 0);
    QVERIFY(c.window.nextRequestInMs <= 3'600'000 + WINDOW_MS + 1000);
    QCOMPARE(c.level, CapacityLevel::Blocked);
    // Unpaused, and once a transaction has persisted the bound (as every one does): after the
    // bounded backoff the future admissions have left the window; the held slot blocks.
    QuotaPolicy::boundTimes(m_state, p, m_limits, T0);
    p.paused = false;
    m_state.pausedAll = false;
    const auto later = at(T0 + QuotaPolicy::MAX_STOP_MS + 1);
    QCOMPARE(later.backoffRemainingMs, 0);
    QCOMPARE(later.window.requestsUsed, 0);
    QCOMPARE(later.level, CapacityLevel::Blocked);
    QCOMPARE(later.blockedBy, WaitReason::Slots);
}

void TestCapacity::queuedCallersBlockANewcomer()
{
    m_limits.requests = 5;
    ProviderState& p = m_state.ensureProvider("p");
    QuotaPolicy::syncProvider(p, m_limits, T0);
    Waiter w;
    w.ticket = 1;
    w.pid = 300;
    w.pidNs = FakeProbe::NS;
    w.deadlineMs = T0 + 60000;
    w.leaseUntilMs = T0 + 15000;
    p.queue.push_back(w);
    auto c = at(T0);
    QCOMPARE(c.waiting, std::size_t(1));
    QCOMPARE(c.level, CapacityLevel::Blocked);
    QCOMPARE(c.blockedBy, WaitReason::Queue);
    // A ghost at the head is pruned by acquire, so with a probe it does not block.
    FakeProbe probe;
    probe.m_dead = 300;
    c = at(T0, &probe);
    QCOMPARE(c.waiting, std::size_t(0));
    QCOMPARE(c.level, CapacityLevel::Ok);
}

void TestCapacity::computeListsEveryProvider()
{
    QuotaLimits limits;
    ProviderLimits a;
    a.requests = 1;
    QVERIFY(limits.set("alpha", a).ok());
    QVERIFY(limits.set("beta", ProviderLimits {}).ok());
    QuotaState s;
    s.ensureProvider("orphan").paused = true;
    const auto all = Capacity::compute(&s, limits, T0);
    QCOMPARE(all.size(), std::size_t(3));
    QCOMPARE(all[0].provider, std::string("alpha"));
    QCOMPARE(all[1].provider, std::string("beta"));
    QCOMPARE(all[2].provider, std::string("orphan"));
    QVERIFY(!all[2].hasLimits);
    QCOMPARE(all[2].level, CapacityLevel::Blocked);
    QCOMPARE(Capacity::compute(nullptr, limits, T0).size(), std::size_t(2));
    QCOMPARE(Capacity::compute(nullptr, QuotaLimits {}, T0).size(), std::size_t(0));
}

void TestCapacity::agreesWithTheLimiter()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string home = dir.filePath(QStringLiteral("home")).toStdString();
    ManualClock clock { WallTime(std::chrono::milliseconds(T0)) };
    auto store = FileQuotaStore::open(home, clock);
    QVERIFY2(store.ok(), store.ok() ? "" : store.error().message.c_str());
    ProcessProbe probe;
    QuotaLimiter limiter(**store, clock, probe);
    limiter.seedJitter(1);
    ProviderLimits l;
    l.requests = 4;
    l.tokens = 40;
    l.parallel = 2;
    l.windowMs = WINDOW_MS;
    l.backoffBaseMs = 3000;
    l.backoffCapMs = 10000;
    QVERIFY(limiter.setLimits("p", l, "test").ok());

    std::mt19937 rng(7);
    std::vector<Permit> held;
    int admitted = 0;
    int refused = 0;
    int jumped = 0;
    for (int step = 0; step < 400; ++step) {
        auto snap = limiter.snapshot();
        QVERIFY(snap.ok());
        const auto c = Capacity::forProvider(snap->state, "p", snap->limits.find("p"), snap->nowMs, &probe);

        AdmitRequest r;
        r.provider = "p";
        r.caller = "agree";
        r.tokens = 1;
        r.wantsSlot = true;
        auto permit = limiter.acquire(r, clock.now());
        QVERIFY2(permit.ok() == (c.level != CapacityLevel::Blocked),
            qPrintable(QStringLiteral("step %1: capacity says %2 (%3), acquire %4")
                           .arg(step)
                           .arg(QString::fromLatin1(capacityLevelName(c.level)))
                           .arg(QString::fromLatin1(waitReasonName(c.blockedBy)))
                           .arg(permit.ok() ? QStringLiteral("admitted")
                                            : QString::fromStdString(permit.error().message))));
        if (permit.ok()) {
            ++admitted;
            held.push_back(std::move(*permit));
        } else {
            ++refused;
            // "Blocked until" is when it may go: at that instant, if time alone stood in the way.
            if (c.blockedUntilMs && (c.blockedBy == WaitReason::Window || c.blockedBy == WaitReason::Backoff)
                && rng() % 2 == 0) {
                clock.set(WallTime(std::chrono::milliseconds(*c.blockedUntilMs - 1)));
                QVERIFY(!limiter.acquire(r, clock.now()).ok());
                clock.set(WallTime(std::chrono::milliseconds(*c.blockedUntilMs)));
                const auto again
                    = Capacity::forProvider(limiter.snapshot()->state, "p", &l, *c.blockedUntilMs, &probe);
                if (again.level != CapacityLevel::Blocked) {
                    auto p2 = limiter.acquire(r, clock.now());
                    QVERIFY(p2.ok());
                    held.push_back(std::move(*p2));
                    ++jumped;
                }
            }
        }
        switch (rng() % 8) {
        case 0:
            if (!held.empty())
                held.erase(held.begin());
            break;
        case 1:
            QVERIFY(limiter.report429("p", "agree", std::nullopt).ok());
            break;
        case 2:
            if (rng() % 3 == 0)
                QVERIFY(limiter.resetBackoff("p", "test").ok());
            break;
        case 3:
            if (rng() % 4 == 0)
                QVERIFY(limiter.pause(rng() % 2 ? "p" : "", "t", "test").ok());
            else
                QVERIFY(limiter.resume("", "test").ok());
            break;
        default:
            clock.advance(std::chrono::milliseconds(rng() % 4000));
            break;
        }
    }
    // The walk went through both answers, and "blocked until" was taken at its word.
    QVERIFY(admitted > 20);
    QVERIFY(refused > 20);
    QVERIFY(jumped > 0);
}

QTEST_APPLESS_MAIN(TestCapacity)
#include "tst_capacity.moc"
