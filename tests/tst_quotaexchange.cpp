// QuotaExchange: the proxy's quota decisions for one request, without the transport — admission
// by the request's estimate, settling with the answer's real usage, what a 429, a spend cap
// and an overload mean, what rate-limit headers say (a hold, the provider's own limits, asked of
// the store only when worth it), and a slot the store did not take back, owed and given back
// later. Over the memory store (behind a switch that makes it fail) with a manual clock: every
// acquire is a try or a queue wait with no time to wait, so nothing sleeps.

#include "backend/quotalimiter.h"
#include "base/manualclock.h"
#include "exchange/quotaexchange.h"
#include "quota/limitmismatch.h"
#include "helpers/switchablestore.h"
#include "store/memoryquotastore.h"

#include <QDateTime>
#include <QTest>
#include <condition_variable>
#include <memory>
#include <thread>

using namespace tollgate;
using namespace std::chrono_literals;

namespace {

using test::SwitchableStore;

// An Anthropic answer's usage: most of the prompt read from the cache.
TokenUsage cachedUsage(std::int64_t uncached, std::int64_t written, std::int64_t read, std::int64_t output)
{
    TokenUsage u;
    u.uncachedInput = uncached;
    u.cacheCreation = written;
    u.cacheRead = read;
    u.input = uncached + written + read;
    u.output = output;
    return u;
}

// Limits in the provider's terms: input and output tokens per minute, no total.
ProviderLimits splitLimits()
{
    ProviderLimits l;
    l.requests = 100;
    l.inputTokens = 100000;
    l.outputTokens = 100000;
    l.windowMs = 60000;
    l.parallel = 4;
    return l;
}

// Sets `cancel` after `after` of real time: the clock is manual, so no queue timeout passes
// while a limiter waits; a wait that should not happen is cancelled (and fails the test)
// instead of hanging it.
std::jthread cancelAfter(std::atomic<bool>& cancel, std::chrono::seconds after)
{
    return std::jthread([&cancel, after](std::stop_token stop) {
        std::mutex m;
        std::unique_lock lock(m);
        std::condition_variable_any cv;
        (void)cv.wait_for(lock, stop, after, [] { return false; });
        if (!stop.stop_requested())
            cancel = true;
    });
}

HttpHeaders headers(std::initializer_list<std::pair<const char*, const char*>> list)
{
    HttpHeaders out;
    for (const auto& [name, value] : list)
        out.emplace_back(name, value);
    return out;
}

QuotaExchange::Answer answer(
    unsigned status, std::string body = {}, std::optional<std::int64_t> retryAfterMs = {})
{
    QuotaExchange::Answer a;
    a.answered = true;
    a.status = status;
    a.errorBody = std::move(body);
    a.retryAfterMs = retryAfterMs;
    return a;
}

} // namespace

class TestQuotaExchange final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();

    void aRequestIsAdmittedByItsEstimateWithASlot();
    void realUsageBelowTheEstimateFreesTheRest();
    void realUsageAboveTheEstimateCountsWhole();
    void aFailureWithoutUsageLeavesTheEstimate();
    void a429WithRetryAfterBacksEveryoneOff();
    void aSpendCapPausesTheProvider();
    void anOverloadIsRecordedWithoutBackoff();
    void anAnswerBrokenOffIsNoSuccess();
    void remainingZeroHoldsEveryoneUntilTheReset();
    void reportedLimitsAreToldOnlyWhenWorthIt();
    void anOwedSlotIsGivenBackLater();
    void aWaitThatIsCancelledSaysTheClientHungUp();
    void anAgentPromptOverTheLimitWaitsForRoomInsteadOfA400();
    void theAnthropicRuleLeavesCacheReadsOutAndLearnsTheShare();
    void otherRulesCountTheWholePrompt();
    void aRejectedSubscriptionWindowHoldsUntilItsReset();
    void aSubscriptionLimit429HoldsInsteadOfPausing();
    void aSubscriptionWarningIsRecordedOncePerWindow();
    void roomPastTheQueueTimeoutIsRefusedAtOnceWithItsTime();
    void theReportedLimitsAreKeptForTheClassOfTheModel();
    void learningFollowsTheProviderButNeverTheUsersLimits();
    void aPlansUsageIsKeptForStatus();
    void aHoldFromABudgetsHeadersIsCutToAFewMinutes();

private:
    // The provider's limits: `parallel` slots, 100 requests and 1000 tokens a minute, and the
    // same 1000 tokens for model "m".
    void setLimits(std::int64_t parallel = 2);
    QuotaExchange::Admission admit(
        std::int64_t tokens, const char* caller = "agent", const char* model = "m");
    const ProviderState& state();
    std::vector<HistoryEvent> events(EventType type);

    ManualClock m_clock { std::chrono::system_clock::now() };
    ProcessProbe m_probe;
    std::unique_ptr<SwitchableStore> m_store;
    std::unique_ptr<QuotaLimiter> m_limiter;
    std::unique_ptr<ExchangeStore> m_exchangeStore;
    std::unique_ptr<QuotaExchange> m_exchange;
    QuotaState m_state; // the last state() read
};

void TestQuotaExchange::init()
{
    m_clock.set(std::chrono::system_clock::now());
    m_exchange.reset();
    m_exchangeStore.reset();
    m_limiter.reset();
    m_store = std::make_unique<SwitchableStore>();
    m_limiter = std::make_unique<QuotaLimiter>(*m_store, m_clock, m_probe);
    m_limiter->seedJitter(1);
    m_exchangeStore = std::make_unique<ExchangeStore>(*m_limiter, m_probe);
    // A queue timeout of 0: a wait in the queue is a try (nothing sleeps here).
    m_exchange = std::make_unique<QuotaExchange>("p", 0ms, m_clock);
    setLimits();
}

void TestQuotaExchange::setLimits(std::int64_t parallel)
{
    ProviderLimits l;
    l.requests = 100;
    l.tokens = 1000;
    l.windowMs = 60000;
    l.parallel = parallel;
    ModelLimits m;
    m.tokens = 1000;
    l.models["m"] = m;
    QVERIFY(m_limiter->setLimits("p", l, "test").ok());
}

QuotaExchange::Admission TestQuotaExchange::admit(std::int64_t tokens, const char* caller, const char* model)
{
    RequestEstimate estimate;
    estimate.model = model;
    estimate.inputTokens = tokens / 2;
    estimate.maxOutputTokens = tokens - tokens / 2;
    return m_exchange->firstTry(*m_exchangeStore, m_exchange->askFor(estimate, caller));
}

const ProviderState& TestQuotaExchange::state()
{
    auto snap = m_limiter->snapshot();
    if (!snap.ok())
        qFatal("snapshot: %s", snap.error().describe().c_str());
    m_state = snap->state;
    return m_state.ensureProvider("p");
}

std::vector<HistoryEvent> TestQuotaExchange::events(EventType type)
{
    std::vector<HistoryEvent> out;
    auto batch = m_store->memory().history()->poll();
    if (batch.ok()) {
        for (const auto& e : batch->events) {
            if (e.type == type)
                out.push_back(e);
        }
    }
    return out;
}

void TestQuotaExchange::aRequestIsAdmittedByItsEstimateWithASlot()
{
    // What the request asks: one call for its body's model, its estimated tokens, a slot.
    const RequestEstimate estimate = RequestEstimate::of(R"({"model":"m","max_tokens":300,"messages":[]})");
    const AdmitRequest ask = m_exchange->askFor(estimate, "agent");
    QCOMPARE(ask.provider, std::string("p"));
    QCOMPARE(ask.caller, std::string("agent"));
    QCOMPARE(ask.model, std::string("m"));
    QCOMPARE(ask.tokens, estimate.tokens());
    QVERIFY(ask.tokens > 300);
    QVERIFY(ask.wantsSlot);

    auto first = m_exchange->firstTry(*m_exchangeStore, ask);
    QVERIFY(first.permit);
    QVERIFY(first.permit->holdsSlot());
    QVERIFY(!first.mustWait && !first.refusal && !first.hungUp);
    const ProviderState& p = state();
    QCOMPARE(p.slots.size(), std::size_t(1));
    QCOMPARE(p.scope("")->window.usage(m_clock.unixMs()).tokens, ask.tokens);
    QCOMPARE(p.scope("m")->window.usage(m_clock.unixMs()).tokens, ask.tokens);

    // No room left for this estimate in the window: not refused, but to wait in the queue.
    auto second = admit(1000 - ask.tokens + 1);
    QVERIFY(second.mustWait);
    QVERIFY(!second.permit && !second.refusal);
    QVERIFY(!m_exchangeStore->failed()); // a wait is an answer of a working store
    // The rest of the window taken: no call at all can go before the window moves.
    setLimits(3);
    auto rest = admit(1000 - ask.tokens);
    QVERIFY(rest.permit);
    // Its wait (no time to wait here) ends in a 429 whose Retry-After is the window's.
    std::atomic<bool> cancel { false };
    RequestEstimate tooMuch;
    tooMuch.inputTokens = 1000 - ask.tokens + 1;
    auto waited = m_exchange->waitInQueue(*m_exchangeStore, m_exchange->askFor(tooMuch, "late"), cancel);
    QVERIFY(!waited.ok());
    QCOMPARE(waited.error().kind, ErrorKind::Timeout);
    auto refused = m_exchange->conclude(*m_exchangeStore, std::move(waited), false);
    QVERIFY(refused.refusal);
    QCOMPARE(refused.refusal->status, 429u);
    QVERIFY(refused.refusal->message.find("'p'") != std::string::npos);
    QVERIFY(refused.refusal->retryAfterSeconds);
    QVERIFY(*refused.refusal->retryAfterSeconds > 1);
    QVERIFY(*refused.refusal->retryAfterSeconds <= 62); // the window, and one bucket (rollingwindow.h)
    QVERIFY(!refused.hungUp);

    // What can never be admitted (an unknown provider) is a 400, not a 429.
    AdmitRequest unknown = ask;
    unknown.provider = "nobody";
    auto never = m_exchange->firstTry(*m_exchangeStore, unknown);
    QVERIFY(never.refusal);
    QCOMPARE(never.refusal->status, 400u);
    QVERIFY(!never.hungUp); // a refusal to answer: the client is there
    QVERIFY(!never.refusal->retryAfterSeconds);
}

void TestQuotaExchange::realUsageBelowTheEstimateFreesTheRest()
{
    QVERIFY(m_limiter->report429("p", "x", 1).ok());
    m_clock.advance(5min); // past the backoff and the careful pace after it
    QCOMPARE(state().consecutive429, 1);
    auto admitted = admit(900);
    QVERIFY(admitted.permit);
    QVERIFY(admit(200).mustWait); // the estimate fills the window
    QuotaExchange::Answer ok = answer(200);
    ok.usage = TokenUsage { 100, 50 };
    m_exchange->settle(*m_exchangeStore, *admitted.permit, ok, "agent", 0);
    const ProviderState& p = state();
    QVERIFY(p.slots.empty());
    QCOMPARE(p.consecutive429, 0); // a success ends the 429 streak
    QCOMPARE(p.scope("")->window.usage(m_clock.unixMs()).tokens, std::int64_t(150));
    QCOMPARE(p.scope("m")->window.usage(m_clock.unixMs()).tokens, std::int64_t(150));
    QVERIFY(admit(800).permit); // the room the estimate took is free again
}

void TestQuotaExchange::realUsageAboveTheEstimateCountsWhole()
{
    auto admitted = admit(100);
    QVERIFY(admitted.permit);
    QuotaExchange::Answer ok = answer(200);
    ok.usage = TokenUsage { 300, 400 };
    m_exchange->settle(*m_exchangeStore, *admitted.permit, ok, "agent", 0);
    const ProviderState& p = state();
    QVERIFY(p.slots.empty());
    QCOMPARE(p.scope("")->window.usage(m_clock.unixMs()).tokens, std::int64_t(700));
    QCOMPARE(p.scope("m")->window.usage(m_clock.unixMs()).tokens, std::int64_t(700));
    QVERIFY(admit(301).mustWait); // 700 used of 1000
    QVERIFY(admit(300).permit);
}

void TestQuotaExchange::aFailureWithoutUsageLeavesTheEstimate()
{
    QVERIFY(m_limiter->report429("p", "x", 1).ok());
    m_clock.advance(5min);
    auto admitted = admit(400);
    QVERIFY(admitted.permit);
    m_exchange->settle(*m_exchangeStore, *admitted.permit, answer(500, R"({"error":"boom"})"), "agent", 0);
    const ProviderState& p = state();
    QVERIFY(p.slots.empty()); // the slot is back however the answer went
    QCOMPARE(p.consecutive429, 1); // no success: the streak stands
    QCOMPARE(p.backoffUntilMs <= m_clock.unixMs(), true); // and a 500 backs nobody off
    QCOMPARE(p.scope("")->window.usage(m_clock.unixMs()).tokens, std::int64_t(400));
    // No answer at all (the upstream never answered): the same, and nothing learnt.
    auto again = admit(100);
    QVERIFY(again.permit);
    m_exchange->settle(*m_exchangeStore, *again.permit, QuotaExchange::Answer {}, "agent", 0);
    QVERIFY(state().slots.empty());
    QCOMPARE(state().scope("")->window.usage(m_clock.unixMs()).tokens, std::int64_t(500));
    // Given up before any answer (abandon): the slot back, the estimate stands.
    auto third = admit(100);
    QVERIFY(third.permit);
    m_exchange->abandon(*m_exchangeStore, *third.permit);
    QVERIFY(!third.permit->holdsSlot());
    QVERIFY(state().slots.empty());
    QCOMPARE(state().scope("")->window.usage(m_clock.unixMs()).tokens, std::int64_t(600));
}

void TestQuotaExchange::a429WithRetryAfterBacksEveryoneOff()
{
    auto admitted = admit(100);
    QVERIFY(admitted.permit);
    const auto lesson
        = m_exchange->readHeaders(headers({ { "Retry-After", "30" }, { "content-type", "json" } }));
    QCOMPARE(lesson.retryAfterMs, std::optional<std::int64_t>(30000));
    QVERIFY(!lesson.needsStore()); // a retry-after alone is the settle's business
    m_exchange->settle(*m_exchangeStore, *admitted.permit,
        answer(429, R"({"type":"error","error":{"type":"rate_limit_error","message":"slow down"}})",
            lesson.retryAfterMs),
        "agent", 0);
    const ProviderState& p = state();
    QVERIFY(p.slots.empty());
    QCOMPARE(p.consecutive429, 1);
    QCOMPARE(p.rateLimitedTotal, std::uint64_t(1));
    QVERIFY(p.backoffUntilMs >= m_clock.unixMs() + 30000); // the provider's value is honoured
    QCOMPARE(events(EventType::RateLimited).size(), std::size_t(1));
    QCOMPARE(events(EventType::RateLimited)[0].caller, std::string("agent"));
    // Everyone backs off: the next request waits, and hears when to come back.
    auto next = admit(10, "other");
    QVERIFY(next.mustWait);
    std::atomic<bool> cancel { false };
    auto refused = m_exchange->conclude(*m_exchangeStore,
        m_exchange->waitInQueue(*m_exchangeStore, m_exchange->askFor(RequestEstimate {}, "other"), cancel),
        false);
    QVERIFY(refused.refusal);
    QCOMPARE(refused.refusal->status, 429u);
    QVERIFY(*refused.refusal->retryAfterSeconds >= 30);
    m_clock.advance(std::chrono::milliseconds(p.backoffUntilMs - m_clock.unixMs() + 1));
    m_clock.advance(5min); // and past the careful pace after it
    QVERIFY(admit(10, "other").permit);
}

void TestQuotaExchange::aSpendCapPausesTheProvider()
{
    auto admitted = admit(100);
    QVERIFY(admitted.permit);
    m_exchange->settle(*m_exchangeStore, *admitted.permit,
        answer(429,
            R"({"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}})"),
        "agent", 0);
    const ProviderState& p = state();
    QVERIFY(p.slots.empty());
    QVERIFY(p.paused);
    QVERIFY(p.pauseReason.find("spending cap") != std::string::npos);
    QCOMPARE(p.consecutive429, 0); // not a rate: no backoff
    QCOMPARE(p.backoffUntilMs <= m_clock.unixMs(), true);
    // Paused until someone resumes it, however long one waits: refused at once, even with a
    // long queue timeout, and without a Retry-After (no time ends a pause: the client's own
    // backoff applies).
    m_clock.advance(1h);
    QVERIFY(admit(10).mustWait);
    QuotaExchange patient("p", 1h, m_clock);
    std::atomic<bool> cancel { false };
    std::jthread watchdog = cancelAfter(cancel, 10s);
    auto refused = patient.conclude(*m_exchangeStore,
        patient.waitInQueue(*m_exchangeStore, patient.askFor(RequestEstimate {}, "b"), cancel), false);
    QVERIFY(refused.refusal);
    QCOMPARE(refused.refusal->status, 429u);
    QCOMPARE(refused.refusal->retryAfterSeconds, std::nullopt);
    QVERIFY2(
        refused.refusal->message.find("paused: the provider reports a spending cap") != std::string::npos,
        refused.refusal->message.c_str());
    QVERIFY2(
        refused.refusal->message.find("no known end") != std::string::npos, refused.refusal->message.c_str());
    QVERIFY(state().queue.empty());
    QVERIFY(m_limiter->resume("p", "test").ok());
    QVERIFY(admit(10).permit);
}

void TestQuotaExchange::anOverloadIsRecordedWithoutBackoff()
{
    auto admitted = admit(100);
    QVERIFY(admitted.permit);
    m_exchange->settle(*m_exchangeStore, *admitted.permit,
        answer(529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"),
        "agent", 0);
    const ProviderState& p = state();
    QVERIFY(p.slots.empty());
    QCOMPARE(p.consecutive429, 0);
    QVERIFY(!p.paused);
    const auto overloaded = events(EventType::Overloaded);
    QCOMPARE(overloaded.size(), std::size_t(1));
    QCOMPARE(overloaded[0].caller, std::string("agent"));
    QCOMPARE(overloaded[0].timeMs, m_clock.unixMs());
    QVERIFY(overloaded[0].reason.find("529") != std::string::npos);
    QVERIFY(admit(10).permit); // nobody backs off
}

// Issue 26 item 7: a 200 whose stream the upstream broke off is not a success — the 429 streak
// stands, no `ok` event, the slot back with the estimate standing — and a `broken-off` event
// says what happened.
void TestQuotaExchange::anAnswerBrokenOffIsNoSuccess()
{
    QVERIFY(m_limiter->report429("p", "x", 1).ok());
    m_clock.advance(5min); // past the backoff and the careful pace after it
    auto admitted = admit(900);
    QVERIFY(admitted.permit);
    QuotaExchange::Answer broken = answer(200);
    broken.brokenOff = true;
    m_exchange->settle(*m_exchangeStore, *admitted.permit, broken, "agent", 0);
    const ProviderState& p = state();
    QVERIFY(p.slots.empty());
    QCOMPARE(p.consecutive429, 1);
    QVERIFY(events(EventType::Ok).empty());
    QVERIFY(p.scope("")->window.usage(m_clock.unixMs()).tokens >= 900); // the estimate stands
    const auto brokenOff = events(EventType::BrokenOff);
    QCOMPARE(brokenOff.size(), std::size_t(1));
    QCOMPARE(brokenOff[0].caller, std::string("agent"));
    QVERIFY2(brokenOff[0].reason.find("broke off its 200 answer") != std::string::npos,
        brokenOff[0].reason.c_str());
}

void TestQuotaExchange::remainingZeroHoldsEveryoneUntilTheReset()
{
    auto admitted = admit(100);
    QVERIFY(admitted.permit);
    // A budget with something left, or spent with a reset already past: nothing to hold.
    QVERIFY(!m_exchange
                 ->readHeaders(headers(
                     { { "x-ratelimit-remaining-tokens", "5" }, { "x-ratelimit-reset-tokens", "20s" } }))
                 .needsStore());
    QVERIFY(!m_exchange->readHeaders(headers({ { "x-ratelimit-remaining-tokens", "0" } })).needsStore());
    // Spent until 20 s from now.
    const auto lesson = m_exchange->readHeaders(
        headers({ { "x-ratelimit-remaining-tokens", "0" }, { "x-ratelimit-reset-tokens", "20s" } }));
    QVERIFY(lesson.needsStore());
    QCOMPARE(lesson.holdUntilMs, std::optional<std::int64_t>(m_clock.unixMs() + 20000));
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    // In place before the slot is given back: the next admission sees it.
    QVERIFY(state().slots.size() == 1);
    QCOMPARE(state().backoffUntilMs, m_clock.unixMs() + 20000);
    QCOMPARE(state().consecutive429, 0); // a hold is not a 429
    const auto holds = events(EventType::Hold);
    QCOMPARE(holds.size(), std::size_t(1));
    QVERIFY(holds[0].reason.find("20 s from now (agent's answer)") != std::string::npos);
    QVERIFY(admit(10, "other").mustWait);
    m_clock.advance(19999ms);
    QVERIFY(admit(10, "other").mustWait);
    m_clock.advance(1ms);
    QVERIFY(admit(10, "other").permit);
}

void TestQuotaExchange::reportedLimitsAreToldOnlyWhenWorthIt()
{
    const auto reporting = [](const char* requests) {
        return headers({ { "anthropic-ratelimit-requests-limit", requests },
            { "anthropic-ratelimit-tokens-limit", "1000" } });
    };
    auto lesson = m_exchange->readHeaders(reporting("40"));
    QVERIFY(lesson.tell);
    QVERIFY(!lesson.holdUntilMs);
    QCOMPARE(lesson.report.limits.requests, std::int64_t(40));
    QCOMPARE(lesson.report.limits.tokens, std::int64_t(1000));
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    QCOMPARE(state().reportedRequests, std::int64_t(40));
    QCOMPARE(state().reportedTokens, std::int64_t(1000));
    const std::int64_t at = state().reportedAtMs;
    QCOMPARE(at, m_clock.unixMs());
    // 40 requests/min against 100: said once (the tokens agree: 1000 a minute).
    QCOMPARE(events(EventType::LimitMismatch).size(), std::size_t(1));

    // The same figures again, or none: the store is not asked.
    QVERIFY(!m_exchange->readHeaders(reporting("40")).needsStore());
    QVERIFY(!m_exchange->readHeaders(headers({ { "content-type", "json" } })).needsStore());
    m_clock.advance(std::chrono::milliseconds(LimitMismatch::REFRESH_MS - 1));
    QVERIFY(!m_exchange->readHeaders(reporting("40")).needsStore());
    // Once REFRESH_MS has passed the same figures are told again (still reported).
    m_clock.advance(1ms);
    lesson = m_exchange->readHeaders(reporting("40"));
    QVERIFY(lesson.tell);
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    QCOMPARE(state().reportedAtMs, at + LimitMismatch::REFRESH_MS);
    QVERIFY(!m_exchange->readHeaders(reporting("40")).needsStore());

    // Other figures are told at once; what the store did not take is told with the next answer.
    lesson = m_exchange->readHeaders(reporting("50"));
    QVERIFY(lesson.tell);
    m_store->down = true;
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    QVERIFY(m_exchangeStore->failed());
    m_store->down = false;
    QCOMPARE(state().reportedRequests, std::int64_t(40));
    lesson = m_exchange->readHeaders(reporting("50"));
    QVERIFY(lesson.tell);
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    QCOMPARE(state().reportedRequests, std::int64_t(50));
    QVERIFY(!m_exchange->readHeaders(reporting("50")).needsStore());
}

void TestQuotaExchange::anOwedSlotIsGivenBackLater()
{
    setLimits(1);
    auto admitted = admit(100);
    QVERIFY(admitted.permit);
    QVERIFY(admitted.permit->holdsSlot());
    const std::uint64_t fence = admitted.permit->fence();
    // The store fails just as the exchange ends: the slot is owed, the permit lets go of it.
    m_store->down = true;
    m_exchange->letGo(*admitted.permit);
    QVERIFY(!admitted.permit->holdsSlot());
    QCOMPARE(m_exchange->owedSlots(), std::size_t(1));
    QVERIFY(m_exchange->owesSlots());
    // Still down: still owed.
    m_exchange->giveBackOwed(m_exchangeStore.get());
    QCOMPARE(m_exchange->owedSlots(), std::size_t(1));
    QVERIFY(m_exchangeStore->failed());
    m_store->down = false;
    m_exchange->giveBackOwed(nullptr); // the store cannot be reached: still owed
    QCOMPARE(m_exchange->owedSlots(), std::size_t(1));
    // Meanwhile the slot looks held to everyone (its holder, this process, lives).
    QCOMPARE(state().slots.size(), std::size_t(1));
    QCOMPARE(state().slots[0].fence, fence);
    QVERIFY(admit(10, "other").mustWait);
    // Later the store takes it back: owed no more, and the next request gets the slot.
    ExchangeStore fresh(*m_limiter, m_probe);
    m_exchange->giveBackOwed(&fresh);
    QCOMPARE(m_exchange->owedSlots(), std::size_t(0));
    QVERIFY(!fresh.failed());
    QVERIFY(state().slots.empty());
    auto next = admit(10, "other");
    QVERIFY(next.permit);

    // A slot released by hand meanwhile is gone: not owed forever.
    m_store->down = true;
    m_exchange->letGo(*next.permit);
    m_store->down = false;
    QCOMPARE(m_exchange->owedSlots(), std::size_t(1));
    auto byHand = m_limiter->releaseSlot("p", next.permit->fence(), "test");
    QVERIFY(byHand.ok() && *byHand);
    m_exchange->giveBackOwed(&fresh);
    QCOMPARE(m_exchange->owedSlots(), std::size_t(0));
    // A permit whose slot the store took back is not owed.
    auto last = admit(10, "other");
    QVERIFY(last.permit);
    m_exchange->letGo(*last.permit);
    QCOMPARE(m_exchange->owedSlots(), std::size_t(0));
    QVERIFY(state().slots.empty());
}

void TestQuotaExchange::aWaitThatIsCancelledSaysTheClientHungUp()
{
    QuotaExchange patient("p", 1h, m_clock); // a long queue timeout: only the cancel ends the wait
    setLimits(1);
    auto holder = admit(10);
    QVERIFY(holder.permit);
    std::atomic<bool> cancel { true }; // the client is gone already
    auto waited = patient.waitInQueue(*m_exchangeStore, patient.askFor(RequestEstimate {}, "gone"), cancel);
    QVERIFY(!waited.ok());
    QCOMPARE(waited.error().kind, ErrorKind::Timeout);
    auto concluded = patient.conclude(*m_exchangeStore, std::move(waited), cancel.load());
    QVERIFY(concluded.hungUp);
    QVERIFY(!concluded.permit);
    QVERIFY(state().queue.empty()); // it left the queue
    QCOMPARE(state().slots.size(), std::size_t(1));
}

void TestQuotaExchange::anAgentPromptOverTheLimitWaitsForRoomInsteadOfA400()
{
    // The README's example: 40,000 tokens a minute. An agent's request whose body is estimated
    // at 83,070 tokens is larger than the whole limit; it is the proxy's estimate, not a cost
    // the caller stated, so it waits for an empty window instead of a 400 it could never avoid.
    ProviderLimits l;
    l.requests = 100;
    l.tokens = 40000;
    l.windowMs = 60000;
    l.parallel = 4;
    QVERIFY(m_limiter->setLimits("p", l, "test").ok());
    RequestEstimate agent;
    agent.model = "claude";
    agent.inputTokens = 83070 - 4096;
    agent.maxOutputTokens = 4096;
    const AdmitRequest ask = m_exchange->askFor(agent, "agent");
    QVERIFY(ask.estimated);
    QCOMPARE(ask.tokens, std::int64_t(83070));
    QCOMPARE(ask.outputTokens, std::int64_t(4096));
    auto small = admit(100, "other", "claude");
    QVERIFY(small.permit);
    auto first = m_exchange->firstTry(*m_exchangeStore, ask);
    QVERIFY(!first.refusal); // no "400 ... can never be admitted"
    QVERIFY(first.mustWait);
    // Its wait (no time to wait here) ends in the queue's 429, never a 400.
    std::atomic<bool> cancel { false };
    auto waited = m_exchange->conclude(
        *m_exchangeStore, m_exchange->waitInQueue(*m_exchangeStore, ask, cancel), false);
    QVERIFY(waited.refusal);
    QCOMPARE(waited.refusal->status, 429u);
    m_exchange->settle(*m_exchangeStore, *small.permit, answer(200), "other", 0);
    m_clock.advance(62s); // the window (and its last bucket) is empty: room for it, whole
    auto later = m_exchange->firstTry(*m_exchangeStore, ask);
    QVERIFY(later.permit);
    QCOMPARE(state().scope("")->window.usage(m_clock.unixMs()).tokens, std::int64_t(83070));
    QuotaExchange::Answer ok = answer(200);
    ok.usage = TokenUsage { 30000, 2000 };
    m_exchange->settle(*m_exchangeStore, *later.permit, ok, "agent", agent.inputTokens);
    QCOMPARE(state().scope("")->window.usage(m_clock.unixMs()).tokens, std::int64_t(32000));
}

void TestQuotaExchange::theAnthropicRuleLeavesCacheReadsOutAndLearnsTheShare()
{
    QuotaExchange anthropic("p", CountingRule(CountingRule::Kind::Anthropic), 0ms, m_clock);
    QCOMPARE(QuotaExchange("anthropic", 0ms, m_clock).rule(), CountingRule(CountingRule::Kind::Anthropic));
    QVERIFY(m_limiter->setLimits("p", splitLimits(), "test").ok());
    RequestEstimate first;
    first.model = "claude";
    first.inputTokens = 20000;
    first.maxOutputTokens = 8000;
    // A caller's first call: the whole prompt, and the output bound reserved.
    const AdmitRequest ask = anthropic.askFor(first, "agent");
    QCOMPARE(ask.inputTokens, std::int64_t(20000));
    QCOMPARE(ask.outputTokens, std::int64_t(8000));
    QCOMPARE(ask.tokens, std::int64_t(28000));
    auto admitted = anthropic.firstTry(*m_exchangeStore, ask);
    QVERIFY(admitted.permit);
    auto used = state().scope("")->window.usage(m_clock.unixMs());
    QCOMPARE(used.input, std::int64_t(20000));
    QCOMPARE(used.output, std::int64_t(8000));
    // The answer: 150 uncached, 350 written to the cache, 16,000 read from it, 600 out.
    QuotaExchange::Answer ok = answer(200);
    ok.usage = cachedUsage(150, 350, 16000, 600);
    anthropic.settle(*m_exchangeStore, *admitted.permit, ok, "agent", first.inputTokens);
    used = state().scope("")->window.usage(m_clock.unixMs());
    QCOMPARE(used.input, std::int64_t(500)); // cache reads do not count
    QCOMPARE(used.output, std::int64_t(600)); // the reservation corrected to the real output
    QCOMPARE(used.tokens, std::int64_t(1100));
    // The conversation's next call, 1,000 tokens longer: only what it added is new, and the
    // last call's share (500 / 20,000 of 21,000: 525) is less.
    RequestEstimate second = first;
    second.inputTokens = 21000;
    const AdmitRequest next = anthropic.askFor(second, "agent");
    QCOMPARE(next.inputTokens, std::int64_t(1000));
    QCOMPARE(next.tokens, std::int64_t(9000));
    QVERIFY(next.estimated);
    // Another caller, or the same model's cache long gone: the whole prompt.
    QCOMPARE(anthropic.askFor(second, "other").inputTokens, std::int64_t(21000));
    m_clock.advance(std::chrono::milliseconds(PromptEstimator::CACHE_TTL_MS + 1));
    QCOMPARE(anthropic.askFor(second, "agent").inputTokens, std::int64_t(21000));
}

void TestQuotaExchange::otherRulesCountTheWholePrompt()
{
    QVERIFY(m_limiter->setLimits("p", splitLimits(), "test").ok());
    QuotaExchange openai("p", CountingRule(CountingRule::Kind::OpenAi), 0ms, m_clock);
    RequestEstimate first;
    first.model = "gpt";
    first.inputTokens = 20000;
    first.maxOutputTokens = 8000;
    auto admitted = openai.firstTry(*m_exchangeStore, openai.askFor(first, "agent"));
    QVERIFY(admitted.permit);
    QuotaExchange::Answer ok = answer(200);
    ok.usage = cachedUsage(500, 0, 16000, 600);
    openai.settle(*m_exchangeStore, *admitted.permit, ok, "agent", first.inputTokens);
    const auto used = state().scope("")->window.usage(m_clock.unixMs());
    QCOMPARE(used.input, std::int64_t(16500)); // cached tokens count toward OpenAI's limit
    QCOMPARE(used.output, std::int64_t(600));
    // Nothing learnt, nothing taken off: the next call counts its whole prompt.
    RequestEstimate second = first;
    second.inputTokens = 21000;
    QCOMPARE(openai.askFor(second, "agent").inputTokens, std::int64_t(21000));
    // A usage without its split (a CLI's --tokens-used) keeps working: only the total moves.
    auto plain = openai.firstTry(*m_exchangeStore, openai.askFor(second, "agent"));
    QVERIFY(plain.permit);
    QVERIFY(plain.permit->finish(1000, true).ok());
    const auto after = state().scope("")->window.usage(m_clock.unixMs());
    QCOMPARE(after.tokens, std::int64_t(17100 + 1000));
    QCOMPARE(after.input, std::int64_t(16500 + 21000)); // the estimate's split stands
}

void TestQuotaExchange::aRejectedSubscriptionWindowHoldsUntilItsReset()
{
    auto admitted = admit(100);
    QVERIFY(admitted.permit);
    const std::int64_t resetMs = (m_clock.unixMs() / 1000 + 2 * 3600) * 1000;
    const std::string reset = std::to_string(resetMs / 1000);
    const auto lesson
        = m_exchange->readHeaders(headers({ { "anthropic-ratelimit-unified-status", "rejected" },
            { "anthropic-ratelimit-unified-reset", reset.c_str() },
            { "anthropic-ratelimit-unified-representative-claim", "five_hour" },
            { "anthropic-ratelimit-unified-5h-utilization", "1.0" },
            { "anthropic-ratelimit-unified-7d-utilization", "0.41" } }));
    QVERIFY(lesson.needsStore());
    QCOMPARE(lesson.holdUntilMs, std::optional<std::int64_t>(resetMs));
    QVERIFY(lesson.warning.empty());
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    QCOMPARE(state().backoffUntilMs, resetMs);
    QVERIFY(!state().paused);
    QCOMPARE(state().consecutive429, 0);
    const auto holds = events(EventType::Hold);
    QCOMPARE(holds.size(), std::size_t(1));
    QVERIFY(holds[0].reason.find("five_hour window (5h 100%, 7d 41%) is used up") != std::string::npos);
    QVERIFY(holds[0].reason.find("(agent's answer)") != std::string::npos);
    // Its 429 is answered by the hold: no backoff that would outlast the reset.
    QuotaExchange::Answer refused
        = answer(429, R"({"type":"error","error":{"type":"rate_limit_error","message":"rate limited"}})");
    refused.planRejected = lesson.planRejected;
    QVERIFY(refused.planRejected);
    m_exchange->settle(*m_exchangeStore, *admitted.permit, refused, "agent", 0);
    QCOMPARE(state().consecutive429, 0);
    QCOMPARE(state().backoffUntilMs, resetMs);
    QVERIFY(admit(10, "other").mustWait);
    m_clock.advance(std::chrono::milliseconds(resetMs - m_clock.unixMs() - 1));
    QVERIFY(admit(10, "other").mustWait);
    m_clock.advance(1ms);
    QVERIFY(admit(10, "other").permit);
}

void TestQuotaExchange::aSubscriptionLimit429HoldsInsteadOfPausing()
{
    auto admitted = admit(100);
    QVERIFY(admitted.permit);
    const std::int64_t resetMs = (m_clock.unixMs() / 1000 + 3 * 3600) * 1000;
    const std::string body
        = R"({"type":"error","error":{"type":"rate_limit_error","message":"Claude AI usage limit reached|)"
        + std::to_string(resetMs / 1000) + R"("}})";
    m_exchange->settle(*m_exchangeStore, *admitted.permit, answer(429, body), "agent", 0);
    const ProviderState& p = state();
    QVERIFY(p.slots.empty());
    QVERIFY(!p.paused); // it ends by itself: nobody has to resume it
    QCOMPARE(p.backoffUntilMs, resetMs);
    QCOMPARE(p.consecutive429, 0);
    const auto holds = events(EventType::Hold);
    QCOMPARE(holds.size(), std::size_t(1));
    QVERIFY(holds[0].reason.find("usage limit is reached") != std::string::npos);
    QVERIFY(holds[0].reason.find("(agent's 429)") != std::string::npos);
    QVERIFY(events(EventType::Pause).empty());
    QVERIFY(admit(10, "other").mustWait);
    m_clock.advance(std::chrono::milliseconds(resetMs - m_clock.unixMs()));
    QVERIFY(admit(10, "other").permit);
}

void TestQuotaExchange::aSubscriptionWarningIsRecordedOncePerWindow()
{
    const std::int64_t resetS = m_clock.unixMs() / 1000 + 3600;
    const auto warn = [&](std::int64_t reset, const char* used) {
        const std::string r = std::to_string(reset);
        return m_exchange->readHeaders(headers({ { "anthropic-ratelimit-unified-status", "allowed_warning" },
            { "anthropic-ratelimit-unified-reset", r.c_str() },
            { "anthropic-ratelimit-unified-representative-claim", "five_hour" },
            { "anthropic-ratelimit-unified-5h-utilization", used } }));
    };
    const auto first = warn(resetS, "0.85");
    QVERIFY(first.needsStore());
    QVERIFY(!first.holdUntilMs); // a warning holds nobody
    QVERIFY(first.warning.find("five_hour window (5h 85%) is nearly used up") != std::string::npos);
    m_exchange->learnFromHeaders(*m_exchangeStore, first, "agent");
    // Every answer of the window repeats it: the store is not asked again.
    const auto again = warn(resetS, "0.852"); // within a percentage point: not news for the state
    QVERIFY(again.warning.empty());
    QVERIFY(!again.needsStore());
    const auto warnings = events(EventType::QuotaWarning);
    QCOMPARE(warnings.size(), std::size_t(1));
    QCOMPARE(warnings[0].caller, std::string("agent"));
    QVERIFY(warnings[0].reason.find("resets 3600 s from now") != std::string::npos);
    QCOMPARE(state().backoffUntilMs <= m_clock.unixMs(), true);
    QVERIFY(admit(10).permit);
    // The next window warns again.
    QVERIFY(!warn(resetS + 5 * 3600, "0.8").warning.empty());
}

// Issue 25 item 6: the window is full for a minute and the queue timeout is 5 s: the client
// hears at once (not after 5 s) when to come back, and can go elsewhere meanwhile.
void TestQuotaExchange::roomPastTheQueueTimeoutIsRefusedAtOnceWithItsTime()
{
    QuotaExchange patient("p", 5s, m_clock);
    auto full = admit(1000); // the window's (and model m's) 1000 tokens
    QVERIFY(full.permit);
    patient.abandon(*m_exchangeStore, *full.permit);
    RequestEstimate estimate;
    estimate.model = "m";
    estimate.inputTokens = 5;
    estimate.maxOutputTokens = 5;
    const AdmitRequest ask = patient.askFor(estimate, "late");
    QVERIFY(patient.firstTry(*m_exchangeStore, ask).mustWait);
    std::atomic<bool> cancel { false };
    std::jthread watchdog = cancelAfter(cancel, 10s);
    auto refused
        = patient.conclude(*m_exchangeStore, patient.waitInQueue(*m_exchangeStore, ask, cancel), false);
    QVERIFY(!cancel.load());
    QVERIFY(refused.refusal);
    QVERIFY(!refused.hungUp);
    QCOMPARE(refused.refusal->status, 429u);
    QVERIFY(refused.refusal->retryAfterSeconds);
    // The room comes when the admission leaves the window: 60 s (plus a bucket or two), rounded up.
    QVERIFY2(*refused.refusal->retryAfterSeconds >= 60 && *refused.refusal->retryAfterSeconds <= 65,
        std::to_string(*refused.refusal->retryAfterSeconds).c_str());
    QVERIFY2(refused.refusal->message.find("past this call's deadline") != std::string::npos,
        refused.refusal->message.c_str());
    QVERIFY(state().queue.empty());
    const auto gaveUp = events(EventType::GaveUp);
    QCOMPARE(gaveUp.size(), std::size_t(1));
    QCOMPARE(gaveUp[0].caller, std::string("late"));
}

QTEST_APPLESS_MAIN(TestQuotaExchange)
#include "tst_quotaexchange.moc"

// Anthropic states the limits of the request's model class: kept for that class, compared with
// its limits (input and output too), none learned while learning is off.
void TestQuotaExchange::theReportedLimitsAreKeptForTheClassOfTheModel()
{
    ProviderLimits l = splitLimits();
    ModelLimits opus;
    opus.inputTokens = 30000;
    opus.match = { "claude-opus-4*" };
    l.models["opus"] = opus;
    QVERIFY(m_limiter->setLimits("p", l, "test").ok());
    const auto said = headers({ { "anthropic-ratelimit-requests-limit", "50" },
        { "anthropic-ratelimit-input-tokens-limit", "40000" }, { "anthropic-ratelimit-output-tokens-limit", "8000" } });
    auto lesson = m_exchange->readHeaders(said, "claude-opus-4-1");
    QVERIFY(lesson.tell);
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    QCOMPARE(state().reportedScope, std::string("opus"));
    QCOMPARE(state().reportedInputTokens, std::int64_t(40000));
    QCOMPARE(state().reportedOutputTokens, std::int64_t(8000));
    QCOMPARE(state().reportedRequests, std::int64_t(50));
    const auto mismatches = events(EventType::LimitMismatch);
    QCOMPARE(mismatches.size(), std::size_t(3)); // requests, input, output: the class has only input
    QCOMPARE(mismatches[1].reason,
        std::string("provider reports 40000 input tokens/min for class opus; Tollgate is set to 30000"));
    QCOMPARE(mismatches[2].reason,
        std::string("provider reports 8000 output tokens/min for class opus; Tollgate sets no output-token limit"));
    auto after = m_limiter->limits();
    QVERIFY(after);
    QCOMPARE(*after->find("p"), l); // learning is off: nothing changed
    // The same answer for another model of the class is news for this process once (per model).
    QVERIFY(m_exchange->readHeaders(said, "claude-opus-4-5").tell);
    QVERIFY(!m_exchange->readHeaders(said, "claude-opus-4-1").tell);
    // A model in no class: the provider's own limits.
    lesson = m_exchange->readHeaders(said, "claude-haiku-3");
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    QCOMPARE(state().reportedScope, std::string());
}

void TestQuotaExchange::learningFollowsTheProviderButNeverTheUsersLimits()
{
    ProviderLimits l;
    l.requests = 20; // the user's: never overwritten
    l.windowMs = 30000; // half a minute: a learned figure is halved
    l.learn = true;
    QVERIFY(m_limiter->setLimits("p", l, "test").ok());
    const auto said = [](const char* input) {
        return headers({ { "anthropic-ratelimit-requests-limit", "50" },
            { "anthropic-ratelimit-input-tokens-limit", input }, { "anthropic-ratelimit-output-tokens-limit", "8000" } });
    };
    auto lesson = m_exchange->readHeaders(said("40000"), "claude-sonnet-4");
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    auto after = m_limiter->limits();
    QVERIFY(after);
    const ProviderLimits* learned = after->find("p");
    QCOMPARE(learned->requests, std::optional<std::int64_t>(20));
    QCOMPARE(learned->inputTokens, std::optional<std::int64_t>(20000));
    QCOMPARE(learned->outputTokens, std::optional<std::int64_t>(4000));
    QCOMPARE(learned->learned, (std::vector<std::string> { "input_tokens", "output_tokens" }));
    auto changes = events(EventType::Limits);
    QVERIFY(!changes.empty());
    QVERIFY2(changes.back().reason.find(
                 "learned from agent's answer: input_tokens none -> 20000, output_tokens none -> 4000")
            == 0,
        changes.back().reason.c_str());
    // The user's requests differ (50/min against 20 per 30 s): flagged, not learned.
    QCOMPARE(events(EventType::LimitMismatch).size(), std::size_t(1));

    // The provider raises its input limit: the learned limit follows (one more event).
    const std::size_t before = events(EventType::Limits).size();
    lesson = m_exchange->readHeaders(said("60000"), "claude-sonnet-4");
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    after = m_limiter->limits();
    QCOMPARE(after->find("p")->inputTokens, std::optional<std::int64_t>(30000));
    QCOMPARE(events(EventType::Limits).size(), before + 1);

    // The user sets input tokens: theirs from now on, and the provider's next figure is not taken.
    ProviderLimits mine = *after->find("p");
    mine.inputTokens = 25000;
    std::erase(mine.learned, std::string("input_tokens"));
    QVERIFY(m_limiter->setLimits("p", mine, "test").ok());
    lesson = m_exchange->readHeaders(said("70000"), "claude-sonnet-4");
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    after = m_limiter->limits();
    QCOMPARE(after->find("p")->inputTokens, std::optional<std::int64_t>(25000));
    QCOMPARE(after->find("p")->learned, std::vector<std::string> { "output_tokens" });
}

void TestQuotaExchange::aPlansUsageIsKeptForStatus()
{
    const std::int64_t nowS = m_clock.unixMs() / 1000;
    const std::string reset5h = std::to_string(nowS + 3600);
    const std::string reset7d = std::to_string(nowS + 3 * 86400);
    auto lesson = m_exchange->readHeaders(headers({ { "anthropic-ratelimit-unified-status", "allowed" },
        { "anthropic-ratelimit-unified-5h-utilization", "0.42" },
        { "anthropic-ratelimit-unified-5h-reset", reset5h.c_str() },
        { "anthropic-ratelimit-unified-7d-utilization", "1e300" }, // nonsense: left out
        { "anthropic-ratelimit-unified-7d-reset", reset7d.c_str() } }));
    QVERIFY(lesson.tell);
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    const PlanUsage& plan = state().plan;
    QCOMPARE(plan.atMs, m_clock.unixMs());
    QCOMPARE(plan.status, PlanUsage::Status::Allowed);
    QCOMPARE(plan.fiveHourPermille, std::int64_t(420));
    QCOMPARE(plan.fiveHourResetMs, (nowS + 3600) * 1000);
    QCOMPARE(plan.sevenDayPermille, std::int64_t(-1));
    // A 7-day reset is cut to a day ahead (RateLimitHeaders), never later.
    QVERIFY(plan.sevenDayResetMs <= m_clock.unixMs() + 86400000);
    // The state keeps it across an encode (format 5).
    auto snap = m_limiter->snapshot();
    QVERIFY(snap);
    auto back = QuotaState::decode(snap->state.encode());
    QVERIFY(back);
    QCOMPARE(back->provider("p")->plan, plan);
}

// Issue 26 item 4: `remaining: 0` with a reset in the year 2999 stopped every caller for a day.
// A budget the headers state is per minute: its hold is cut to MAX_HEADER_HOLD_MS, and said so.
void TestQuotaExchange::aHoldFromABudgetsHeadersIsCutToAFewMinutes()
{
    auto lesson = m_exchange->readHeaders(headers({ { "anthropic-ratelimit-requests-remaining", "0" },
        { "anthropic-ratelimit-requests-reset", "2999-01-01T00:00:00Z" } }));
    QVERIFY(lesson.holdUntilMs);
    QCOMPARE(*lesson.holdUntilMs, m_clock.unixMs() + QuotaExchange::MAX_HEADER_HOLD_MS);
    m_exchange->learnFromHeaders(*m_exchangeStore, lesson, "agent");
    QCOMPARE(state().backoffUntilMs, m_clock.unixMs() + QuotaExchange::MAX_HEADER_HOLD_MS);
    const auto holds = events(EventType::Hold);
    QCOMPARE(holds.size(), std::size_t(1));
    QVERIFY2(holds[0].reason.find("is cut to 3 min") != std::string::npos, holds[0].reason.c_str());
    // A reset within the bound is kept as said.
    const std::int64_t soonS = m_clock.unixMs() / 1000 + 200;
    const std::string soon = QDateTime::fromSecsSinceEpoch(soonS, Qt::UTC).toString(Qt::ISODate).toStdString();
    lesson = m_exchange->readHeaders(headers({ { "anthropic-ratelimit-tokens-remaining", "0" },
        { "anthropic-ratelimit-tokens-reset", soon.c_str() } }));
    QVERIFY(lesson.holdUntilMs);
    QVERIFY(*lesson.holdUntilMs <= m_clock.unixMs() + QuotaExchange::MAX_HEADER_HOLD_MS);
    QVERIFY(lesson.holdWhat.find("cut") != std::string::npos); // 200 s is past 3 min too
    lesson = m_exchange->readHeaders(headers({ { "anthropic-ratelimit-tokens-remaining", "0" },
        { "anthropic-ratelimit-tokens-reset",
            QDateTime::fromSecsSinceEpoch(soonS - 150, Qt::UTC).toString(Qt::ISODate).toStdString().c_str() } }));
    QVERIFY(lesson.holdUntilMs);
    QCOMPARE(*lesson.holdUntilMs, (soonS - 150) * 1000);
    QVERIFY(lesson.holdWhat.find("cut") == std::string::npos);
}
