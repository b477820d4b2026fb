#include "backend/quotalimiter.h"

#include "base/intmath.h"
#include "base/textsanitizer.h"

#include <algorithm>
#include <cerrno>
#include <ctime>

namespace tollgate {

namespace {

// The time left until a deadline, as a step carries it, is kept within 2^53 ms either way (a
// backend may send it as a number exact in a Lua double).
constexpr std::int64_t MAX_DEADLINE_IN_MS = std::int64_t(1) << 53;

// The waits only a time ends: the policy's retry time is then the earliest admission (if
// nothing else is admitted meanwhile). A queue ahead, held slots and a pause have none.
bool endsInTime(WaitReason reason)
{
    return reason == WaitReason::Backoff || reason == WaitReason::Window || reason == WaitReason::Tokens;
}

// A wall-clock time in UTC, as the proxy's remote clients and the CLI's user both read it:
// "21:33:05 UTC", with the date when it is not within the day.
std::string clockTime(std::int64_t atMs, std::int64_t nowMs)
{
    const std::time_t t = static_cast<std::time_t>(atMs / 1000);
    std::tm tm {};
    ::gmtime_r(&t, &tm);
    char buf[40];
    const bool sameDay = atMs - nowMs < 20 * 3600 * 1000;
    std::strftime(buf, sizeof buf, sameDay ? "%H:%M:%S UTC" : "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buf;
}

// "58 s", "42 min", "3 h" (rounded up: never sooner than it is).
std::string inWords(std::int64_t ms)
{
    const std::int64_t s = (std::max<std::int64_t>(ms, 0) + 999) / 1000;
    if (s < 120)
        return std::to_string(s) + " s";
    if (s < 120 * 60)
        return std::to_string((s + 59) / 60) + " min";
    return std::to_string((s + 3599) / 3600) + " h";
}

} // namespace

QuotaLimiter::QuotaLimiter(QuotaBackend& backend, const Clock& clock, const ProcessProbe& probe)
    : m_backend(&backend)
    , m_clock(&clock)
    , m_probe(&probe)
    , m_rng(std::random_device {}())
{
}

QuotaLimiter::QuotaLimiter(QuotaStore& store, const Clock& clock, const ProcessProbe& probe)
    : m_ownBackend(std::make_unique<LocalQuotaBackend>(store, clock, probe))
    , m_backend(m_ownBackend.get())
    , m_clock(&clock)
    , m_probe(&probe)
    , m_rng(std::random_device {}())
{
}

std::int64_t QuotaLimiter::nowMs() const
{
    return m_clock->unixMs();
}

std::string QuotaLimiter::sanitizeCaller(std::string_view caller)
{
    std::string s = TextSanitizer::clean(caller, MAX_CALLER_CHARS);
    // Stored text has a byte bound too (QuotaState::MAX_TEXT); cut at a character boundary.
    while (s.size() > QuotaState::MAX_TEXT) {
        s.pop_back();
        while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80)
            s.pop_back();
        if (!s.empty() && static_cast<unsigned char>(s.back()) >= 0xC0)
            s.pop_back();
    }
    return s.empty() ? std::string("anonymous") : s;
}

void QuotaLimiter::waitForChange(
    std::uint32_t mark, std::chrono::milliseconds timeout, const std::atomic<bool>* cancel) const
{
    if (!cancel || m_cancelPoll <= std::chrono::milliseconds::zero()) {
        m_backend->waitForChange(mark, timeout);
        return;
    }
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        const auto left = end - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero() || cancel->load())
            return;
        m_backend->waitForChange(mark, std::min<std::chrono::nanoseconds>(left, m_cancelPoll));
        if (m_backend->changeMark() != mark)
            return;
    }
}

Result<Permit> QuotaLimiter::acquire(AdmitRequest request, WallTime deadline, const std::atomic<bool>* cancel)
{
    request.caller = sanitizeCaller(request.caller);
    if (request.pid <= 0)
        request.pid = ProcessProbe::selfPid();
    // Whoever holds the slot, it is this process that waits: a ghost entry dies with it.
    request.waiterPid = ProcessProbe::selfPid();
    // Both pids are numbers of this process's pid namespace; their start times make them one
    // process each, not whichever later gets the same number.
    request.pidNs = m_probe->pidNamespace();
    // This process's own start time is read once (two /proc reads per acquire were a fifth
    // of a Redis acquire's client time); another holder pid is read each time.
    const std::int64_t self = ProcessProbe::selfPid();
    if (m_selfPid != self) { // first use, or a fork made this a new process
        m_selfPid = self;
        m_selfStartTicks = m_probe->startTicks(self).value_or(0);
    }
    request.startTicks
        = request.pid == self ? m_selfStartTicks : m_probe->startTicks(request.pid).value_or(0);
    request.waiterStartTicks = m_selfStartTicks;
    // A slot this process would hold itself, under a lease it renews, may be handed to it while
    // it waits (a holder on a lease of max_hold_seconds, stopped, would keep it that long for
    // other hosts; `run`, whose keeper holds, says so itself).
    if (request.pid == self && request.leaseMs > 0 && request.leaseMs <= QuotaPolicy::RENEWED_LEASE_MS)
        request.takesHandOff = true;
    const std::int64_t deadlineMs
        = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.time_since_epoch()).count();
    request.deadlineMs = deadlineMs;
    AdmitStep step;
    step.request = std::move(request);
    step.startMs = nowMs();
    step.requestId = m_rng() & ((std::uint64_t(1) << 53) - 1);
    const AdmitRequest& r = step.request;
    // The store's lock is waited for until our deadline too (the store's floor lets a try wait
    // out a transaction in progress), and a cancel ends that wait as it ends ours. Leaving
    // the queue is neither cancellable (it is what a cancel does) nor bound by the deadline
    // that has just passed: it gets the store's own wait (StoreWait{}), so the place is given
    // back even when the lock is busy for a moment.
    auto storeWait = [&] {
        // Capped, so that a far deadline cannot overflow the steady clock (the store caps it
        // far lower anyway).
        const std::int64_t left = std::clamp<std::int64_t>(deadlineMs - nowMs(), 0, 3600 * 1000);
        return StoreWait { std::chrono::steady_clock::now() + std::chrono::milliseconds(left), cancel };
    };
    WaitReason lastReason = WaitReason::None;
    m_lastRefusal = Refusal {};
    // A release that handed us its slot while we waited, as the ring said (takeHandOff): the
    // next round takes it without a call of its own.
    std::optional<AdmitOutcome> handed;

    for (;;) {
        const std::uint32_t mark = m_backend->changeMark();
        const std::int64_t stepNow = nowMs();
        step.enqueue = deadlineMs > stepNow && !(cancel && cancel->load());
        step.deadlineInMs
            = std::clamp<std::int64_t>(deadlineMs, stepNow - MAX_DEADLINE_IN_MS, stepNow + MAX_DEADLINE_IN_MS)
            - stepNow;
        step.storeWait = storeWait();
        const std::int64_t asked = nowMs();
        auto outcome = handed ? Result<AdmitOutcome>(*handed) : m_backend->admit(step);
        handed.reset();
        if (!outcome) {
            step.storeWait = StoreWait {};
            const Error& e = outcome.error();
            if (cancel && cancel->load() && e.kind == ErrorKind::Timeout && e.sysErrno == EINTR) {
                // The cancel ended the wait for the store's lock: nothing ran, so this is a
                // cancel like one in the queue, not a store that did not answer.
                if (step.ticket != 0)
                    (void)m_backend->leaveQueue(
                        step, true, std::string(waitReasonName(lastReason)) + " (cancelled)");
                return Error::make(ErrorKind::Timeout, "",
                    "cancelled waiting for provider '" + r.provider + "': " + e.message + " (" + e.path
                        + ")");
            }
            if (step.ticket != 0)
                (void)m_backend->leaveQueue(step, false, {});
            return outcome.error();
        }
        const AdmitDecision& decision = outcome->decision;
        if (decision.admitted) {
            Permit permit(this, r.provider, decision.fence, decision.slotTaken, nowMs() - step.startMs,
                outcome->leaseMs, outcome->nowMs);
            permit.m_model = r.model;
            permit.m_tokens = r.tokens;
            permit.m_inputTokens = r.inputTokens;
            permit.m_outputTokens = r.outputTokens;
            permit.m_caller = r.caller;
            permit.m_holderPid = r.pid;
            permit.m_holderPidNs = r.pidNs;
            permit.m_holderStartTicks = r.startTicks;
            return permit;
        }
        step.ticket = decision.ticket;
        lastReason = decision.reason;
        if (step.firstReason == WaitReason::None)
            step.firstReason = decision.reason;

        const std::int64_t now = nowMs();
        m_lastRefusal = Refusal {};
        m_lastRefusal.reason = decision.reason;
        m_lastRefusal.paused = decision.reason == WaitReason::Paused;
        if (endsInTime(decision.reason) && decision.retryAtMs != INT64_MAX) {
            // The retry time is in the backend's time (Redis: the server's): carried over to
            // ours as a distance from the decision, counted from when we asked (never later
            // than the truth: a slow answer does not make the wait look longer than it is).
            const std::int64_t in = std::max<std::int64_t>(0, decision.retryAtMs - outcome->nowMs);
            m_lastRefusal.earliestMs = in > INT64_MAX - asked ? INT64_MAX : asked + in;
        }
        const bool cancelledNow = cancel && cancel->load();
        if (!cancelledNow
            && (m_lastRefusal.paused || (m_lastRefusal.earliestMs && *m_lastRefusal.earliestMs > deadlineMs)))
            return refuseEarly(step, now, deadlineMs);
        if (now >= deadlineMs || cancelledNow) {
            const bool cancelled = cancelledNow;
            step.storeWait = StoreWait {};
            if (step.ticket != 0) // a refused try was never queued: nothing to undo or record
                (void)m_backend->leaveQueue(step, true,
                    std::string(waitReasonName(decision.reason))
                        + (cancelled ? " (cancelled)" : " (deadline)"));
            return Error::make(ErrorKind::Timeout, "",
                std::string(cancelled ? "cancelled" : "timed out") + " waiting for provider '" + r.provider
                    + "': " + waitReasonName(decision.reason));
        }
        std::int64_t sleepMs = std::min<std::int64_t>(deadlineMs - now, m_backend->maxSleep().count());
        // The backend's times are distances from its decision (its clock may not be ours),
        // counted from when we asked.
        if (decision.retryAtMs != INT64_MAX)
            sleepMs = std::min(sleepMs,
                std::max<std::int64_t>(
                    0, IntMath::plusSaturated(asked, decision.retryAtMs - outcome->nowMs) - now));
        if (outcome->lookAgainInMs >= 0)
            sleepMs = std::min(sleepMs, std::max<std::int64_t>(0, asked + outcome->lookAgainInMs - now));
        // Sleep at least a little when the policy says "now": the next bucket edge is a ms off.
        waitForChange(mark, std::chrono::milliseconds(std::max<std::int64_t>(1, sleepMs)), cancel);
        if (step.ticket != 0)
            handed = m_backend->takeHandOff(step.ticket);
    }
}

Result<Permit> QuotaLimiter::refuseEarly(AdmitStep& step, std::int64_t now, std::int64_t deadlineMs)
{
    const AdmitRequest& r = step.request;
    Refusal& refusal = m_lastRefusal;
    refusal.early = now < deadlineMs;
    std::string message;
    if (refusal.paused) {
        // Named with its reason: who paused it and why is what the caller needs to decide.
        bool all = false;
        if (auto snap = m_backend->snapshot()) {
            all = snap->state.pausedAll;
            const ProviderState* p = snap->state.provider(r.provider);
            refusal.pauseReason = all ? snap->state.pauseReason : p ? p->pauseReason : std::string();
        }
        message = (all ? std::string("everything is paused") : "provider '" + r.provider + "' is paused")
            + (refusal.pauseReason.empty() ? std::string() : ": " + refusal.pauseReason)
            + "; a pause has no known end (tollgate resume ends it)";
    } else {
        const std::int64_t at = *refusal.earliestMs;
        message = "provider '" + r.provider + "' has no room before " + clockTime(at, now) + " (in "
            + inWords(at - now) + "; " + waitReasonName(refusal.reason) + "): past this call's deadline";
    }
    // Given up as a deadline is (the same history event), only sooner; a try was never queued.
    step.storeWait = StoreWait {};
    if (step.ticket != 0)
        (void)m_backend->leaveQueue(step, true,
            std::string(waitReasonName(refusal.reason))
                + (refusal.paused ? " (no known end)" : " (no room before the deadline)"));
    return Error::make(ErrorKind::Timeout, "", message);
}

Result<std::int64_t> QuotaLimiter::report429(const std::string& provider, const std::string& caller,
    std::optional<std::int64_t> retryAfterMs, std::int64_t pid)
{
    // Drawn here, once per report: the backend's operation may run more than once.
    const std::uint64_t draw = m_rng();
    return m_backend->report429(
        provider, sanitizeCaller(caller), retryAfterMs, draw, pid > 0 ? pid : ProcessProbe::selfPid());
}

Result<void> QuotaLimiter::reportSuccess(const std::string& provider, const std::string& caller)
{
    return m_backend->reportSuccess(provider, sanitizeCaller(caller));
}

Result<QuotaLimits> QuotaLimiter::limits(const StoreWait& wait)
{
    return m_backend->limits(wait);
}

Result<void> QuotaLimiter::setLimits(
    const std::string& provider, const ProviderLimits& limits, const std::string& who)
{
    auto r = m_backend->setLimits(provider, nullptr, limits, who, nullptr, {});
    if (!r)
        return r.error();
    return {};
}

Result<bool> QuotaLimiter::setLimitsIf(const std::string& provider,
    const std::optional<ProviderLimits>& expected, const ProviderLimits& limits, const std::string& who,
    std::optional<ProviderLimits>* found, const std::string& what)
{
    return m_backend->setLimits(provider, &expected, limits, who, found, what);
}

Result<void> QuotaLimiter::removeLimits(const std::string& provider, const std::string& who)
{
    return m_backend->removeLimits(provider, who);
}

Result<std::vector<std::string>> QuotaLimiter::importLimits(
    const QuotaLimits& incoming, bool replace, const std::string& who, bool fresh)
{
    return m_backend->importLimits(incoming, replace, who, fresh);
}

Result<void> QuotaLimiter::pause(
    const std::string& provider, const std::string& reason, const std::string& who)
{
    std::string why = TextSanitizer::clean(reason, 200);
    // Blank is no reason: the history then says "by WHO", not " (by WHO)".
    why.erase(0, why.find_first_not_of(' '));
    why.erase(why.find_last_not_of(' ') + 1);
    // Without a reason, who paused is the reason (status and the dashboard show it).
    const std::string stored = why.empty() && !who.empty() ? "by " + who : why;
    return m_backend->pause(provider, stored, why, who);
}

Result<void> QuotaLimiter::resume(const std::string& provider, const std::string& who)
{
    return m_backend->resume(provider, who);
}

Result<void> QuotaLimiter::holdUntil(
    const std::string& provider, std::int64_t untilMs, const std::string& reason)
{
    return m_backend->holdUntil(provider, untilMs, TextSanitizer::clean(reason, 256));
}

Result<bool> QuotaLimiter::noteReportedLimits(const std::string& provider, const ReportedLimits& reported,
    const PlanUsage& plan, const std::string& caller)
{
    ReportedLimits r = reported;
    // A class name as the limits allow it (it names a class there), else none: no scope to keep.
    if (!r.scope.empty() && !QuotaLimits::validateName("model", r.scope))
        r.scope.clear();
    // Figures a state can hold whatever the caller built (the proxy's come bounded already).
    PlanUsage u = plan;
    auto share = [](std::int64_t v) { return std::clamp<std::int64_t>(v, -1, PlanUsage::MAX_PERMILLE); };
    auto time = [](std::int64_t v) { return std::clamp<std::int64_t>(v, 0, std::int64_t(1) << 53); };
    u.fiveHourPermille = share(u.fiveHourPermille);
    u.sevenDayPermille = share(u.sevenDayPermille);
    u.fiveHourResetMs = time(u.fiveHourResetMs);
    u.sevenDayResetMs = time(u.sevenDayResetMs);
    u.atMs = u.atMs != 0 ? 1 : 0; // the backend dates it
    return m_backend->noteReportedLimits(provider, r, u, sanitizeCaller(caller));
}

Result<bool> QuotaLimiter::noteReportedLimits(const std::string& provider, std::int64_t requestsPerMin,
    std::int64_t tokensPerMin, const std::string& caller)
{
    return noteReportedLimits(
        provider, ReportedLimits { requestsPerMin, tokensPerMin, -1, -1, {} }, PlanUsage {}, caller);
}

Result<void> QuotaLimiter::correctTokens(const std::string& provider, const std::string& model,
    std::int64_t admittedAtMs, std::int64_t estimated, std::int64_t used)
{
    return m_backend->correctTokens(provider, model, admittedAtMs, estimated, used);
}

Result<void> QuotaLimiter::resetBackoff(const std::string& provider, const std::string& who)
{
    return m_backend->resetBackoff(provider, who);
}

Result<int> QuotaLimiter::releaseStale(bool overdue, const std::string& who)
{
    return m_backend->releaseStale(overdue, who);
}

Result<bool> QuotaLimiter::finishAdmission(AdmissionEnd end)
{
    end.caller = sanitizeCaller(end.caller);
    return m_backend->finishAdmission(end);
}

Result<bool> QuotaLimiter::releaseSlot(
    const std::string& provider, std::uint64_t fence, const std::string& who)
{
    return m_backend->releaseSlot(provider, fence, who);
}

Result<bool> QuotaLimiter::renewSlot(
    const std::string& provider, std::uint64_t fence, std::int64_t leaseMs, const Slot* holder)
{
    return m_backend->renewSlot(provider, fence, leaseMs, holder);
}

Result<LimiterSnapshot> QuotaLimiter::snapshot()
{
    return m_backend->snapshot();
}

Result<void> QuotaLimiter::record(const std::vector<HistoryEvent>& events)
{
    return m_backend->record(events);
}

} // namespace tollgate
