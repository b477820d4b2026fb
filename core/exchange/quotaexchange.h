#pragma once

// QuotaExchange: what one proxied request means for the shared quota, from its admission to
// what its answer says — the quota decisions `tollgate proxy` makes around an upstream
// exchange, without the transport (docs/PROXY.md, "A request's way" and "What the proxy
// learns from answers"):
//
//   askFor        one call, the estimated tokens in the provider's terms (input: the prompt's
//                 size, less what PromptEstimator expects the cache to read under a rule that
//                 does not count cache reads; output: the body's bound), the body's model, a
//                 parallel slot held for the whole exchange, under the caller's name. An
//                 estimate: never refused as too large, it waits for room instead
//   firstTry      a try (never queued); a request that must wait says so (mustWait)
//   waitInQueue   the wait in the quota's FIFO queue, until --queue-timeout or a cancel
//   conclude      a refusal as the client hears it: 429 with the limiter's own Retry-After
//                 after the queue timeout, or at once when the earliest admission lies beyond
//                 it (Retry-After: that time); at once and without Retry-After when paused (no
//                 time ends a pause); 400 for what can never be admitted, else 502
//   readHeaders   what the answer's rate-limit headers say, before its body streams: a budget
//                 at remaining 0 with a reset, or a subscription plan's window rejected, with
//                 its reset (a hold); a plan's warning (a history event, once per window); the
//                 provider's own limits and the plan's usage (the memo), kept in the state for
//                 the scope of the request's model, and with `limits set --learn` the unset
//                 limits of that scope following them (LimitLearning; a history event each)
//   settle        the slot back with the real usage counted by the CountingRule (input, output
//                 and their total) and, for a 2xx, the success, in one store operation; the
//                 counted input teaches the PromptEstimator; then a 429 reported for everyone,
//                 a subscription window's 429 holds until its reset, a spend cap pauses, an
//                 overload is recorded; an answer the upstream broke off is no success (a
//                 `broken-off` event, the estimate stands)
//   letGo         a slot the store did not take back is owed, and given back later
//
// Invariants:
// - Synchronous: every call is a few store operations at most (waitInQueue waits in the
//   queue). The proxy calls it from its store threads, never from its event loop — except
//   askFor and readHeaders, which do no store work.
// - One object serves every request of a proxy, from several threads at once: what it keeps
//   (the reported-limits memo, the slots owed, the prompt estimator, the last warning) is
//   thread-safe; a request's ExchangeStore is
//   the caller's, used by one thread at a time, and notes the store's failures.
// - Time is the injected clock's (the limiter's own clock dates admissions and windows).
// - No exception escapes: a store operation's error is a Result, noted in the ExchangeStore;
//   one that cannot be done leaves the quota as the store has it (the estimate stands, the
//   slot is owed).

#include "backend/permit.h"
#include "base/clock.h"
#include "base/result.h"
#include "exchange/exchangestore.h"
#include "exchange/owedslots.h"
#include "exchange/reportedlimitsmemo.h"
#include "provider/answerkind.h"
#include "provider/countingrule.h"
#include "provider/promptestimator.h"
#include "provider/ratelimitheaders.h"
#include "provider/requestestimate.h"
#include "provider/usagemeter.h"
#include "quota/quotapolicy.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace tollgate {

class QuotaExchange
{
public:
    // An answer of the proxy's own to a request the quota did not admit.
    struct Refusal
    {
        unsigned status = 0;
        std::string message;
        std::optional<std::int64_t> retryAfterSeconds;
    };

    // How an admission went: a permit, or a refusal (none to give when the client hung up
    // while it waited: hungUp), or (after a first try only) a wait in the queue to come.
    struct Admission
    {
        std::optional<Permit> permit;
        std::optional<Refusal> refusal;
        bool mustWait = false;
        bool hungUp = false;
    };

    // The longest hold a budget's headers can start (remaining 0 until a reset): the budgets
    // they describe are per minute (Anthropic's and OpenAI's RPM/TPM), so a reset further ahead
    // than a few minutes is not one of them (issue 26: "reset: 2999-01-01" stopped every caller
    // for a day). A subscription plan's window is not cut: its 5 hours are real.
    static constexpr std::int64_t MAX_HEADER_HOLD_MS = 3 * 60000;

    // What the upstream answered, as far as the quota cares.
    struct Answer
    {
        bool answered = false; // false: no answer came (status and the rest mean nothing)
        unsigned status = 0;
        std::optional<std::int64_t> retryAfterMs; // the answer's Retry-After (or -ms)
        std::string errorBody; // the first bytes of a non-2xx body
        std::optional<TokenUsage> usage; // a 2xx's real usage, if it said
        // Its headers said the subscription plan's window is used up (HeaderLesson::planRejected):
        // the hold until the reset answers its 429, which is then no rate limit to back off from
        // (a backoff would outlast the reset the provider named).
        bool planRejected = false;
        // The answer began but the upstream broke it off before its end (a stream cut short):
        // not a success whatever its status — no success reported, its estimate stands (the
        // usage it would have reported never came), a `broken-off` history event says so.
        bool brokenOff = false;
    };

    // The provider's word that `left` requests remain until untilMs, said in the answer to a
    // request for `model` admitted with `fence` (QuotaBackend::noteRemaining).
    struct RemainingWord
    {
        std::string model;
        std::int64_t left = 0;
        std::int64_t untilMs = 0;
        std::uint64_t fence = 0;
    };

    // What an answer's headers say (readHeaders), for learnFromHeaders.
    struct HeaderLesson
    {
        std::int64_t nowMs = 0; // when they were read
        std::optional<std::int64_t> retryAfterMs;
        // The provider's own word that a budget is spent until then (in the future), and what
        // said it (for the hold's history event).
        std::optional<std::int64_t> holdUntilMs;
        std::string holdWhat;
        bool planRejected = false; // the subscription plan's window is used up (a hold until its reset)
        // What the provider says remains of its requests (more than 0: 0 is a hold) until
        // requestsUntilMs (its reset, cut like a hold): no more admissions before then.
        std::optional<std::int64_t> requestsLeft;
        std::int64_t requestsUntilMs = 0;
        std::uint64_t fence = 0; // the answered request's admission (its caller sets it; 0: unknown)
        // A subscription plan's warning, the first of its window: the history event's words.
        std::string warning;
        // The provider's own limits per minute (-1: not in this answer) and a subscription
        // plan's usage, for the request's model, and whether the store is to be told of them
        // (ReportedLimitsMemo).
        ReportedLimitsMemo::Report report;
        std::string model;
        bool tell = false;
        // Whether learnFromHeaders has store work to do (most answers: none).
        [[nodiscard]] bool needsStore() const
        {
            return holdUntilMs.has_value() || requestsLeft.has_value() || tell || !warning.empty();
        }
        // The remaining-requests word, if the headers said one.
        [[nodiscard]] std::optional<RemainingWord> word() const
        {
            if (!requestsLeft)
                return std::nullopt;
            return RemainingWord { model, *requestsLeft, requestsUntilMs, fence };
        }
    };

    // Counts by CountingRule::forProvider(provider).
    QuotaExchange(std::string provider, std::chrono::milliseconds queueTimeout, const Clock& clock);
    QuotaExchange(
        std::string provider, CountingRule rule, std::chrono::milliseconds queueTimeout, const Clock& clock);
    QuotaExchange(const QuotaExchange&) = delete;
    QuotaExchange& operator=(const QuotaExchange&) = delete;

    [[nodiscard]] const std::string& provider() const { return m_provider; }
    [[nodiscard]] CountingRule rule() const { return m_rule; }

    // What a request asks of the shared quota: one call, its estimated tokens (split into the
    // counted input and the output bound) and model, a slot. `caller`: already sanitised
    // (QuotaLimiter::sanitizeCaller). Pass the same estimate's inputTokens to settle.
    [[nodiscard]] AdmitRequest askFor(const RequestEstimate& estimate, std::string caller) const;

    // The first try at admission: admitted now, refused, or mustWait when others wait or
    // there is no room yet.
    [[nodiscard]] Admission firstTry(ExchangeStore& store, const AdmitRequest& request) const;
    // Waits in the quota's FIFO queue until admitted, the queue timeout, or `cancel` (the
    // client hung up).
    [[nodiscard]] Result<Permit> waitInQueue(
        ExchangeStore& store, const AdmitRequest& request, const std::atomic<bool>& cancel) const;
    // The admission, or the refusal to answer, of what an acquire returned (the last acquire
    // of the store's limiter: its lastRefusal() names the earliest admission, or a pause).
    [[nodiscard]] Admission conclude(ExchangeStore& store, Result<Permit>&& permit, bool hungUp) const;
    // When a call could go again, in whole seconds (at least 1), as the SDKs' retry logic
    // reads Retry-After: the limiter's own verdict on the state as it is now. A held slot or
    // a pause is not time-bound: then 1 s (look again soon). A store read.
    [[nodiscard]] std::int64_t retryAfterSeconds(ExchangeStore& store) const;

    // What the answer's headers say of a request for `model`; no store work (the memo is asked
    // whether it is due).
    [[nodiscard]] HeaderLesson readHeaders(const HttpHeaders& headers, const std::string& model = {});
    // Acts on them before the body streams: a hold must be in place before the exchange's
    // slot is given back, or the next admission would not see it. `caller`: whose answer.
    void learnFromHeaders(ExchangeStore& store, const HeaderLesson& lesson, const std::string& caller);
    // The remaining-requests word alone (learnFromHeaders notes it first, before a hold): for
    // a proxy that notes it apart from the rest of the lesson. One store operation.
    void noteRemaining(ExchangeStore& store, const RemainingWord& word) const;

    // The end of the exchange: the slot back with the real usage as the rule counts it (none:
    // the estimate stands) and, for a 2xx, the success; then what the answer means (report429,
    // a hold, pause, overloaded). `promptTokens`: the request's whole prompt as estimated
    // (RequestEstimate::inputTokens), what the estimator learns the counted share of; 0: none.
    void settle(ExchangeStore& store, Permit& permit, const Answer& answer, const std::string& caller,
        std::int64_t promptTokens);
    // An exchange given up before any answer (the client left mid-body, a member named twice):
    // the slot back, the estimate stands, no success.
    void abandon(ExchangeStore& store, Permit& permit) const;

    // Lets go of a permit whose request is done: a slot it still holds is released, and owed
    // when the store does not take it back (the permit is detached then: its destructor must
    // not try, and wait, again).
    void letGo(Permit& permit);
    // Gives back the slots owed: taken back, gone already, or of a provider no longer known is
    // done; a store failure keeps it owed, and the rest untried (each try could wait a store's
    // whole timeout). `store` null: the store cannot be reached (all stay owed).
    void giveBackOwed(ExchangeStore* store);
    [[nodiscard]] bool owesSlots() const { return !m_owed.empty(); }
    [[nodiscard]] std::size_t owedSlots() const { return m_owed.size(); }

private:
    void learnFromAnswer(
        ExchangeStore& store, const AnswerKind& kind, const Answer& answer, const std::string& caller);
    // The input a request is admitted with: its whole prompt, or under a rule that leaves cache
    // reads out, what the estimator expects the provider to count.
    [[nodiscard]] std::int64_t countedInput(
        const std::string& caller, const std::string& model, std::int64_t promptTokens) const;
    // The subscription plan's part of the headers: a rejected window (a hold) and a warning.
    void readSubscription(const SubscriptionReport& plan, HeaderLesson& lesson);
    void recordWarning(ExchangeStore& store, const std::string& warning, const std::string& caller);
    // The reported limits and plan usage into the store, for the scope of `model`, and what
    // learning makes of them (one store read, one write, one compare-and-set when learning).
    [[nodiscard]] Result<bool> tellStore(QuotaLimiter& limiter, const ReportedLimitsMemo::Report& report,
        const std::string& model, const std::string& caller) const;

    const std::string m_provider;
    const CountingRule m_rule;
    const std::chrono::milliseconds m_queueTimeout;
    const Clock* m_clock; // not owned
    ReportedLimitsMemo m_reported;
    OwedSlots m_owed;
    mutable std::mutex m_promptMutex; // guards m_prompts (PromptEstimator is not synchronised)
    PromptEstimator m_prompts;
    std::mutex m_warnMutex; // guards m_warnedWindow
    std::string m_warnedWindow; // the window last warned of (its claim and reset): once per window
};

} // namespace tollgate
