#pragma once

// QuotaBackend: every state transition of the shared quota as one named, atomic operation —
// what QuotaLimiter calls. The limiter keeps what happens between operations (waiting on the
// change mark, deadlines, cancel, the jitter draw, who the caller is); a backend applies one
// operation against the shared state, all or nothing, and records its history events.
//
// Why named operations and not "run this function on the state": a backend whose state lives
// elsewhere (Redis: a Lua script per operation, run on the server in one round trip) cannot run
// our C++ inside its transaction, and a client-side read-modify-write would retry-storm across
// hosts and could be left half-done by a client that dies. The operations take everything they
// need as arguments and return everything they decide.
//
// Implementations: LocalQuotaBackend (QuotaPolicy, run inside a QuotaStore transaction: the file
// and memory stores). Time is the backend's: the local clock there, the server's TIME on Redis.

#include "history/historyevent.h"
#include "quota/quotalimits.h"
#include "quota/quotapolicy.h"
#include "quota/quotastate.h"
#include "quota/reportedlimits.h"
#include "store/quotastore.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace tollgate {

struct LimiterSnapshot
{
    QuotaState state;
    QuotaLimits limits;
    std::int64_t nowMs = 0;
};

// One admission attempt of a request that may already wait in the queue (ticket != 0).
struct AdmitStep
{
    AdmitRequest request; // sanitised, identity filled in
    std::uint64_t ticket = 0; // the queue ticket kept from an earlier step; 0: not queued
    bool enqueue = false; // queue the request when it is not admitted
    std::int64_t startMs = 0; // when the caller started waiting (for waited_ms)
    // The caller's deadline as the time left until it, by the caller's clock, when this step
    // was taken: a backend that decides on another clock (Redis: the server's) places the
    // deadline on its own, so a caller whose clock is off keeps its place in the queue. Unset:
    // request.deadlineMs less the backend's own idea of the caller's now.
    std::optional<std::int64_t> deadlineInMs;
    WaitReason firstReason = WaitReason::None; // why it first waited (for the history)
    // Names this acquire across its steps (below 2^53): a backend whose calls can lose their
    // reply (Redis) gives back what an acquire took when it never heard the answer.
    std::uint64_t requestId = 0;
    // How long this step may wait for a local store's lock, and what ends that wait early
    // (the caller's deadline and cancel flag); a backend without such a lock ignores it.
    StoreWait storeWait;
};

struct AdmitOutcome
{
    AdmitDecision decision;
    std::int64_t leaseMs = 0; // the lease of the slot taken (the holder renews it)
    std::int64_t nowMs = 0; // the backend's time of the decision
    // When a queued caller must look again at the latest, as a distance from the decision
    // (RedisQuotaBackend: its turn and its lease depend on it); -1: maxSleep() bounds it.
    std::int64_t lookAgainInMs = -1;
};

// How an admitted call ended (QuotaBackend::finishAdmission).
struct AdmissionEnd
{
    std::string provider;
    std::uint64_t fence = 0; // the admission (and its slot, if it took one)
    std::int64_t usedTokens = -1; // what it really used; -1: not known (the estimate stands)
    // The split of usedTokens as the provider counts it (CountingRule): -1, not known — a split
    // scope then keeps the estimate's input and output (the CLI's `report-ok --tokens-used`).
    std::int64_t usedInputTokens = -1;
    std::int64_t usedOutputTokens = -1;
    bool success = false;
    // When it holds no slot: what the admission counted, where the correction lands.
    std::int64_t admittedAtMs = 0;
    std::string model;
    std::int64_t estimated = 0;
    // The estimate's split (AdmitRequest::inputTokens / outputTokens; both 0: none). A slot keeps
    // only the total, so this comes from the permit even when the slot is found.
    std::int64_t estimatedInputTokens = 0;
    std::int64_t estimatedOutputTokens = 0;
    std::string caller;
};

class QuotaBackend
{
public:
    virtual ~QuotaBackend() = default;

    [[nodiscard]] virtual Result<AdmitOutcome> admit(const AdmitStep& step) = 0;
    // Leaves the queue; with `gaveUp`, records that the caller gave up (reason: why it waited).
    [[nodiscard]] virtual Result<void> leaveQueue(const AdmitStep& step, bool gaveUp, const std::string& why)
        = 0;
    // jitterDraw: a uniform random number drawn by the caller (the backend takes its share).
    [[nodiscard]] virtual Result<std::int64_t> report429(const std::string& provider,
        const std::string& caller, std::optional<std::int64_t> retryAfterMs, std::uint64_t jitterDraw,
        std::int64_t pid)
        = 0;
    [[nodiscard]] virtual Result<void> reportSuccess(const std::string& provider, const std::string& caller)
        = 0;

    [[nodiscard]] Result<QuotaLimits> limits() { return limits(StoreWait {}); }
    // `wait`: as AdmitStep::storeWait.
    [[nodiscard]] virtual Result<QuotaLimits> limits(const StoreWait& wait) = 0;
    // Sets a provider's limits; with `expected`, only when they are still that (compare-and-set:
    // false and `found` when not). `description`: the history's words (default: the limits).
    [[nodiscard]] virtual Result<bool> setLimits(const std::string& provider,
        const std::optional<ProviderLimits>* expected, const ProviderLimits& limits, const std::string& who,
        std::optional<ProviderLimits>* found, const std::string& description)
        = 0;
    [[nodiscard]] virtual Result<void> removeLimits(const std::string& provider, const std::string& who) = 0;
    // Sets every provider of `incoming` in one operation (limits moved from another home);
    // with `replace`, providers not in `incoming` are removed. A provider new to the home with
    // no state starts conservatively (a restore: what was spent is unknown), or empty with
    // `fresh` (the user says its quota is used nowhere else). Returns the providers changed.
    [[nodiscard]] virtual Result<std::vector<std::string>> importLimits(
        const QuotaLimits& incoming, bool replace, const std::string& who, bool fresh)
        = 0;
    // stored: the pause reason kept in the state; why: the history's reason before "(by who)".
    [[nodiscard]] virtual Result<void> pause(const std::string& provider, const std::string& stored,
        const std::string& why, const std::string& who)
        = 0;
    [[nodiscard]] virtual Result<void> resume(const std::string& provider, const std::string& who) = 0;
    [[nodiscard]] virtual Result<void> resetBackoff(const std::string& provider, const std::string& who) = 0;
    // The provider said nothing is left until `untilMs` (its rate-limit headers): nobody is
    // admitted before then. Extends the backoff (bounded like one 429, QuotaPolicy::MAX_STOP_MS)
    // without counting a 429; a time at or before the backoff already in force changes nothing
    // and records nothing (every answer may repeat it).
    [[nodiscard]] virtual Result<void> holdUntil(
        const std::string& provider, std::int64_t untilMs, const std::string& reason)
        = 0;
    // The provider's answer to a request for `model`, admitted with `fence` (0: unknown), said
    // `left` requests remain until `untilMs` (its rate-limit headers): no more admissions of the
    // model's class (its first; none: the provider's) than that, less those admitted after the
    // fence (the word may not count them), before then (QuotaPolicy::applyRemaining). No history
    // event: every answer says it.
    [[nodiscard]] virtual Result<void> noteRemaining(const std::string& provider, const std::string& model,
        std::int64_t left, std::int64_t untilMs, std::uint64_t fence)
        = 0;
    // The provider's own limits, per minute, as its answer's headers said them, for their scope
    // (ReportedLimits: -1, the answer did not say, and what is kept stays), and a subscription
    // plan's usage (plan.atMs 0: not stated; otherwise kept, dated now). Kept in the provider's
    // state (ProviderState::reported*, plan) when they differ from what is kept or the kept
    // report is older than LimitMismatch::REFRESH_MS (so a report per answer is not a write per
    // answer); a budget whose reported limit changed and differs from the scope's limit (not a
    // learned one) gets a limit-mismatch event in LimitMismatch's words, naming `caller`.
    // Returns whether the state was written.
    [[nodiscard]] virtual Result<bool> noteReportedLimits(const std::string& provider,
        const ReportedLimits& reported, const PlanUsage& plan, const std::string& caller)
        = 0;
    // An admission at `admittedAtMs` counted `estimated` tokens; it really used `used`: the
    // difference goes into the window bucket of the admission (RollingWindow::adjustTokens),
    // in the provider's window and, when `model` has one, the model's. No history event
    // (the admission already has one); a time in the future changes nothing.
    [[nodiscard]] virtual Result<void> correctTokens(const std::string& provider, const std::string& model,
        std::int64_t admittedAtMs, std::int64_t estimated, std::int64_t used)
        = 0;
    // The end of an admitted call, in one transaction: its slot is freed (a release event),
    // what it really used replaces its estimate (as correctTokens does) and a success resets
    // the 429 count with an ok event (as reportSuccess does). Returns whether the slot of
    // `end.fence` was found; without it (an admission that took no slot, or one released or
    // reclaimed meanwhile) the correction goes by end.admittedAtMs/model/estimated, and is
    // skipped when admittedAtMs is 0. With the used split known, input and output are corrected
    // too (LocalQuotaBackend; the Redis script corrects the total only, for now).
    [[nodiscard]] virtual Result<bool> finishAdmission(const AdmissionEnd& end) = 0;
    [[nodiscard]] virtual Result<int> releaseStale(bool overdue, const std::string& who) = 0;
    [[nodiscard]] virtual Result<bool> releaseSlot(
        const std::string& provider, std::uint64_t fence, const std::string& who)
        = 0;
    // Extends the slot's lease to now + leaseMs. `holder` (may be null): who holds it, so that a
    // slot the state lost (a state started again conservatively) is taken back from its
    // placeholders (QuotaPolicy::reestablish). false: the slot is gone and was not taken back.
    [[nodiscard]] virtual Result<bool> renewSlot(
        const std::string& provider, std::uint64_t fence, std::int64_t leaseMs, const Slot* holder)
        = 0;
    [[nodiscard]] virtual Result<LimiterSnapshot> snapshot() = 0;
    // Appends events made outside the quota (the dashboard's lock-file actions) to the history.
    [[nodiscard]] virtual Result<void> record(const std::vector<HistoryEvent>& events) = 0;

    // Waking: a mark read before an operation, and a wait until it moves (capacity may have
    // appeared) or the timeout passes.
    [[nodiscard]] virtual std::uint32_t changeMark() const = 0;
    virtual void waitForChange(std::uint32_t mark, std::chrono::nanoseconds timeout) const = 0;
    // The admission of this process's queued request `ticket` by a release that handed it its
    // slot (QuotaPolicy::handOff), when the ring carried it (a Redis home): taken once, no call
    // needed. None: the waiter's next look (admit) finds a handed slot by its ticket.
    [[nodiscard]] virtual std::optional<AdmitOutcome> takeHandOff(std::uint64_t /*ticket*/)
    {
        return std::nullopt;
    }
    // The longest a waiter sleeps without a ring (the one event nobody rings for is a slot
    // holder's death); each look is one operation on the store.
    [[nodiscard]] virtual std::chrono::milliseconds maxSleep() const
    {
        return std::chrono::milliseconds(250);
    }
    [[nodiscard]] virtual std::string describe() const = 0;
    // Whether this backend still owes its store something it does before its next operation,
    // and at the latest when it is destroyed (a leave that failed, an admission whose reply
    // was lost): destroying it then may wait for the store, briefly.
    [[nodiscard]] virtual bool owesCleanUp() const { return false; }
    // Problems that did not undo a committed operation (see QuotaStore::takeWarnings).
    [[nodiscard]] virtual std::vector<Error> takeWarnings() = 0;
};

} // namespace tollgate
