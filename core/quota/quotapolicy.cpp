#include "quota/quotapolicy.h"

#include <algorithm>

namespace tollgate {

namespace {

std::int64_t limitOrNone(const ProviderLimits& l, const std::optional<std::int64_t>& v)
{
    return v ? l.effective(*v) : -1;
}

std::int64_t plusSaturated(std::int64_t a, std::int64_t b)
{
    std::int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

HistoryEvent event(std::int64_t nowMs, EventType type, const std::string& provider)
{
    HistoryEvent e;
    e.timeMs = nowMs;
    e.type = type;
    e.provider = provider;
    return e;
}

// Checks one window; returns false (and fills the decision) when it blocks.
bool windowAllows(const RollingWindow& w, std::int64_t requestLimit, std::int64_t tokenLimit,
    std::int64_t tokens, std::int64_t nowMs, AdmitDecision& d)
{
    if (requestLimit < 0 && tokenLimit < 0)
        return true;
    const std::int64_t at = w.whenFits(nowMs, 1, requestLimit, tokens, tokenLimit);
    if (at <= nowMs)
        return true;
    const bool requestsFit = requestLimit < 0 || w.whenFits(nowMs, 1, requestLimit, 0, -1) <= nowMs;
    d.reason = requestsFit ? WaitReason::Tokens : WaitReason::Window;
    d.retryAtMs = at;
    return false;
}

} // namespace

bool QuotaPolicy::syncProvider(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs)
{
    bool changed = false;
    auto want = [&](const std::string& model, std::int64_t windowMs) {
        if (auto* sc = p.scope(model)) {
            if (sc->window.windowMs() != windowMs) {
                sc->window.rescale(windowMs, nowMs);
                changed = true;
            }
        } else {
            p.scopes.push_back(ScopeWindow { model, RollingWindow(windowMs) });
            changed = true;
        }
    };
    want("", l.windowMs);
    for (const auto& [model, ml] : l.models)
        want(model, ml.windowMs);
    const auto before = p.scopes.size();
    std::erase_if(
        p.scopes, [&](const ScopeWindow& sc) { return !sc.model.empty() && !l.models.count(sc.model); });
    return changed || before != p.scopes.size();
}

void QuotaPolicy::fillConservatively(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs)
{
    syncProvider(p, l, nowMs);
    // As if the whole limit had been admitted just now.
    for (auto& sc : p.scopes) {
        if (sc.model.empty()) {
            sc.window.record(nowMs, std::max<std::int64_t>(0, limitOrNone(l, l.requests)),
                std::max<std::int64_t>(0, limitOrNone(l, l.tokens)));
        } else if (auto it = l.models.find(sc.model); it != l.models.end()) {
            sc.window.record(nowMs, std::max<std::int64_t>(0, limitOrNone(l, it->second.requests)),
                std::max<std::int64_t>(0, limitOrNone(l, it->second.tokens)));
        }
    }
    if (l.parallel) {
        while (static_cast<std::int64_t>(p.slots.size()) < *l.parallel) {
            Slot placeholder;
            placeholder.pid = 0;
            placeholder.acquiredMs = nowMs;
            placeholder.caller = "(unknown: state was reset)";
            p.slots.push_back(placeholder);
        }
    }
}

bool QuotaPolicy::pruneQueueHead(
    ProviderState& p, std::int64_t nowMs, const ProcessProbe& probe, std::vector<HistoryEvent>& events)
{
    bool changed = false;
    while (!p.queue.empty()) {
        const Waiter& w = p.queue.front();
        const std::string why = whyWaiterGone(w, nowMs, probe);
        if (why.empty())
            break;
        HistoryEvent e = event(nowMs, EventType::GaveUp, p.name);
        e.caller = w.caller;
        e.model = w.model;
        e.pid = w.pid;
        e.waitedMs = nowMs - w.enqueuedMs;
        e.reason = why;
        events.push_back(std::move(e));
        p.queue.erase(p.queue.begin());
        changed = true;
    }
    return changed;
}

bool QuotaPolicy::sameNamespace(std::uint64_t pidNs, const ProcessProbe& probe)
{
    return pidNs != 0 && pidNs == probe.pidNamespace();
}

std::int64_t QuotaPolicy::leaseEnd(const Slot& s, const ProviderLimits& l)
{
    if (s.leaseUntilMs != 0)
        return s.leaseUntilMs;
    // A slot from format 1 names no namespace, so its pid proves nothing either way: it is
    // kept for as long as any holder may hold a slot.
    return s.acquiredMs > INT64_MAX - l.maxHoldMs ? INT64_MAX : s.acquiredMs + l.maxHoldMs;
}

std::string QuotaPolicy::whyHolderGone(
    const Slot& s, const ProviderLimits& l, std::int64_t nowMs, const ProcessProbe& probe, bool cheap)
{
    if (s.pid == 0)
        return nowMs < plusSaturated(s.acquiredMs, l.windowMs) ? "" : "placeholder expired";
    if (sameNamespace(s.pidNs, probe)) {
        if (cheap)
            return probe.exists(s.pid) ? "" : "holder died";
        return probe.holderLiveness(s.pid, s.startTicks) == Liveness::Dead ? "holder died" : "";
    }
    return nowMs < leaseEnd(s, l)
        ? ""
        : "lease expired (holder pid " + std::to_string(s.pid) + " of another pid namespace)";
}

void QuotaPolicy::settle(
    QuotaState& state, const QuotaLimits& limits, std::int64_t nowMs, const ProcessProbe& probe)
{
    std::vector<HistoryEvent> ignored;
    for (const auto& [name, l] : limits.providers()) {
        ProviderState& p = state.ensureProvider(name);
        syncProvider(p, l, nowMs);
        reclaimVanished(p, nowMs, probe, ignored);
        pruneQueueHead(p, nowMs, probe, ignored);
        reclaimSlots(p, l, nowMs, probe, false, "", ignored);
    }
}

std::string QuotaPolicy::whyWaiterGone(const Waiter& w, std::int64_t nowMs, const ProcessProbe& probe)
{
    if (nowMs > plusSaturated(w.deadlineMs, GHOST_GRACE_MS))
        return "waiter vanished past its deadline";
    if (sameNamespace(w.pidNs, probe))
        return probe.holderLiveness(w.pid, w.startTicks) == Liveness::Dead ? "waiter died" : "";
    if (w.pidNs == 0 && w.leaseUntilMs == 0) // format 1: as before, the pid is all there is
        return probe.liveness(w.pid, std::nullopt) == Liveness::Dead ? "waiter died" : "";
    return w.leaseUntilMs != 0 && nowMs > w.leaseUntilMs ? "waiter stopped renewing (another pid namespace)"
                                                         : "";
}

bool QuotaPolicy::renewWaiter(ProviderState& p, std::uint64_t ticket, std::int64_t nowMs)
{
    for (auto& w : p.queue) {
        if (w.ticket != ticket)
            continue;
        if (w.leaseUntilMs - nowMs > WAITER_LEASE_MS * 2 / 3)
            return false;
        w.leaseUntilMs = nowMs + WAITER_LEASE_MS;
        return true;
    }
    return false;
}

namespace {

// Removes the slots for which `why` names a reason, recording each in the history.
template <typename Why>
int reclaimWhere(ProviderState& p, std::int64_t nowMs, std::vector<HistoryEvent>& events, Why why)
{
    int n = 0;
    std::erase_if(p.slots, [&](const Slot& s) {
        const std::string reason = why(s);
        if (reason.empty())
            return false;
        HistoryEvent e = event(nowMs, EventType::Reclaim, p.name);
        e.caller = s.caller;
        e.model = s.model;
        e.pid = s.pid;
        e.fence = s.fence;
        e.reason = reason;
        events.push_back(std::move(e));
        ++n;
        return true;
    });
    return n;
}

} // namespace

int QuotaPolicy::reclaimVanished(
    ProviderState& p, std::int64_t nowMs, const ProcessProbe& probe, std::vector<HistoryEvent>& events)
{
    // Placeholders wait for reclaimSlots (they block admission only when slots are short).
    const ProviderLimits none;
    return reclaimWhere(p, nowMs, events, [&](const Slot& s) -> std::string {
        if (s.pid == 0 || (!sameNamespace(s.pidNs, probe) && s.leaseUntilMs == 0))
            return "";
        return whyHolderGone(s, none, nowMs, probe, true);
    });
}

int QuotaPolicy::reclaimSlots(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs,
    const ProcessProbe& probe, bool overdue, const std::string& who, std::vector<HistoryEvent>& events)
{
    const std::string by = who.empty() ? "" : " (by " + who + ")";
    return reclaimWhere(p, nowMs, events, [&](const Slot& s) -> std::string {
        if (const std::string why = whyHolderGone(s, l, nowMs, probe); !why.empty())
            return why + by;
        if (s.pid != 0 && overdue && s.acquiredMs < nowMs - l.maxHoldMs)
            return "held past the maximum hold time" + by;
        return "";
    });
}

std::optional<std::string> QuotaPolicy::impossible(const ProviderLimits& l, const AdmitRequest& r)
{
    if (r.tokens < 0)
        return "a negative number of tokens";
    if (l.tokens && r.tokens > l.effective(*l.tokens))
        return "asks for " + std::to_string(r.tokens) + " tokens, but provider '" + r.provider + "' allows "
            + std::to_string(l.effective(*l.tokens)) + " per window";
    if (!r.model.empty()) {
        if (auto it = l.models.find(r.model);
            it != l.models.end() && it->second.tokens && r.tokens > l.effective(*it->second.tokens))
            return "asks for " + std::to_string(r.tokens) + " tokens, but model '" + r.model + "' allows "
                + std::to_string(l.effective(*it->second.tokens)) + " per window";
    }
    return std::nullopt;
}

AdmitDecision QuotaPolicy::evaluate(const QuotaState& s, const ProviderState& p, const ProviderLimits& l,
    const AdmitRequest& r, std::uint64_t ticket, std::int64_t nowMs)
{
    AdmitDecision d;
    d.ticket = ticket;
    if (s.pausedAll || p.paused) {
        d.reason = WaitReason::Paused;
        return d;
    }
    // Stored times are judged within their bounds (boundTimes): a forged state stops nobody
    // for longer than one 429 report may.
    const std::int64_t backoffEnd = backoffUntil(p, nowMs);
    if (nowMs < backoffEnd) {
        d.reason = WaitReason::Backoff;
        d.retryAtMs = backoffEnd;
        return d;
    }
    if (!p.queue.empty() && (ticket == 0 || p.queue.front().ticket != ticket)) {
        d.reason = WaitReason::Queue;
        return d;
    }
    const std::int64_t paceEnd = std::min(p.paceUntilMs, plusSaturated(backoffEnd, l.windowMs));
    if (nowMs < paceEnd && l.requests) {
        const std::int64_t spacing = l.windowMs / l.effective(*l.requests);
        const std::int64_t backoffEnded = paceEnd - l.windowMs;
        const std::int64_t lastAdmit = std::min(p.lastAdmitMs, nowMs);
        // Only admissions since the backoff ended set the pace; the first one goes at once.
        if (lastAdmit >= backoffEnded && nowMs < lastAdmit + spacing) {
            d.reason = WaitReason::Backoff;
            d.retryAtMs = lastAdmit + spacing;
            return d;
        }
    }
    if (const auto* sc = p.scope(""); sc
        && !windowAllows(
            sc->window, limitOrNone(l, l.requests), limitOrNone(l, l.tokens), r.tokens, nowMs, d))
        return d;
    if (!r.model.empty()) {
        auto it = l.models.find(r.model);
        const auto* sc = p.scope(r.model);
        if (it != l.models.end() && sc
            && !windowAllows(sc->window, limitOrNone(l, it->second.requests),
                limitOrNone(l, it->second.tokens), r.tokens, nowMs, d))
            return d;
    }
    if (r.wantsSlot && l.parallel && static_cast<std::int64_t>(p.slots.size()) >= *l.parallel) {
        d.reason = WaitReason::Slots;
        for (const auto& slot : p.slots) {
            if (slot.pid == 0)
                d.retryAtMs = std::min(d.retryAtMs, plusSaturated(slot.acquiredMs, l.windowMs));
        }
        return d;
    }
    d.admitted = true;
    return d;
}

Result<AdmitDecision> QuotaPolicy::admit(QuotaState& s, ProviderState& p, const ProviderLimits& l,
    const AdmitRequest& r, std::uint64_t ticket, std::int64_t nowMs, bool enqueue)
{
    AdmitDecision d = evaluate(s, p, l, r, ticket, nowMs);
    if (!d.admitted) {
        if (ticket != 0) {
            for (auto& w : p.queue) {
                if (w.ticket == ticket)
                    w.reason = d.reason;
            }
        } else if (enqueue) {
            if (p.queue.size() >= QuotaState::MAX_WAITERS)
                return Error::make(ErrorKind::Busy, "",
                    "too many callers are already waiting for provider '" + p.name + "'");
            Waiter w;
            w.ticket = s.nextTicket++;
            w.pid = r.waiterPid > 0 ? r.waiterPid : r.pid;
            w.enqueuedMs = nowMs;
            w.deadlineMs = r.deadlineMs;
            w.tokens = r.tokens;
            w.caller = r.caller;
            w.model = r.model;
            w.wantsSlot = r.wantsSlot;
            w.reason = d.reason;
            w.pidNs = r.pidNs;
            w.startTicks = r.waiterStartTicks;
            w.leaseUntilMs = nowMs + WAITER_LEASE_MS;
            p.queue.push_back(std::move(w));
            d.ticket = p.queue.back().ticket;
        }
        return d;
    }
    for (auto& sc : p.scopes) {
        if (sc.model.empty() || sc.model == r.model)
            sc.window.record(nowMs, 1, r.tokens);
    }
    d.fence = s.nextFence++;
    if (r.wantsSlot && l.parallel) {
        Slot slot;
        slot.fence = d.fence;
        slot.pid = r.pid;
        slot.acquiredMs = nowMs;
        slot.tokens = r.tokens;
        slot.caller = r.caller;
        slot.model = r.model;
        slot.pidNs = r.pidNs;
        slot.startTicks = r.startTicks;
        const std::int64_t lease = r.leaseMs > 0 ? r.leaseMs : l.maxHoldMs;
        slot.leaseUntilMs = lease > INT64_MAX - nowMs ? INT64_MAX : nowMs + lease;
        p.slots.push_back(std::move(slot));
        d.slotTaken = true;
    }
    if (ticket != 0)
        dequeue(p, ticket);
    p.lastAdmitMs = nowMs;
    ++p.admittedTotal;
    return d;
}

bool QuotaPolicy::dequeue(ProviderState& p, std::uint64_t ticket)
{
    return std::erase_if(p.queue, [&](const Waiter& w) { return w.ticket == ticket; }) != 0;
}

std::int64_t QuotaPolicy::backoffFor(
    const ProviderLimits& l, std::int32_t consecutive, std::optional<std::int64_t> retryAfterMs)
{
    const std::int64_t cap = std::clamp<std::int64_t>(l.backoffCapMs, 1, QuotaLimits::MAX_BACKOFF_MS);
    std::int64_t exp = std::clamp<std::int64_t>(l.backoffBaseMs, 1, cap);
    for (std::int32_t i = 1; i < consecutive && exp < cap; ++i)
        exp *= 2;
    exp = std::min(exp, cap);
    return std::max(exp, RetryAfter::bound(retryAfterMs.value_or(0)));
}

std::int64_t QuotaPolicy::apply429(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs,
    std::optional<std::int64_t> retryAfterMs, std::int64_t jitterMs)
{
    p.consecutive429 = std::clamp<std::int32_t>(p.consecutive429, 0, 1 << 20);
    p.consecutive429 = std::min<std::int32_t>(p.consecutive429 + 1, 1 << 20);
    const std::int64_t backoff = backoffFor(l, p.consecutive429, retryAfterMs);
    const std::int64_t jitter = std::clamp<std::int64_t>(jitterMs, 0, MAX_JITTER_MS);
    // From the bounded current end: a forged far-future one must not survive a new report.
    p.backoffUntilMs = std::max(backoffUntil(p, nowMs), plusSaturated(nowMs, plusSaturated(backoff, jitter)));
    // After the backoff, admissions restart at an even pace for one window instead of
    // all queued callers firing in the same instant.
    p.paceUntilMs = plusSaturated(p.backoffUntilMs, l.windowMs);
    p.last429Ms = nowMs;
    ++p.rateLimitedTotal;
    return backoff;
}

std::int64_t QuotaPolicy::backoffUntil(const ProviderState& p, std::int64_t nowMs)
{
    return std::min(p.backoffUntilMs, plusSaturated(nowMs, MAX_STOP_MS));
}

bool QuotaPolicy::boundTimes(QuotaState& s, ProviderState& p, const ProviderLimits& l, std::int64_t nowMs)
{
    bool changed = false;
    auto atMost = [&](std::int64_t& v, std::int64_t max) {
        if (v > max) {
            v = max;
            changed = true;
        }
    };
    atMost(p.backoffUntilMs, plusSaturated(nowMs, MAX_STOP_MS));
    atMost(p.paceUntilMs,
        plusSaturated(std::max(p.backoffUntilMs, nowMs), std::max<std::int64_t>(0, l.windowMs)));
    atMost(p.lastAdmitMs, nowMs);
    atMost(p.last429Ms, nowMs);
    atMost(p.pausedAtMs, nowMs);
    atMost(s.pausedAtMs, nowMs);
    if (p.consecutive429 < 0) {
        p.consecutive429 = 0;
        changed = true;
    }
    // The longest lease anyone takes: a slot's lease is the maximum hold time (or the run
    // lease, far below it); a waiter's is WAITER_LEASE_MS.
    const std::int64_t slotLease = plusSaturated(nowMs, QuotaLimits::MAX_HOLD_MS);
    for (Slot& slot : p.slots) {
        atMost(slot.acquiredMs, nowMs);
        atMost(slot.leaseUntilMs, slotLease);
    }
    for (Waiter& w : p.queue) {
        atMost(w.enqueuedMs, nowMs);
        atMost(w.leaseUntilMs, plusSaturated(nowMs, WAITER_LEASE_MS));
    }
    for (ScopeWindow& scope : p.scopes) {
        if (scope.window.boundFuture(nowMs))
            changed = true;
    }
    return changed;
}

} // namespace tollgate
