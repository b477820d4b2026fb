// QuotaPolicy: the admission rules on a state in memory, with time as a plain number.

#include "quotapolicy.h"

#include <QTest>

using namespace tollgate;

namespace {

class FakeProbe final : public ProcessProbe {
public:
    Liveness liveness(std::int64_t pid, std::optional<std::int64_t>) const override
    {
        return pid == m_dead ? Liveness::Dead : Liveness::Alive;
    }
    bool exists(std::int64_t pid) const override { return pid != m_dead; }
    std::int64_t m_dead = -1;
};

AdmitRequest req(const char* caller, std::int64_t tokens = 0, bool slot = false, std::int64_t pid = 100)
{
    AdmitRequest r;
    r.provider = "p";
    r.caller = caller;
    r.tokens = tokens;
    r.wantsSlot = slot;
    r.pid = pid;
    r.deadlineMs = 1'000'000'000;
    return r;
}

} // namespace

class TestQuotaPolicy final : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void init();
    void windowLimitsRequests();
    void tokensLimit();
    void headroomAppliesToLimits();
    void modelLimitsAndProviderBothHold();
    void parallelSlots();
    void deadSlotHolderIsReclaimed();
    void backoffDoublesAndHonoursRetryAfter();
    void backoffBlocksAndPacesRestart();
    void pauseBlocksEveryone();
    void fifoOrderAndNoOvertaking();
    void ghostWaitersArePruned();
    void fencesOnlyGrow();
    void impossibleRequests();
    void conservativeFillAdmitsNothingForAWindow();

private:
    QuotaState m_state;
    ProviderLimits m_limits;
    FakeProbe m_probe;
    ProviderState& provider() { return m_state.ensureProvider("p"); }
    Result<AdmitDecision> admit(const AdmitRequest& r, std::int64_t now, std::uint64_t ticket = 0, bool enqueue = false)
    {
        QuotaPolicy::syncProvider(provider(), m_limits, now);
        return QuotaPolicy::admit(m_state, provider(), m_limits, r, ticket, now, enqueue);
    }
};

void TestQuotaPolicy::init()
{
    m_state = QuotaState {};
    m_limits = ProviderLimits {};
    m_limits.requests = 3;
    m_limits.windowMs = 60000;
    m_probe.m_dead = -1;
}

void TestQuotaPolicy::windowLimitsRequests()
{
    for (int i = 0; i < 3; ++i)
        QVERIFY(admit(req("a"), 1000)->admitted);
    auto d = admit(req("a"), 1000);
    QVERIFY(!d->admitted);
    QCOMPARE(d->reason, WaitReason::Window);
    QVERIFY(d->retryAtMs >= 61000);
    QVERIFY(admit(req("a"), d->retryAtMs)->admitted);
}

void TestQuotaPolicy::tokensLimit()
{
    m_limits.tokens = 1000;
    QVERIFY(admit(req("a", 700), 0)->admitted);
    auto d = admit(req("b", 400), 0);
    QVERIFY(!d->admitted);
    QCOMPARE(d->reason, WaitReason::Tokens);
    QVERIFY(admit(req("c", 300), 0)->admitted);
}

void TestQuotaPolicy::headroomAppliesToLimits()
{
    m_limits.requests = 10;
    m_limits.headroomPercent = 80;
    int admitted = 0;
    for (int i = 0; i < 20; ++i)
        admitted += admit(req("a"), 0)->admitted ? 1 : 0;
    QCOMPARE(admitted, 8);
}

void TestQuotaPolicy::modelLimitsAndProviderBothHold()
{
    m_limits.requests = 3;
    m_limits.models["opus"] = ModelLimits { 1, std::nullopt, 60000 };
    auto opus = req("a");
    opus.model = "opus";
    QVERIFY(admit(opus, 0)->admitted);
    auto d = admit(opus, 0);
    QVERIFY(!d->admitted);
    QCOMPARE(d->reason, WaitReason::Window);
    auto other = req("b");
    other.model = "haiku"; // no own limits: only the provider's
    QVERIFY(admit(other, 0)->admitted);
    QVERIFY(admit(other, 0)->admitted);
    QVERIFY(!admit(other, 0)->admitted); // provider's 3 used up
}

void TestQuotaPolicy::parallelSlots()
{
    m_limits.requests.reset();
    m_limits.parallel = 2;
    auto a = admit(req("a", 0, true), 0);
    auto b = admit(req("b", 0, true), 0);
    QVERIFY(a->admitted && a->slotTaken);
    QVERIFY(b->admitted && b->slotTaken);
    auto c = admit(req("c", 0, true), 0);
    QVERIFY(!c->admitted);
    QCOMPARE(c->reason, WaitReason::Slots);
    QVERIFY(admit(req("d", 0, false), 0)->admitted); // no slot asked, none needed
    std::erase_if(provider().slots, [&](const Slot& s) { return s.fence == a->fence; });
    QVERIFY(admit(req("c", 0, true), 0)->admitted);
}

void TestQuotaPolicy::deadSlotHolderIsReclaimed()
{
    m_limits.requests.reset();
    m_limits.parallel = 1;
    QVERIFY(admit(req("a", 0, true, 4242), 0)->admitted);
    QVERIFY(!admit(req("b", 0, true), 0)->admitted);
    std::vector<HistoryEvent> events;
    QCOMPARE(QuotaPolicy::reclaimSlots(provider(), m_limits, 10, m_probe, false, "", events), 0);
    QCOMPARE(QuotaPolicy::reclaimVanished(provider(), 10, m_probe, events), 0);
    m_probe.m_dead = 4242;
    QCOMPARE(QuotaPolicy::reclaimSlots(provider(), m_limits, 10, m_probe, false, "", events), 1);
    QCOMPARE(events.back().type, std::string("reclaim"));
    QVERIFY(admit(req("b", 0, true), 10)->admitted);
    QVERIFY(!admit(req("c", 0, true, 4243), 10)->admitted);
    m_probe.m_dead = 100; // b's holder
    QCOMPARE(QuotaPolicy::reclaimVanished(provider(), 10, m_probe, events), 1);
    QVERIFY(admit(req("c", 0, true, 4243), 10)->admitted);
    // overdue: reported (and released on request) after the maximum hold time
    m_probe.m_dead = -1;
    QCOMPARE(QuotaPolicy::reclaimSlots(provider(), m_limits, 10 + m_limits.maxHoldMs + 1, m_probe, false, "", events), 0);
    QCOMPARE(QuotaPolicy::reclaimSlots(provider(), m_limits, 10 + m_limits.maxHoldMs + 1, m_probe, true, "me", events), 1);
}

void TestQuotaPolicy::backoffDoublesAndHonoursRetryAfter()
{
    m_limits.backoffBaseMs = 60000;
    m_limits.backoffCapMs = 900000;
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 1, std::nullopt), 60000);
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 2, std::nullopt), 120000);
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 3, std::nullopt), 240000);
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 5, std::nullopt), 900000); // capped (960 s > 900 s)
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 40, std::nullopt), 900000);
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 1, 30000), 60000); // Retry-After below the backoff
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 1, 3600000), 3600000); // a long Retry-After wins, even past the cap
    auto& p = provider();
    QuotaPolicy::apply429(p, m_limits, 0, std::nullopt, 0);
    QuotaPolicy::apply429(p, m_limits, 1, std::nullopt, 0);
    QCOMPARE(p.consecutive429, 2);
    QCOMPARE(p.backoffUntilMs, 1 + 120000);
}

void TestQuotaPolicy::backoffBlocksAndPacesRestart()
{
    m_limits.requests = 6;
    m_limits.windowMs = 60000; // even pace: one per 10 s
    m_limits.backoffBaseMs = 5000;
    QuotaPolicy::apply429(provider(), m_limits, 0, 2000, 700);
    QCOMPARE(provider().backoffUntilMs, 5700); // max(2000, 5000) + jitter
    auto d = admit(req("a"), 5000);
    QVERIFY(!d->admitted);
    QCOMPARE(d->reason, WaitReason::Backoff);
    QCOMPARE(d->retryAtMs, 5700);
    QVERIFY(admit(req("a"), 5700)->admitted);
    d = admit(req("b"), 5800); // window has room, but the restart is paced
    QVERIFY(!d->admitted);
    QCOMPARE(d->reason, WaitReason::Backoff);
    QCOMPARE(d->retryAtMs, 5700 + 10000);
    QVERIFY(admit(req("b"), 15700)->admitted);
    QVERIFY(admit(req("c"), 5700 + 60000 + 1)->admitted); // pacing ends one window after the backoff
    QVERIFY(admit(req("d"), 5700 + 60000 + 1)->admitted);
}

void TestQuotaPolicy::pauseBlocksEveryone()
{
    provider().paused = true;
    auto d = admit(req("a"), 0);
    QVERIFY(!d->admitted);
    QCOMPARE(d->reason, WaitReason::Paused);
    provider().paused = false;
    m_state.pausedAll = true;
    QCOMPARE(admit(req("a"), 0)->reason, WaitReason::Paused);
    m_state.pausedAll = false;
    QVERIFY(admit(req("a"), 0)->admitted);
}

void TestQuotaPolicy::fifoOrderAndNoOvertaking()
{
    m_limits.requests = 1;
    QVERIFY(admit(req("first"), 0)->admitted);
    auto w1 = admit(req("w1"), 10, 0, true);
    auto w2 = admit(req("w2"), 20, 0, true);
    QVERIFY(!w1->admitted && !w2->admitted);
    QVERIFY(w1->ticket < w2->ticket);
    QCOMPARE(provider().queue.size(), std::size_t(2));
    const std::int64_t later = 120000;
    // w2 asks first once capacity is back: refused, w1 is ahead
    auto again2 = admit(req("w2"), later, w2->ticket);
    QVERIFY(!again2->admitted);
    QCOMPARE(again2->reason, WaitReason::Queue);
    // a newcomer cannot jump the queue either
    QCOMPARE(admit(req("new"), later)->reason, WaitReason::Queue);
    QVERIFY(admit(req("w1"), later, w1->ticket)->admitted);
    QCOMPARE(provider().queue.size(), std::size_t(1));
    QVERIFY(!admit(req("w2"), later, w2->ticket)->admitted); // window full again: waits at the head
    QCOMPARE(provider().queue.front().reason, WaitReason::Window);
}

void TestQuotaPolicy::ghostWaitersArePruned()
{
    m_limits.requests = 1;
    QVERIFY(admit(req("first"), 0)->admitted);
    auto ghost = req("ghost", 0, false, 999);
    ghost.deadlineMs = 100;
    QVERIFY(!admit(ghost, 0, 0, true)->admitted);
    auto live = req("live");
    QVERIFY(!admit(live, 0, 0, true)->admitted);
    std::vector<HistoryEvent> events;
    QVERIFY(!QuotaPolicy::pruneQueueHead(provider(), 50, m_probe, events));
    m_probe.m_dead = 999; // the ghost's process died
    QVERIFY(QuotaPolicy::pruneQueueHead(provider(), 50, m_probe, events));
    QCOMPARE(provider().queue.size(), std::size_t(1));
    QCOMPARE(provider().queue.front().caller, std::string("live"));
    QCOMPARE(events.back().type, std::string("gave-up"));
}

void TestQuotaPolicy::fencesOnlyGrow()
{
    m_limits.requests = 100;
    std::uint64_t last = 0;
    for (int i = 0; i < 50; ++i) {
        auto d = admit(req("a"), i);
        QVERIFY(d->fence > last);
        last = d->fence;
    }
}

void TestQuotaPolicy::impossibleRequests()
{
    m_limits.tokens = 1000;
    QVERIFY(QuotaPolicy::impossible(m_limits, req("a", 1001)).has_value());
    QVERIFY(!QuotaPolicy::impossible(m_limits, req("a", 1000)).has_value());
    m_limits.headroomPercent = 50;
    QVERIFY(QuotaPolicy::impossible(m_limits, req("a", 600)).has_value());
}

void TestQuotaPolicy::conservativeFillAdmitsNothingForAWindow()
{
    m_limits.requests = 5;
    m_limits.tokens = 100;
    m_limits.parallel = 2;
    QuotaPolicy::fillConservatively(provider(), m_limits, 1000);
    QCOMPARE(provider().slots.size(), std::size_t(2));
    QVERIFY(!admit(req("a"), 1000)->admitted);
    QVERIFY(!admit(req("a"), 30000)->admitted);
    std::vector<HistoryEvent> events;
    QuotaPolicy::reclaimSlots(provider(), m_limits, 1000 + 60000 + 3000, m_probe, false, "", events);
    QVERIFY(provider().slots.empty()); // placeholders expire after one window
    QVERIFY(admit(req("a", 0, true), 1000 + 60000 + 3000)->admitted);
}

QTEST_APPLESS_MAIN(TestQuotaPolicy)
#include "tst_quotapolicy.moc"
