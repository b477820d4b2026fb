#pragma once

// QuotaLimiter: the public API of the shared quota. Every operation is one atomic operation
// of a QuotaBackend (on a local store: one QuotaStore transaction running QuotaPolicy); waiting
// happens between operations, on the backend's change mark, until the policy's next possible
// admission time, a ring, or the deadline. What is the caller's, not the shared state's, is
// done here: sanitising names, who the caller is (pid, namespace, start time), the jitter draw.
//
// Waiting: a blocked request is queued (FIFO per provider) with its deadline and pid; it
// keeps its ticket across wake-ups, and leaves the queue when admitted, when it gives up
// (deadline, cancel), or — if it dies — when a later transaction finds its pid gone.
//
// Failing fast: a wait only a time can end (a backoff and the pacing after it, a full window
// or day) is judged at every look. When the earliest admission the policy names lies beyond
// the deadline, waiting would only hold the caller until the deadline and then refuse anyway:
// the acquire is refused at once, naming that time, so the caller can fall back (another
// model, another provider). A pause has no end in time at all: refused at once too. A queue
// ahead or held slots are not judged: a slot may come back at any moment. Judged under the
// limits in force: a limit raised later could have admitted sooner, but is no more foreseeable
// than a resume.

#include "backend/localquotabackend.h"
#include "backend/permit.h"
#include "backend/quotabackend.h"
#include "base/clock.h"
#include "quota/quotalimits.h"
#include "quota/quotapolicy.h"
#include "store/quotastore.h"
#include "system/processprobe.h"

#include <atomic>
#include <memory>
#include <optional>
#include <random>

namespace tollgate {

class QuotaLimiter
{
public:
    // Why the last acquire was refused (ErrorKind::Timeout naming no file), for a caller that
    // answers for it: a proxy's Retry-After, the CLI's --json.
    struct Refusal
    {
        WaitReason reason = WaitReason::None; // why it waited when it was refused
        // The earliest admission the policy names, in the clock's ms, when the wait is one a
        // time ends (a backoff, a full window or day; the earliest if nothing else is admitted
        // meanwhile); nullopt when no time ends it (a queue ahead, held slots, a pause).
        std::optional<std::int64_t> earliestMs;
        // Refused before its deadline: the earliest admission lies beyond it, or a pause.
        bool early = false;
        bool paused = false; // the provider, or everything, is paused
        std::string pauseReason; // the stored pause reason (when paused and readable)
    };

    static constexpr std::size_t MAX_CALLER_CHARS = 128;
    // A waiter re-checks at least this often even without a ring: the one event nobody rings
    // for is a slot holder's death.
    static constexpr std::chrono::milliseconds MAX_SLEEP { 250 };
    // The lease of a holder that renews it (`tollgate run`, every RUN_LEASE / 3): how long a
    // slot held from another pid namespace outlives its holder at most.
    static constexpr std::chrono::milliseconds RUN_LEASE { 30000 };
    static_assert(
        RUN_LEASE.count() == QuotaPolicy::RENEWED_LEASE_MS, "the policy's placeholders and stalls go by it");

    QuotaLimiter(QuotaBackend& backend, const Clock& clock, const ProcessProbe& probe);
    // On a local store (file, memory): the policy runs here, in the store's transactions.
    QuotaLimiter(QuotaStore& store, const Clock& clock, const ProcessProbe& probe);

    // Waits until admitted or the deadline (in the clock's time). A deadline at or before
    // now makes it a try: admitted now or ErrorKind::Timeout at once. Refused at once too
    // (ErrorKind::Timeout naming the time; lastRefusal() has it) when the earliest admission
    // lies beyond the deadline, or when paused (see "Failing fast" above). `cancel` (e.g. set by
    // a signal handler) ends the wait like a deadline. Both bound the waits for a local
    // store's lock too (StoreWait): a lock still held at the deadline (after the store's
    // floor, FileQuotaStore::MIN_LOCK_WAIT) fails with the store's ErrorKind::Timeout naming
    // the lock; a cancel while waiting for it ends the acquire as a cancel in the queue does
    // (ErrorKind::Timeout naming no file), nothing admitted.
    [[nodiscard]] Result<Permit> acquire(
        AdmitRequest request, WallTime deadline, const std::atomic<bool>* cancel = nullptr);
    // What the last acquire's refusal was (reset by each acquire; meaningful after one that
    // returned ErrorKind::Timeout naming no file).
    [[nodiscard]] const Refusal& lastRefusal() const { return m_lastRefusal; }
    // Returns the backoff now in force, in ms. `pid`: the process that got the 429, for the
    // history (0: this process).
    [[nodiscard]] Result<std::int64_t> report429(const std::string& provider, const std::string& caller,
        std::optional<std::int64_t> retryAfterMs, std::int64_t pid = 0);
    [[nodiscard]] Result<void> reportSuccess(const std::string& provider, const std::string& caller);

    // `wait`: how long to wait for a local store's lock (StoreWait; default: the store's own).
    [[nodiscard]] Result<QuotaLimits> limits(const StoreWait& wait = {});
    [[nodiscard]] Result<void> setLimits(
        const std::string& provider, const ProviderLimits& limits, const std::string& who);
    // Compare-and-set: sets the limits only when the provider's limits are still `expected`
    // (nullopt: the provider has none), judged under state.lock. true: set; false: they
    // changed meanwhile and nothing was done (`found`, when given, gets what is there now).
    // `what`: the history's description of the change (default: the new limits).
    [[nodiscard]] Result<bool> setLimitsIf(const std::string& provider,
        const std::optional<ProviderLimits>& expected, const ProviderLimits& limits, const std::string& who,
        std::optional<ProviderLimits>* found = nullptr, const std::string& what = {});
    [[nodiscard]] Result<void> removeLimits(const std::string& provider, const std::string& who);
    // Sets every provider of `incoming` at once (see QuotaBackend::importLimits).
    [[nodiscard]] Result<std::vector<std::string>> importLimits(
        const QuotaLimits& incoming, bool replace, const std::string& who, bool fresh = false);
    // provider empty: everything. The history's reason is "REASON (by WHO)", or "by WHO"
    // without a reason (then also the stored pause reason).
    [[nodiscard]] Result<void> pause(
        const std::string& provider, const std::string& reason, const std::string& who);
    [[nodiscard]] Result<void> resume(const std::string& provider, const std::string& who);
    [[nodiscard]] Result<void> resetBackoff(const std::string& provider, const std::string& who);
    // See QuotaBackend::holdUntil (`reason` is sanitised here).
    [[nodiscard]] Result<void> holdUntil(
        const std::string& provider, std::int64_t untilMs, const std::string& reason);
    // See QuotaBackend::noteRemaining.
    [[nodiscard]] Result<void> noteRemaining(const std::string& provider, const std::string& model,
        std::int64_t left, std::int64_t untilMs, std::uint64_t fence)
    {
        return m_backend->noteRemaining(provider, model, left, untilMs, fence);
    }
    // See QuotaBackend::noteReportedLimits (the proxy, from the answer's rate-limit headers).
    [[nodiscard]] Result<bool> noteReportedLimits(const std::string& provider, const ReportedLimits& reported,
        const PlanUsage& plan, const std::string& caller);
    // The provider's own requests and tokens only (for the provider's scope).
    [[nodiscard]] Result<bool> noteReportedLimits(const std::string& provider, std::int64_t requestsPerMin,
        std::int64_t tokensPerMin, const std::string& caller);
    // See QuotaBackend::correctTokens (the proxy, with the answer's real usage).
    [[nodiscard]] Result<void> correctTokens(const std::string& provider, const std::string& model,
        std::int64_t admittedAtMs, std::int64_t estimated, std::int64_t used);
    // See QuotaBackend::finishAdmission (Permit::finish; `report-ok --fence N --tokens-used N`).
    [[nodiscard]] Result<bool> finishAdmission(AdmissionEnd end);
    // Frees slots whose holder is dead (and, with overdue, held past the maximum hold time).
    [[nodiscard]] Result<int> releaseStale(bool overdue, const std::string& who);
    // Frees one slot by its fencing token. false: no such slot (already released/reclaimed).
    [[nodiscard]] Result<bool> releaseSlot(
        const std::string& provider, std::uint64_t fence, const std::string& who);
    // Extends the slot's lease to now + leaseMs (what readers in other pid namespaces go by).
    // false: no such slot any more (released by hand, or reclaimed).
    [[nodiscard]] Result<bool> renewSlot(
        const std::string& provider, std::uint64_t fence, std::int64_t leaseMs, const Slot* holder = nullptr);
    [[nodiscard]] Result<LimiterSnapshot> snapshot();
    // Records events made outside the quota (the dashboard's lock-file actions).
    [[nodiscard]] Result<void> record(const std::vector<HistoryEvent>& events);
    [[nodiscard]] QuotaBackend& backend() { return *m_backend; }

    void seedJitter(std::uint64_t seed) { m_rng.seed(seed); }
    // How soon a cancel set by another thread ends a wait: a waiter given a cancel flag looks at
    // it at least this often (0, the default: only at each look, MAX_SLEEP apart at most, or
    // when a signal interrupts the wait — what a signal handler's flag needs). In between it
    // reads only the change mark, no store operation. The C library's calls set it.
    void setCancelPoll(std::chrono::milliseconds every) { m_cancelPoll = every; }
    [[nodiscard]] static std::string sanitizeCaller(std::string_view caller);

private:
    [[nodiscard]] std::int64_t nowMs() const;
    // The backend's wait for a change, in slices of m_cancelPoll while `cancel` is not set.
    void waitForChange(
        std::uint32_t mark, std::chrono::milliseconds timeout, const std::atomic<bool>* cancel) const;
    // The refusal of a request whose wait cannot end before its deadline (m_lastRefusal says
    // why): it leaves the queue as a deadline would, and the error names the time.
    [[nodiscard]] Result<Permit> refuseEarly(AdmitStep& step, std::int64_t now, std::int64_t deadlineMs);

    std::unique_ptr<LocalQuotaBackend> m_ownBackend; // set by the QuotaStore constructor
    QuotaBackend* m_backend; // not owned (or m_ownBackend)
    const Clock* m_clock; // not owned
    const ProcessProbe* m_probe; // not owned
    std::mt19937_64 m_rng;
    std::int64_t m_selfPid = 0; // the process m_selfStartTicks belongs to
    std::uint64_t m_selfStartTicks = 0;
    Refusal m_lastRefusal;
    std::chrono::milliseconds m_cancelPoll { 0 };
};

} // namespace tollgate
