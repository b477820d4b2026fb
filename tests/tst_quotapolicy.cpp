// QuotaPolicy: the admission rules on a state in memory, with time as a plain number.

#include "quota/holderstatus.h"
#include "quota/quotapolicy.h"
#include "quota/retryafter.h"

#include <QFile>
#include <QTest>
#include <algorithm>
#include <map>

using namespace tollgate;

namespace {

class FakeProbe final : public ProcessProbe
{
public:
    Liveness liveness(std::int64_t pid, std::optional<std::int64_t>) const override
    {
        return pid == m_dead ? Liveness::Dead : Liveness::Alive;
    }
    bool exists(std::int64_t pid) const override { return pid != m_dead; }
    std::uint64_t pidNamespace() const override { return m_ns; }
    std::optional<std::uint64_t> startTicks(std::int64_t pid) const override
    {
        auto it = m_ticks.find(pid);
        return it == m_ticks.end() ? std::nullopt : std::optional<std::uint64_t>(it->second);
    }
    std::int64_t m_dead = -1;
    std::uint64_t m_ns = OUR_NS;
    std::map<std::int64_t, std::uint64_t> m_ticks;
    static constexpr std::uint64_t OUR_NS = 4026531836;
};

constexpr std::uint64_t OTHER_NS = 4026532177;

AdmitRequest req(const char* caller, std::int64_t tokens = 0, bool slot = false, std::int64_t pid = 100)
{
    AdmitRequest r;
    r.provider = "p";
    r.caller = caller;
    r.tokens = tokens;
    r.wantsSlot = slot;
    r.pid = pid;
    r.deadlineMs = 1'000'000'000;
    r.pidNs = FakeProbe::OUR_NS;
    return r;
}

} // namespace

class TestQuotaPolicy final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void windowLimitsRequests();
    void tokensLimit();
    void headroomAppliesToLimits();
    void modelLimitsAndProviderBothHold();
    void parallelSlots();
    void deadSlotHolderIsReclaimed();
    void aReleasedSlotIsHandedToTheHead();
    void backoffDoublesAndHonoursRetryAfter();
    void backoffBlocksAndPacesRestart();
    void aBurstOf429sIsOneStormOnTheProvidersClock();
    void aHoldEndsAtAnEvenPace();
    void aHoldIsNotedOncePerHold();
    void neverMoreThanTheProviderSaysRemain();
    void pauseBlocksEveryone();
    void fifoOrderAndNoOvertaking();
    void ghostWaitersArePruned();
    void fencesOnlyGrow();
    void impossibleRequests();
    void conservativeFillAdmitsNothingForAWindow();
    void holderOfAnotherNamespaceIsJudgedByItsLease();
    void unknownNamespaceIsNeverOurs();
    void reusedPidWithAnotherStartTimeIsDead();
    void waiterOfAnotherNamespaceExpiresWithItsLease();
    void formatOneStateIsReadConservatively();
    void formatTwoStateIsReadWithNothingReported();
    void backoffIsBoundedWhateverTheInputs();
    void forgedFarFutureTimesStopNobodyPastTheMaximum();
    void holderStatusIsTheLimitersJudgement();

private:
    QuotaState m_state;
    ProviderLimits m_limits;
    FakeProbe m_probe;
    ProviderState& provider() { return m_state.ensureProvider("p"); }
    Result<AdmitDecision> admit(
        const AdmitRequest& r, std::int64_t now, std::uint64_t ticket = 0, bool enqueue = false)
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
    m_probe.m_ns = FakeProbe::OUR_NS;
    m_probe.m_ticks.clear();
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

// Issue 27: a release hands its slot to the head of the queue (QuotaPolicy::handOff) when the
// head takes one (AdmitRequest::takesHandOff), before its deadline, and could go now; the slot
// keeps the head's ticket and holder, and the head's request as it queued it is what counts.
void TestQuotaPolicy::aReleasedSlotIsHandedToTheHead()
{
    m_limits.requests = 10;
    m_limits.parallel = 1;
    auto a = admit(req("a", 0, true), 0);
    QVERIFY(a->admitted);
    AdmitRequest keeper = req("head", 40, true, 200); // held by its keeper (pid 200), waited for by 100
    keeper.waiterPid = 100;
    keeper.startTicks = 7;
    keeper.waiterStartTicks = 5;
    keeper.leaseMs = 9000;
    keeper.takesHandOff = true;
    auto head = admit(keeper, 10, 0, true);
    QVERIFY(!head->admitted && head->ticket != 0);
    auto plain = admit(req("acquire", 0, true), 20, 0, true); // acquire --pid: only rung
    QVERIFY(!plain->admitted && plain->ticket != 0);
    QVERIFY(provider().queue.front().holds);
    QVERIFY(!provider().queue.back().holds);

    // Nothing to hand while the slot is held.
    QVERIFY(!QuotaPolicy::handOff(m_state, provider(), m_limits, 30));
    std::erase_if(provider().slots, [&](const Slot& s) { return s.fence == a->fence; });
    const std::uint64_t admittedBefore = provider().admittedTotal;
    auto h = QuotaPolicy::handOff(m_state, provider(), m_limits, 30);
    QVERIFY(h);
    QCOMPARE(h->waiter.ticket, head->ticket);
    QCOMPARE(h->leaseMs, std::int64_t(9000));
    QVERIFY(h->decision.admitted && h->decision.slotTaken);
    QCOMPARE(provider().admittedTotal, admittedBefore + 1);
    QCOMPARE(provider().queue.size(), std::size_t(1)); // the plain waiter, now the head
    const Slot* slot = QuotaPolicy::handedSlot(provider(), head->ticket, 200);
    QVERIFY(slot);
    QCOMPARE(slot->fence, h->decision.fence);
    QCOMPARE(slot->pid, std::int64_t(200));
    QCOMPARE(slot->startTicks, std::uint64_t(7));
    QCOMPARE(slot->tokens, std::int64_t(40));
    QCOMPARE(slot->leaseUntilMs, std::int64_t(30 + 9000));
    QCOMPARE(provider().scopes.front().window.usage(30).tokens, std::int64_t(40));
    QVERIFY(!QuotaPolicy::handedSlot(provider(), plain->ticket, 100));
    // Its ticket with another holder (a ticket issued again after a lost state) finds nothing.
    QVERIFY(!QuotaPolicy::handedSlot(provider(), head->ticket, 100));

    // A head that only asked to be rung is not handed a slot; nor one past its deadline.
    provider().slots.clear();
    QVERIFY(!QuotaPolicy::handOff(m_state, provider(), m_limits, 40));
    QCOMPARE(provider().queue.size(), std::size_t(1));
    AdmitRequest late = keeper;
    late.deadlineMs = 50;
    // A leave done late by another pid (its ticket issued again: a state that fell back to its
    // previous copy) does not take this waiter out.
    const auto plainWaiter = std::find_if(provider().queue.begin(), provider().queue.end(),
        [&](const Waiter& w) { return w.ticket == plain->ticket; });
    QVERIFY(plainWaiter != provider().queue.end());
    const std::int64_t plainPid = plainWaiter->pid;
    QVERIFY(!QuotaPolicy::dequeue(provider(), plain->ticket, plainPid + 1));
    QCOMPARE(provider().queue.size(), std::size_t(1));
    QVERIFY(QuotaPolicy::dequeue(provider(), plain->ticket, plainPid));
    auto lateHead = admit(late, 45, 0, true);
    QVERIFY(lateHead->admitted); // the slot is free: no queue
    provider().slots.clear();
    auto blocker = admit(req("b", 0, true), 46);
    QVERIFY(blocker->admitted);
    auto queued = admit(late, 47, 0, true);
    QVERIFY(!queued->admitted);
    provider().slots.clear();
    QVERIFY(!QuotaPolicy::handOff(m_state, provider(), m_limits, 51));
    // Nor one the window would refuse: it stays queued, as its own look would leave it.
    provider().queue.front().deadlineMs = 1'000'000;
    m_limits.requests = 3;
    QVERIFY(!QuotaPolicy::handOff(m_state, provider(), m_limits, 52));
    QCOMPARE(provider().queue.size(), std::size_t(1));
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
    QCOMPARE(events.back().type, EventType::Reclaim);
    QVERIFY(admit(req("b", 0, true), 10)->admitted);
    QVERIFY(!admit(req("c", 0, true, 4243), 10)->admitted);
    m_probe.m_dead = 100; // b's holder
    QCOMPARE(QuotaPolicy::reclaimVanished(provider(), 10, m_probe, events), 1);
    QVERIFY(admit(req("c", 0, true, 4243), 10)->admitted);
    // overdue: reported (and released on request) after the maximum hold time
    m_probe.m_dead = -1;
    QCOMPARE(QuotaPolicy::reclaimSlots(
                 provider(), m_limits, 10 + m_limits.maxHoldMs + 1, m_probe, false, "", events),
        0);
    QCOMPARE(QuotaPolicy::reclaimSlots(
                 provider(), m_limits, 10 + m_limits.maxHoldMs + 1, m_probe, true, "me", events),
        1);
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
    // The provider's own time is waited exactly: shorter than the doubling, or past the cap.
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 1, 30000), 30000);
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 3, 2000), 2000);
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 1, 3600000), 3600000);
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 1, 0), 0);
    auto& p = provider();
    QuotaPolicy::apply429(p, m_limits, 0, std::nullopt, 0);
    // A 429 heard during the backoff answers a call admitted before it: the same storm.
    QuotaPolicy::apply429(p, m_limits, 1, std::nullopt, 0);
    QCOMPARE(p.consecutive429, 1);
    QCOMPARE(p.backoffUntilMs, 60000);
    // After it, the next 429 is the storm's next step: the doubling.
    QuotaPolicy::apply429(p, m_limits, 60000, std::nullopt, 0);
    QCOMPARE(p.consecutive429, 2);
    QCOMPARE(p.backoffUntilMs, 60000 + 120000);
    QCOMPARE(p.rateLimitedTotal, std::uint64_t(3));
}

// Issue 26's burst: six concurrent calls answered 429 with retry-after 2 s. One backoff of 2 s
// (not 60 s doubled five times); each names its time, so the latest end stands.
void TestQuotaPolicy::aBurstOf429sIsOneStormOnTheProvidersClock()
{
    m_limits.backoffBaseMs = 60000;
    m_limits.backoffCapMs = 900000;
    auto& p = provider();
    for (int i = 0; i < 6; ++i)
        QuotaPolicy::apply429(p, m_limits, 1000 + i * 10, 2000, 0);
    QCOMPARE(p.consecutive429, 1);
    QCOMPARE(p.backoffUntilMs, 1050 + 2000);
    QCOMPARE(p.paceUntilMs, 1050 + 2000 + m_limits.windowMs);
    // A same-storm 429 that names no time leaves the backoff as it is.
    QCOMPARE(QuotaPolicy::apply429(p, m_limits, 2000, std::nullopt, 0), std::int64_t(0));
    QCOMPARE(p.backoffUntilMs, 1050 + 2000);
    QCOMPARE(p.consecutive429, 1);
}

// A hold (the provider's headers: nothing left until its reset) ends at the window's pace: the
// reset frees room for the next request, not for every waiter at once — one request, until an
// answer says how many more remain; then those, at the pace.
void TestQuotaPolicy::aHoldEndsAtAnEvenPace()
{
    m_limits.requests = 6;
    m_limits.windowMs = 60000; // one per 10 s
    auto& p = provider();
    QVERIFY(QuotaPolicy::applyHold(p, m_limits, 0, 20000).changed);
    QVERIFY(!QuotaPolicy::applyHold(p, m_limits, 0, 15000).changed); // an earlier end changes nothing
    QCOMPARE(p.backoffUntilMs, 20000);
    QVERIFY(!admit(req("a"), 19999)->admitted);
    QVERIFY(admit(req("a"), 20000)->admitted);
    auto d = admit(req("b"), 20001);
    QVERIFY(!d->admitted);
    QCOMPARE(d->retryAtMs, 30000);
    // The reset freed one request; until an answer says more, nobody else goes.
    d = admit(req("b"), 30000);
    QVERIFY(!d->admitted);
    QCOMPARE(d->reason, WaitReason::Backoff);
    QCOMPARE(d->retryAtMs, 20000 + 60000);
    // a's answer: 2 more remain until 70 s. Then b and c at the pace, and d waits for the reset.
    QVERIFY(QuotaPolicy::applyRemaining(p, m_limits, 25000, "", 2, 70000));
    QVERIFY(admit(req("b"), 30000)->admitted);
    QVERIFY(!admit(req("c"), 39999)->admitted);
    QVERIFY(admit(req("c"), 40000)->admitted);
    d = admit(req("d"), 50000);
    QVERIFY(!d->admitted);
    QCOMPARE(d->retryAtMs, 70000);
    QVERIFY(admit(req("d"), 70000)->admitted);
}

// Issue 26 item 2: never more than the provider said remains. Its answer's word binds until its
// reset whatever Tollgate's limits allow; the latest word replaces the one kept (it counts every
// request the provider received, those in flight included); a class's word binds that class
// only; a forged far reset is bounded like a backoff.
void TestQuotaPolicy::neverMoreThanTheProviderSaysRemain()
{
    m_limits.requests = 1000;
    m_limits.windowMs = 60000;
    m_limits.models["opus"] = ModelLimits { 1000, std::nullopt, 60000 };
    auto& p = provider();
    QVERIFY(!QuotaPolicy::applyRemaining(p, m_limits, 5000, "", 2, 5000)); // a reset already past: nothing
    QVERIFY(QuotaPolicy::applyRemaining(p, m_limits, 0, "", 2, 10000));
    QVERIFY(!QuotaPolicy::applyRemaining(p, m_limits, 0, "", 2, 10000)); // the same word: no write
    QVERIFY(admit(req("a"), 100)->admitted);
    QVERIFY(admit(req("b"), 200)->admitted);
    auto d = admit(req("c"), 300);
    QVERIFY(!d->admitted);
    QCOMPARE(d->reason, WaitReason::Backoff);
    QCOMPARE(d->retryAtMs, 10000);
    QCOMPARE(p.remainingRequests, std::int64_t(0));
    // A later answer's word replaces it: 1 more.
    QVERIFY(QuotaPolicy::applyRemaining(p, m_limits, 400, "", 1, 10000));
    QVERIFY(admit(req("c"), 500)->admitted);
    QVERIFY(!admit(req("d"), 600)->admitted);
    QVERIFY(admit(req("d"), 10000)->admitted); // the reset: Tollgate's own limits again
    QVERIFY(admit(req("e"), 10001)->admitted);
    // A word whose reset is already past clears the one kept: the budget has refilled since.
    QVERIFY(QuotaPolicy::applyRemaining(p, m_limits, 11000, "", 0, 15000));
    QVERIFY(!admit(req("f"), 11001)->admitted);
    QVERIFY(QuotaPolicy::applyRemaining(p, m_limits, 11002, "", 0, 11000));
    QCOMPARE(p.remainingUntilMs, std::int64_t(0));
    QVERIFY(admit(req("f"), 11003)->admitted);

    // A class's word: opus's requests are capped, another model's are not.
    auto opus = req("o");
    opus.model = "opus";
    auto haiku = req("h");
    haiku.model = "haiku";
    QVERIFY(QuotaPolicy::applyRemaining(p, m_limits, 20000, "opus", 0, 30000));
    QCOMPARE(p.remainingScope, std::string("opus"));
    QVERIFY(!admit(opus, 20001)->admitted);
    QVERIFY(admit(haiku, 20002)->admitted);
    QCOMPARE(p.remainingRequests, std::int64_t(0));
    // With a call in flight, its answer will restate the word: wait for that (a ring), not the reset.
    Slot inFlight;
    inFlight.fence = 77;
    inFlight.pid = 100;
    inFlight.acquiredMs = 20000;
    inFlight.pidNs = FakeProbe::OUR_NS;
    p.slots.push_back(inFlight);
    auto ring = admit(opus, 20003);
    QVERIFY(!ring->admitted);
    QCOMPARE(ring->retryAtMs, INT64_MAX);
    p.slots.clear();
    QCOMPARE(admit(opus, 20004)->retryAtMs, 30000);

    // A forged reset in the year 9999 and a count past 2^40: bounded.
    QVERIFY(QuotaPolicy::applyRemaining(p, m_limits, 40000, "", INT64_MAX, 253402300799000));
    QCOMPARE(p.remainingRequests, std::int64_t(1) << 40);
    QCOMPARE(p.remainingUntilMs, 40000 + QuotaPolicy::MAX_STOP_MS);
    p.remainingUntilMs = INT64_MAX; // a forged state
    QVERIFY(QuotaPolicy::boundTimes(m_state, p, m_limits, 50000));
    QCOMPARE(p.remainingUntilMs, 50000 + QuotaPolicy::MAX_STOP_MS);
}

// Issue 26 item 7: every answer in flight during a hold repeats the provider's reset (a relative
// one, "6s", a little later each time): one `hold` history line per hold, not one per answer. A
// hold is noted when it starts, or when it moves the end in force on by more than HOLD_NOTE_MS;
// a smaller move extends it without a note.
void TestQuotaPolicy::aHoldIsNotedOncePerHold()
{
    m_limits.requests = 6;
    m_limits.windowMs = 60000;
    auto& p = provider();
    auto hold = [&](std::int64_t now, std::int64_t until) {
        const auto h = QuotaPolicy::applyHold(p, m_limits, now, until);
        return std::pair { h.changed, h.noted };
    };
    QCOMPARE(hold(0, 6000), std::pair(true, true)); // starts
    QCOMPARE(hold(100, 6100), std::pair(true, false)); // the next answers: the same hold
    QCOMPARE(hold(300, 6300), std::pair(true, false));
    QCOMPARE(p.backoffUntilMs, 6300); // extended all the same
    QCOMPARE(hold(400, 6000), std::pair(false, false)); // an earlier end: nothing
    QCOMPARE(hold(500, 6300 + QuotaPolicy::HOLD_NOTE_MS), std::pair(true, false)); // the bound itself
    QCOMPARE(hold(600, 7300 + QuotaPolicy::HOLD_NOTE_MS + 1), std::pair(true, true)); // past it
    // Once it ended, the next is a new hold, however close its end.
    QCOMPARE(hold(9000, 9001), std::pair(true, true));
    // A backoff in force (a 429) that a hold extends a little: no new line either.
    ProviderState& q = m_state.ensureProvider("other");
    QuotaPolicy::apply429(q, m_limits, 0, 5000, 0);
    const std::int64_t backoff = q.backoffUntilMs;
    auto h = QuotaPolicy::applyHold(q, m_limits, 10, backoff + 500);
    QVERIFY(h.changed && !h.noted);
    h = QuotaPolicy::applyHold(q, m_limits, 20, backoff + 5000);
    QVERIFY(h.changed && h.noted);
}

void TestQuotaPolicy::backoffBlocksAndPacesRestart()
{
    m_limits.requests = 6;
    m_limits.windowMs = 60000; // even pace: one per 10 s
    m_limits.backoffBaseMs = 5000;
    QuotaPolicy::apply429(provider(), m_limits, 0, std::nullopt, 700);
    QCOMPARE(provider().backoffUntilMs, 5700); // the base (no time named) + jitter
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
    QCOMPARE(events.back().type, EventType::GaveUp);
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
    // Placeholders outlast the window: they hold for as long as a live holder may go without
    // renewing (the maximum hold time), so a running holder can take its slot back first.
    const std::int64_t hold = QuotaPolicy::placeholderHoldMs(m_limits);
    QVERIFY(hold >= m_limits.maxHoldMs && hold > m_limits.windowMs);
    QuotaPolicy::reclaimSlots(provider(), m_limits, 1000 + 60000 + 3000, m_probe, false, "", events);
    QCOMPARE(provider().slots.size(), std::size_t(2));
    QVERIFY(admit(req("a", 0), 1000 + 60000 + 3000)->admitted); // the window is free again
    QVERIFY(!admit(req("a", 0, true), 1000 + 60000 + 3000)->admitted); // the slots are not
    // A holder admitted before the reset (a fence below its time in µs) takes one back.
    Slot held;
    held.fence = 999999;
    held.pid = 4242;
    held.caller = "still running";
    held.leaseUntilMs = 1000 + hold + 30000; // it renews on
    QVERIFY(QuotaPolicy::reestablish(provider(), held));
    Slot later = held;
    later.fence = 1000 * 1000 + 5; // issued after the reset: released by hand, stays gone
    QVERIFY(!QuotaPolicy::reestablish(provider(), later));
    QCOMPARE(provider().slots.size(), std::size_t(2));
    QuotaPolicy::reclaimSlots(provider(), m_limits, 1000 + hold, m_probe, false, "", events);
    QCOMPARE(provider().slots.size(), std::size_t(1)); // the placeholder left expired
    QCOMPARE(provider().slots[0].caller, std::string("still running"));
    QVERIFY(admit(req("a", 0, true), 1000 + hold)->admitted);
}

// Issue defect 11: the pid of a holder in another pid namespace names nothing here (or an
// unrelated process); only its lease says whether it still holds the slot.
void TestQuotaPolicy::holderOfAnotherNamespaceIsJudgedByItsLease()
{
    m_limits.requests.reset();
    m_limits.parallel = 1;
    auto foreign = req("a", 0, true, 33);
    foreign.pidNs = OTHER_NS;
    foreign.leaseMs = 3000;
    QVERIFY(admit(foreign, 0)->admitted);
    QCOMPARE(provider().slots.front().leaseUntilMs, std::int64_t(3000));
    m_probe.m_dead = 33; // no pid 33 here
    std::vector<HistoryEvent> events;
    QCOMPARE(QuotaPolicy::reclaimVanished(provider(), 2999, m_probe, events), 0);
    QCOMPARE(QuotaPolicy::reclaimSlots(provider(), m_limits, 2999, m_probe, false, "", events), 0);
    QVERIFY(!admit(req("b", 0, true), 2999)->admitted);
    QVERIFY(QuotaPolicy::holderAlive(provider().slots.front(), m_limits, 2999, m_probe));
    // renewed (QuotaLimiter::renewSlot): held on
    provider().slots.front().leaseUntilMs = 6000;
    QCOMPARE(QuotaPolicy::reclaimVanished(provider(), 5999, m_probe, events), 0);
    // ... and an unrelated live pid 33 here does not keep it once the renewals stop
    m_probe.m_dead = -1;
    QCOMPARE(QuotaPolicy::reclaimVanished(provider(), 6000, m_probe, events), 1);
    QVERIFY(events.back().reason.find("lease expired") != std::string::npos);
    QVERIFY(admit(req("b", 0, true), 6000)->admitted);
    // A holder of our namespace goes by its pid, not its lease: alive past the lease ...
    QVERIFY(QuotaPolicy::holderAlive(provider().slots.front(), m_limits, 10'000'000, m_probe));
    // ... and dead as soon as its pid is, lease or not.
    m_probe.m_dead = 100;
    QVERIFY(!QuotaPolicy::holderAlive(provider().slots.front(), m_limits, 6001, m_probe));
    // Without a lease of its own (acquire --slot), the lease is the maximum hold time.
    auto script = req("c", 0, true, 44);
    script.pidNs = OTHER_NS;
    QCOMPARE(QuotaPolicy::reclaimVanished(provider(), 6001, m_probe, events), 1);
    QVERIFY(admit(script, 7000)->admitted);
    QCOMPARE(provider().slots.front().leaseUntilMs, 7000 + m_limits.maxHoldMs);
}

void TestQuotaPolicy::unknownNamespaceIsNeverOurs()
{
    m_limits.requests.reset();
    m_limits.parallel = 1;
    m_probe.m_ns = 0; // this reader cannot tell its namespace (no /proc)
    auto r = req("a", 0, true, 55);
    r.pidNs = 0;
    r.leaseMs = 1000;
    QVERIFY(admit(r, 0)->admitted);
    m_probe.m_dead = 55;
    std::vector<HistoryEvent> events;
    QCOMPARE(QuotaPolicy::reclaimSlots(provider(), m_limits, 999, m_probe, false, "", events), 0);
    QCOMPARE(QuotaPolicy::reclaimSlots(provider(), m_limits, 1000, m_probe, false, "", events), 1);
}

void TestQuotaPolicy::reusedPidWithAnotherStartTimeIsDead()
{
    m_limits.requests.reset();
    m_limits.parallel = 1;
    auto r = req("a", 0, true, 66);
    r.startTicks = 5000;
    QVERIFY(admit(r, 0)->admitted);
    std::vector<HistoryEvent> events;
    m_probe.m_ticks[66] = 5000;
    QCOMPARE(QuotaPolicy::reclaimSlots(provider(), m_limits, 10, m_probe, false, "", events), 0);
    m_probe.m_ticks[66] = 5001; // pid 66 now names a younger process
    QCOMPARE(QuotaPolicy::reclaimSlots(provider(), m_limits, 10, m_probe, false, "", events), 1);
    QCOMPARE(events.back().reason, std::string("holder died"));
}

void TestQuotaPolicy::waiterOfAnotherNamespaceExpiresWithItsLease()
{
    m_limits.requests = 1;
    QVERIFY(admit(req("first"), 0)->admitted);
    auto foreign = req("foreign", 0, false, 77);
    foreign.pidNs = OTHER_NS;
    auto d = admit(foreign, 0, 0, true);
    QVERIFY(!d->admitted);
    QCOMPARE(provider().queue.front().leaseUntilMs, QuotaPolicy::WAITER_LEASE_MS);
    m_probe.m_dead = 77; // means nothing for another namespace's waiter
    std::vector<HistoryEvent> events;
    QVERIFY(!QuotaPolicy::pruneQueueHead(provider(), 1000, m_probe, events));
    // Renewed only once a third of the lease is gone (a state write each time).
    QVERIFY(!QuotaPolicy::renewWaiter(provider(), d->ticket, 1000));
    QVERIFY(QuotaPolicy::renewWaiter(provider(), d->ticket, QuotaPolicy::WAITER_LEASE_MS / 3 + 1));
    const std::int64_t until = provider().queue.front().leaseUntilMs;
    QVERIFY(!QuotaPolicy::pruneQueueHead(provider(), until, m_probe, events));
    QVERIFY(QuotaPolicy::pruneQueueHead(provider(), until + 1, m_probe, events));
    QVERIFY(provider().queue.empty());
}

// A state written in format 1 names no namespace: its slots are held for the maximum hold
// time whatever their pids say here (the pid may belong to another namespace).
void TestQuotaPolicy::formatOneStateIsReadConservatively()
{
    QFile f(QStringLiteral(TOLLGATE_TEST_DATA "/state-format1-busy.bin"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray bytes = f.readAll();
    auto s = QuotaState::decode(std::string_view(bytes.constData(), static_cast<std::size_t>(bytes.size())));
    QVERIFY2(s.ok(), s ? "" : s.error().message.c_str());
    ProviderState* p = s->provider("anthropic");
    QVERIFY(p);
    QCOMPARE(p->slots.size(), std::size_t(2));
    const Slot& held = p->slots.front();
    QCOMPARE(held.pid, std::int64_t(4242));
    QCOMPARE(held.pidNs, std::uint64_t(0));
    QCOMPARE(held.leaseUntilMs, std::int64_t(0));
    m_probe.m_dead = 4242; // no such pid here: in format 1 that proved nothing
    ProviderLimits l;
    l.parallel = 4;
    QVERIFY(QuotaPolicy::holderAlive(held, l, held.acquiredMs + l.maxHoldMs - 1, m_probe));
    QVERIFY(!QuotaPolicy::holderAlive(held, l, held.acquiredMs + l.maxHoldMs, m_probe));
    // Rewritten in the current format (3: nothing of 4 is in use), and read back the same.
    const std::string again = s->encode();
    QCOMPARE(
        static_cast<unsigned char>(again[4]), static_cast<unsigned char>(QuotaState::PLAIN_FORMAT_VERSION));
    auto back = QuotaState::decode(again);
    QVERIFY(back.ok());
    QCOMPARE(back->encode(), again);
}

// A state written in format 2 (before the provider-reported limits) is read whole — holders,
// waiters, windows, pause and backoff — with nothing reported, and rewritten as format 3
// keeping all of it; a reported limit then survives the round trip.
void TestQuotaPolicy::formatTwoStateIsReadWithNothingReported()
{
    QFile f(QStringLiteral(TOLLGATE_TEST_DATA "/state-format2-busy.bin"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray bytes = f.readAll();
    QCOMPARE(static_cast<unsigned char>(bytes[4]), static_cast<unsigned char>(2));
    auto s = QuotaState::decode(std::string_view(bytes.constData(), static_cast<std::size_t>(bytes.size())));
    QVERIFY2(s.ok(), s ? "" : s.error().message.c_str());
    QCOMPARE(s->nextFence, std::uint64_t(17));
    ProviderState* p = s->provider("openai");
    QVERIFY(p);
    QVERIFY(p->paused);
    QCOMPARE(p->pauseReason, std::string("budget review"));
    QCOMPARE(p->consecutive429, 2);
    QCOMPARE(p->admittedTotal, std::uint64_t(16));
    QCOMPARE(p->reportedAtMs, std::int64_t(0));
    QCOMPARE(p->reportedRequests, std::int64_t(-1));
    QCOMPARE(p->reportedTokens, std::int64_t(-1));
    QCOMPARE(p->slots.size(), std::size_t(1));
    QCOMPARE(p->slots.front().caller, std::string("nightly-eval"));
    QCOMPARE(p->slots.front().pidNs, std::uint64_t(4026531836));
    QCOMPARE(p->queue.size(), std::size_t(1));
    QCOMPARE(p->queue.front().reason, WaitReason::Slots);
    const std::int64_t t = 1795600000000;
    QCOMPARE(p->scope("")->window.usage(t).requests, std::int64_t(7));
    p->reportedAtMs = t;
    p->reportedRequests = 40;
    const std::string again = s->encode();
    QCOMPARE(
        static_cast<unsigned char>(again[4]), static_cast<unsigned char>(QuotaState::PLAIN_FORMAT_VERSION));
    auto back = QuotaState::decode(again);
    QVERIFY(back.ok());
    QCOMPARE(back->encode(), again);
    QCOMPARE(back->provider("openai")->reportedRequests, std::int64_t(40));
    QCOMPARE(back->provider("openai")->reportedTokens, std::int64_t(-1));
    QCOMPARE(back->provider("openai")->slots.front().leaseUntilMs, p->slots.front().leaseUntilMs);
}

// One report never stops callers for longer than RetryAfter::MAX_MS plus the jitter, whatever
// the Retry-After, the jitter or the limits (a hand-edited limits.json is refused, but the
// policy is a library function and must not trust its callers either).
void TestQuotaPolicy::backoffIsBoundedWhateverTheInputs()
{
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 1, INT64_MAX), RetryAfter::MAX_MS);
    QCOMPARE(QuotaPolicy::backoffFor(m_limits, 1, -5), m_limits.backoffBaseMs);
    ProviderLimits wild = m_limits;
    wild.backoffBaseMs = INT64_MAX;
    wild.backoffCapMs = INT64_MAX;
    QCOMPARE(QuotaPolicy::backoffFor(wild, 1 << 20, std::nullopt), QuotaLimits::MAX_BACKOFF_MS);
    wild.backoffBaseMs = -1;
    wild.backoffCapMs = 0;
    QCOMPARE(QuotaPolicy::backoffFor(wild, 3, std::nullopt), std::int64_t(1));

    const std::int64_t now = 1'700'000'000'000;
    auto& p = provider();
    QCOMPARE(QuotaPolicy::apply429(p, m_limits, now, INT64_MAX, INT64_MAX), RetryAfter::MAX_MS);
    QCOMPARE(p.backoffUntilMs, now + RetryAfter::MAX_MS + QuotaPolicy::MAX_JITTER_MS);
    QCOMPARE(QuotaPolicy::MAX_STOP_MS, RetryAfter::MAX_MS + QuotaPolicy::MAX_JITTER_MS);
}

// A forged or hand-edited state (anyone who may write the home may write state.bin) with times
// far in the future: callers are stopped at most MAX_STOP_MS from the first look at it, and
// the bound is written back so that it does not move with the clock.
void TestQuotaPolicy::forgedFarFutureTimesStopNobodyPastTheMaximum()
{
    const std::int64_t now = 1'700'000'000'000;
    QuotaPolicy::syncProvider(provider(), m_limits, now);
    auto& p = provider();
    p.backoffUntilMs = INT64_MAX;
    p.paceUntilMs = INT64_MAX;
    p.lastAdmitMs = INT64_MAX - 1;
    p.last429Ms = INT64_MAX;
    p.pausedAtMs = INT64_MAX;
    m_state.pausedAtMs = INT64_MAX;

    auto d = QuotaPolicy::evaluate(m_state, p, m_limits, req("a"), 0, now);
    QVERIFY(!d.admitted);
    QCOMPARE(d.reason, WaitReason::Backoff);
    QVERIFY2(d.retryAtMs <= now + QuotaPolicy::MAX_STOP_MS, qPrintable(QString::number(d.retryAtMs)));
    QCOMPARE(QuotaPolicy::backoffUntil(p, now), now + QuotaPolicy::MAX_STOP_MS);

    QVERIFY(QuotaPolicy::boundTimes(m_state, p, m_limits, now));
    QCOMPARE(p.backoffUntilMs, now + QuotaPolicy::MAX_STOP_MS);
    QVERIFY(p.paceUntilMs <= now + QuotaPolicy::MAX_STOP_MS + m_limits.windowMs);
    QCOMPARE(p.lastAdmitMs, now);
    QCOMPARE(p.last429Ms, now);
    QCOMPARE(p.pausedAtMs, now);
    QCOMPARE(m_state.pausedAtMs, now);
    QVERIFY(!QuotaPolicy::boundTimes(m_state, p, m_limits, now + 1)); // bounded: nothing moves

    // A window's buckets stamped far ahead (a clock that was set to the year 9999 and put
    // right): counted from the first look at them, for one window, not until that year.
    {
        QuotaState s;
        ProviderState& q = s.ensureProvider("anthropic");
        QuotaPolicy::syncProvider(q, m_limits, now);
        q.scopes.front().window.record(253402300799000, *m_limits.requests, 0);
        auto full = QuotaPolicy::evaluate(s, q, m_limits, req("a"), 0, now);
        QVERIFY(!full.admitted);
        QCOMPARE(full.reason, WaitReason::Window);
        QVERIFY(QuotaPolicy::boundTimes(s, q, m_limits, now));
        auto still = QuotaPolicy::evaluate(s, q, m_limits, req("a"), 0, now);
        QVERIFY(!still.admitted);
        QVERIFY2(
            still.retryAtMs <= now + 2 * m_limits.windowMs, qPrintable(QString::number(still.retryAtMs)));
        QVERIFY(QuotaPolicy::evaluate(s, q, m_limits, req("a"), 0, still.retryAtMs).admitted);
    }

    const std::int64_t later = now + QuotaPolicy::MAX_STOP_MS;
    QVERIFY(!QuotaPolicy::boundTimes(m_state, p, m_limits, later));
    auto after = admit(req("a"), later);
    QVERIFY(after.ok());
    QVERIFY(after->admitted); // the first admission after a backoff goes at once

    // A 429 on top of a forged backoff starts from the bound, not from the forged value.
    p.backoffUntilMs = INT64_MAX;
    QuotaPolicy::apply429(p, m_limits, later, std::nullopt, 0);
    QVERIFY(p.backoffUntilMs <= later + QuotaPolicy::MAX_STOP_MS);
    QVERIFY(p.paceUntilMs > p.backoffUntilMs); // no overflow into the past
}

void TestQuotaPolicy::holderStatusIsTheLimitersJudgement()
{
    m_limits.maxHoldMs = 10000;
    Slot ours { 1, 100, 0, 0, "a", "", FakeProbe::OUR_NS, 0, 0, "" };
    Slot foreign { 2, 33, 0, 0, "b", "", OTHER_NS, 0, 3000, "" };
    Slot unknown { 3, 44, 0, 0, "c", "", 0, 0, 0, "" };
    Slot placeholder { 4, 0, 0, 0, "", "", 0, 0, 0, "" };
    auto judge
        = [&](const Slot& s, std::int64_t now) { return HolderStatus::judge(s, m_limits, now, m_probe); };

    QCOMPARE(judge(ours, 500).state, HolderState::Alive);
    QCOMPARE(judge(ours, 500).ns, HolderNamespace::Ours);
    QCOMPARE(judge(ours, 500).heldMs, std::int64_t(500));
    QCOMPARE(judge(ours, 10001).state, HolderState::Overdue);
    m_probe.m_dead = 100;
    QCOMPARE(judge(ours, 500).state, HolderState::Gone);
    QCOMPARE(judge(ours, 500).whyGone, std::string("holder died"));
    m_probe.m_dead = 33; // a pid of ours that happens to be 33 says nothing about the foreign holder
    QCOMPARE(judge(foreign, 1000).state, HolderState::Leased);
    QCOMPARE(judge(foreign, 1000).ns, HolderNamespace::Other);
    QCOMPARE(judge(foreign, 1000).leaseLeftMs, std::int64_t(2000));
    QCOMPARE(judge(foreign, 3000).state, HolderState::Gone);
    QCOMPARE(judge(unknown, 1000).ns, HolderNamespace::Unknown);
    QCOMPARE(judge(unknown, 1000).state, HolderState::Leased); // lease: the maximum hold time
    QCOMPARE(judge(unknown, 10000).state, HolderState::Gone);
    QCOMPARE(judge(placeholder, 1000).state, HolderState::Placeholder);
    QCOMPARE(judge(placeholder, m_limits.windowMs).state, HolderState::Gone);
    // Every state agrees with the limiter's own test.
    for (const Slot& s : { ours, foreign, unknown, placeholder }) {
        for (std::int64_t now : { 0, 2999, 3000, 10001, 60000 }) {
            QCOMPARE(judge(s, now).state == HolderState::Gone,
                !QuotaPolicy::holderAlive(s, m_limits, now, m_probe));
        }
    }
}

QTEST_APPLESS_MAIN(TestQuotaPolicy)
#include "tst_quotapolicy.moc"
