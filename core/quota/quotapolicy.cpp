#include "quota/quotapolicy.h"

#include "base/intmath.h"
#include "quota/limitlearning.h"

#include <algorithm>

namespace tollgate {

namespace {

std::int64_t limitOrNone(const ProviderLimits& l, const std::optional<std::int64_t>& v)
{
    return v ? l.effective(*v) : -1;
}

HistoryEvent event(std::int64_t nowMs, EventType type, const std::string& provider)
{
    HistoryEvent e;
    e.timeMs = nowMs;
    e.type = type;
    e.provider = provider;
    return e;
}

using Usage = RollingWindow::Usage;

// A scope's budgets: the provider's or one class's.
struct ScopeBudgets
{
    Budget window;
    Budget day;
    std::int64_t windowMs = 60000;
};

std::optional<ScopeBudgets> budgetsOf(const ProviderLimits& l, const std::string& scope)
{
    if (scope.empty())
        return ScopeBudgets { l.perWindow(), l.perDay, l.windowMs };
    auto it = l.models.find(scope);
    if (it == l.models.end())
        return std::nullopt;
    return ScopeBudgets { it->second.perWindow(), it->second.perDay, it->second.windowMs };
}

// A budget as limits after the headroom (negative: none).
Usage limitsOf(const ProviderLimits& l, const Budget& b)
{
    return { limitOrNone(l, b.requests), limitOrNone(l, b.tokens), limitOrNone(l, b.inputTokens),
        limitOrNone(l, b.outputTokens) };
}

bool anyLimit(const Usage& limit)
{
    return limit.requests >= 0 || limit.tokens >= 0 || limit.input >= 0 || limit.output >= 0;
}

// What of a cost is checked capped at the limit: an estimate's every metric (it is not a fact:
// see AdmitRequest::estimated); a stated total whose split is unknown, its input and output
// (it counts in full toward each only to be safe, and may well fit: without the cap a total
// above an input or output limit could never be admitted, nor refused). A stated split: none.
enum class Cap { None, Split, All };

Cap capOf(const AdmitRequest& r)
{
    if (r.estimated)
        return Cap::All;
    return r.inputTokens == 0 && r.outputTokens == 0 ? Cap::Split : Cap::None;
}

Usage capped(Usage cost, const Usage& limit, Cap how)
{
    auto cap = [](std::int64_t& v, std::int64_t l) {
        if (l >= 0)
            v = std::min(v, l);
    };
    if (how == Cap::None)
        return cost;
    cap(cost.input, limit.input);
    cap(cost.output, limit.output);
    if (how == Cap::All) {
        cap(cost.tokens, limit.tokens);
        cap(cost.requests, limit.requests);
    }
    return cost;
}

// When the day has room for `cost`: now, the next reset (calendar), or when enough of the last
// 24 hours has passed (rolling). INT64_MAX: never.
std::int64_t dayFits(
    const ScopeWindow& sc, const ProviderLimits& l, const Usage& cost, const Usage& limit, std::int64_t nowMs)
{
    if (sc.day == ScopeWindow::Day::Rolling)
        return sc.rollingDay.whenFits(nowMs, cost, limit);
    const DayReset::Span span = l.dayReset.dayOf(nowMs);
    if (RollingWindow::fits(sc.dayUsage(nowMs, span.startMs), cost, limit))
        return nowMs;
    return RollingWindow::fits(Usage {}, cost, limit) ? span.endMs : INT64_MAX;
}

// Checks one scope's window and day; returns false (and fills the decision) when either
// blocks. The wait names the window when the request count is what is full, tokens otherwise.
bool scopeAllows(const ScopeWindow& sc, const ScopeBudgets& b, const ProviderLimits& l, const Usage& wanted,
    Cap how, std::int64_t nowMs, AdmitDecision& d)
{
    const Usage windowLimit = limitsOf(l, b.window);
    const Usage dayLimit = limitsOf(l, b.day);
    std::int64_t at = nowMs;
    bool requestsFull = false;
    if (anyLimit(windowLimit)) {
        const Usage cost = capped(wanted, windowLimit, how);
        at = std::max(at, sc.window.whenFits(nowMs, cost, windowLimit));
        requestsFull = !RollingWindow::fits(
            sc.window.usage(nowMs), Usage { 1, 0, 0, 0 }, Usage { windowLimit.requests, -1, -1, -1 });
    }
    if (anyLimit(dayLimit) && sc.day != ScopeWindow::Day::None) {
        const Usage cost = capped(wanted, dayLimit, how);
        const std::int64_t dayAt = dayFits(sc, l, cost, dayLimit, nowMs);
        if (dayAt > nowMs
            && !RollingWindow::fits(sc.dayUsage(nowMs, l.dayReset.dayOf(nowMs).startMs), Usage { 1, 0, 0, 0 },
                Usage { dayLimit.requests, -1, -1, -1 }))
            requestsFull = true;
        at = std::max(at, dayAt);
    }
    if (at <= nowMs)
        return true;
    d.reason = requestsFull ? WaitReason::Window : WaitReason::Tokens;
    d.retryAtMs = at;
    return false;
}

// Records an admission in a scope's window and day. An estimate larger than a limit is
// recorded whole (only its check was capped): the window then holds more than its limit until
// the real usage corrects it, which is what the provider will count too — and a correction
// takes back exactly what was recorded.
void recordIn(ScopeWindow& sc, const ProviderLimits& l, const Usage& dayCost, std::int64_t nowMs)
{
    sc.window.record(nowMs, dayCost);
    if (sc.day == ScopeWindow::Day::Rolling) {
        sc.rollingDay.record(nowMs, dayCost);
    } else if (sc.day == ScopeWindow::Day::Calendar) {
        const std::int64_t start = l.dayReset.dayOf(nowMs).startMs;
        if (sc.dayStartMs != start) {
            sc.dayStartMs = start;
            sc.dayUsed = {};
        }
        RollingWindow::add(sc.dayUsed, dayCost);
    }
}

// The split turned on: what the window holds has no known split, so its tokens count toward
// both input and output (never less than they may have been).
void splitConservatively(RollingWindow& w)
{
    auto buckets = w.buckets();
    for (auto& b : buckets) {
        b.input = b.tokens;
        b.output = b.tokens;
    }
    (void)w.restore(w.windowMs(), buckets);
}

void unsplit(RollingWindow& w)
{
    auto buckets = w.buckets();
    for (auto& b : buckets)
        b.input = b.output = 0;
    (void)w.restore(w.windowMs(), buckets);
}

// Makes a scope's split and day match its budgets; true when something changed.
bool syncScope(ScopeWindow& sc, const ScopeBudgets& b, const ProviderLimits& l, std::int64_t nowMs)
{
    bool changed = false;
    if (sc.window.windowMs() != b.windowMs) {
        sc.window.rescale(b.windowMs, nowMs);
        changed = true;
    }
    const bool split = b.window.split() || b.day.split();
    if (split != sc.split) {
        sc.split = split;
        split ? (splitConservatively(sc.window), splitConservatively(sc.rollingDay))
              : (unsplit(sc.window), unsplit(sc.rollingDay));
        if (split)
            sc.dayUsed.input = sc.dayUsed.output = sc.dayUsed.tokens;
        changed = true;
    }
    const ScopeWindow::Day day = !b.day.any()
        ? ScopeWindow::Day::None
        : (l.dayReset.rolling() ? ScopeWindow::Day::Rolling : ScopeWindow::Day::Calendar);
    if (day != sc.day) {
        // A day starts from what is known of it: at least what the window holds now (or, from
        // the other kind of day, what that day held).
        Usage known = sc.window.usage(nowMs);
        if (sc.day == ScopeWindow::Day::Rolling)
            known = sc.rollingDay.usage(nowMs);
        else if (sc.day == ScopeWindow::Day::Calendar)
            known = sc.dayUsed;
        sc.rollingDay = RollingWindow(ScopeWindow::DAY_MS);
        sc.dayUsed = {};
        sc.dayStartMs = 0;
        sc.day = day;
        if (day == ScopeWindow::Day::Rolling) {
            sc.rollingDay.record(nowMs, known);
        } else if (day == ScopeWindow::Day::Calendar) {
            sc.dayStartMs = l.dayReset.dayOf(nowMs).startMs;
            sc.dayUsed = known;
        }
        changed = true;
    }
    return changed;
}

// A scope made now for its budgets (appended: the order scopes are judged in is the order they
// were made, the same on every home).
ScopeWindow& ensureScope(
    ProviderState& p, const ProviderLimits& l, const std::string& scope, std::int64_t nowMs, bool& changed)
{
    const ScopeBudgets b = *budgetsOf(l, scope);
    ScopeWindow* sc = p.scope(scope);
    if (!sc) {
        p.scopes.push_back(ScopeWindow { scope, RollingWindow(b.windowMs) });
        sc = &p.scopes.back();
        changed = true;
    }
    changed = syncScope(*sc, b, l, nowMs) || changed;
    return *sc;
}

} // namespace

// The provider's scope always; a class's once something counts in it (an absent scope counts
// nothing, as an empty one would): a provider with many classes, few of them used, keeps a
// small state, and each transaction decodes, syncs and writes only those.
bool QuotaPolicy::syncProvider(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs)
{
    bool changed = false;
    (void)ensureScope(p, l, "", nowMs, changed);
    const auto before = p.scopes.size();
    std::erase_if(
        p.scopes, [&](const ScopeWindow& sc) { return !sc.model.empty() && !l.models.count(sc.model); });
    for (auto& sc : p.scopes) {
        if (!sc.model.empty())
            changed = syncScope(sc, *budgetsOf(l, sc.model), l, nowMs) || changed;
    }
    return changed || before != p.scopes.size();
}

namespace {

// Makes the scopes of the classes a model counts in (class-name order).
void ensureClassScopes(
    ProviderState& p, const ProviderLimits& l, const std::string& model, std::int64_t nowMs)
{
    bool changed = false;
    for (const auto& [name, ml] : l.models) {
        if (ml.matches(name, model))
            (void)ensureScope(p, l, name, nowMs, changed);
    }
}

} // namespace

void QuotaPolicy::fillConservatively(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs)
{
    syncProvider(p, l, nowMs);
    bool changed = false;
    for (const auto& [name, ml] : l.models)
        (void)ensureScope(p, l, name, nowMs, changed);
    // As if the whole limit had been admitted just now, in every budget.
    for (auto& sc : p.scopes) {
        const auto b = budgetsOf(l, sc.model);
        if (!b)
            continue;
        auto full = [&](const Budget& budget) {
            const Usage u = limitsOf(l, budget);
            return Usage { std::max<std::int64_t>(0, u.requests), std::max<std::int64_t>(0, u.tokens),
                std::max<std::int64_t>(0, u.input), std::max<std::int64_t>(0, u.output) };
        };
        sc.window.record(nowMs, full(b->window));
        if (sc.day == ScopeWindow::Day::Rolling)
            sc.rollingDay.record(nowMs, full(b->day));
        else if (sc.day == ScopeWindow::Day::Calendar)
            sc.dayStartMs = l.dayReset.dayOf(nowMs).startMs, sc.dayUsed = full(b->day);
    }
    if (l.parallel) {
        while (static_cast<std::int64_t>(p.slots.size()) < *l.parallel) {
            Slot placeholder;
            placeholder.pid = 0;
            placeholder.acquiredMs = nowMs;
            placeholder.leaseUntilMs = IntMath::plusSaturated(nowMs, placeholderHoldMs(l));
            placeholder.caller = "(unknown: state was reset)";
            p.slots.push_back(placeholder);
        }
    }
}

std::int64_t QuotaPolicy::placeholderEnd(const Slot& s, const ProviderLimits& l)
{
    // A placeholder from before its lease was written (one window, as it then was).
    if (s.leaseUntilMs == 0)
        return IntMath::plusSaturated(s.acquiredMs, l.windowMs);
    return s.leaseUntilMs;
}

bool QuotaPolicy::reestablish(ProviderState& p, const Slot& held)
{
    for (Slot& s : p.slots) {
        // Fences issued after a reset start at its time in µs (acquiredMs × 1000): an older
        // fence was issued before it.
        if (s.pid != 0 || s.acquiredMs <= 0 || held.fence >= static_cast<std::uint64_t>(s.acquiredMs) * 1000)
            continue;
        s = held;
        return true;
    }
    return false;
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
        return nowMs < placeholderEnd(s, l) ? "" : "placeholder expired";
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
    if (nowMs > IntMath::plusSaturated(w.deadlineMs, GHOST_GRACE_MS))
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

bool QuotaPolicy::correct(ProviderState& p, const ProviderLimits& l, const std::string& model,
    std::int64_t atMs, std::int64_t nowMs, const Usage& delta)
{
    if (atMs > nowMs || (!delta.requests && !delta.tokens && !delta.input && !delta.output))
        return false;
    const std::int64_t dayStart = l.dayReset.dayOf(nowMs).startMs;
    const std::int64_t admittedDay = l.dayReset.dayOf(atMs).startMs;
    for (auto& sc : p.scopes) {
        if (!sc.model.empty()
            && !(l.models.count(sc.model) && l.models.at(sc.model).matches(sc.model, model)))
            continue;
        Usage d = delta;
        if (!sc.split)
            d.input = d.output = 0;
        sc.window.adjust(atMs, nowMs, d);
        if (sc.day == ScopeWindow::Day::Rolling) {
            sc.rollingDay.adjust(atMs, nowMs, d);
        } else if (sc.day == ScopeWindow::Day::Calendar && sc.dayStartMs == dayStart) {
            // Of an admission on an earlier day only what it used beyond its estimate counts now.
            auto add = [&](std::int64_t& to, std::int64_t v) {
                if (admittedDay != dayStart)
                    v = std::max<std::int64_t>(0, v);
                to = std::clamp<std::int64_t>(to + v, 0, RollingWindow::MAX_BUCKET_COUNT);
            };
            add(sc.dayUsed.requests, d.requests);
            add(sc.dayUsed.tokens, d.tokens);
            add(sc.dayUsed.input, d.input);
            add(sc.dayUsed.output, d.output);
        }
    }
    return true;
}

Usage QuotaPolicy::costOf(const AdmitRequest& r)
{
    const std::int64_t in = std::clamp<std::int64_t>(r.inputTokens, 0, RollingWindow::MAX_BUCKET_COUNT);
    const std::int64_t out = std::clamp<std::int64_t>(r.outputTokens, 0, RollingWindow::MAX_BUCKET_COUNT);
    const std::int64_t tokens = std::clamp<std::int64_t>(r.tokens, 0, RollingWindow::MAX_BUCKET_COUNT);
    if (in == 0 && out == 0)
        return { 1, tokens, tokens, tokens };
    return { 1, in + out, in, out };
}

std::optional<std::string> QuotaPolicy::impossible(const ProviderLimits& l, const AdmitRequest& r)
{
    if (r.tokens < 0 || r.inputTokens < 0 || r.outputTokens < 0)
        return "a negative number of tokens";
    if (r.estimated)
        return std::nullopt;
    const Usage cost = costOf(r);
    const bool split = r.inputTokens > 0 || r.outputTokens > 0;
    auto check
        = [&](const std::string& scope, const Budget& budget, const char* per) -> std::optional<std::string> {
        const Usage limit = limitsOf(l, budget);
        const std::string who
            = scope.empty() ? "provider '" + r.provider + "'" : "model class '" + scope + "'";
        auto over = [&](std::int64_t want, std::int64_t lim, const char* what) -> std::optional<std::string> {
            if (lim >= 0 && want > lim)
                return "asks for " + std::to_string(want) + " " + what + ", but " + who + " allows "
                    + std::to_string(lim) + " per " + per;
            return std::nullopt;
        };
        if (auto why = over(cost.tokens, limit.tokens, "tokens"))
            return why;
        // An unsplit cost counts in full toward each split limit only to be safe while it waits;
        // it is refused as too large only for the split it stated.
        if (!split)
            return std::nullopt;
        if (auto why = over(cost.input, limit.input, "input tokens"))
            return why;
        return over(cost.output, limit.output, "output tokens");
    };
    std::vector<std::string> scopes { "" };
    for (auto& c : l.classesOf(r.model))
        scopes.push_back(std::move(c));
    for (const std::string& scope : scopes) {
        const auto b = budgetsOf(l, scope);
        if (!b)
            continue;
        if (auto why = check(scope, b->window, "window"))
            return why;
        if (auto why = check(scope, b->day, "day"))
            return why;
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
    const std::int64_t paceEnd = std::min(p.paceUntilMs, IntMath::plusSaturated(backoffEnd, l.windowMs));
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
    // The provider's own word on what is left before its reset binds whatever Tollgate's limits allow.
    // A call in flight will restate it when it answers (a ring); with none, only the reset frees room.
    if (p.remainingRequests <= 0 && remainderApplies(p, l, r.model, nowMs)) {
        d.reason = WaitReason::Backoff;
        if (p.slots.empty())
            d.retryAtMs = std::min(p.remainingUntilMs, IntMath::plusSaturated(nowMs, MAX_STOP_MS));
        return d;
    }
    const Usage cost = costOf(r);
    for (const auto& sc : p.scopes) {
        if (!sc.model.empty() && !l.models.count(sc.model))
            continue;
        if (!sc.model.empty() && !l.models.at(sc.model).matches(sc.model, r.model))
            continue;
        if (!scopeAllows(sc, *budgetsOf(l, sc.model), l, cost, capOf(r), nowMs, d))
            return d;
    }
    if (r.wantsSlot && l.parallel && static_cast<std::int64_t>(p.slots.size()) >= *l.parallel) {
        d.reason = WaitReason::Slots;
        for (const auto& slot : p.slots) {
            if (slot.pid == 0)
                d.retryAtMs = std::min(d.retryAtMs, placeholderEnd(slot, l));
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
            w.holds = r.wantsSlot && r.takesHandOff;
            if (w.holds && r.pid != w.pid) {
                w.holderPid = r.pid;
                w.holderStartTicks = r.startTicks;
            }
            w.estimated = r.estimated;
            w.inputTokens = std::clamp<std::int64_t>(r.inputTokens, 0, RollingWindow::MAX_BUCKET_COUNT);
            w.outputTokens = std::clamp<std::int64_t>(r.outputTokens, 0, RollingWindow::MAX_BUCKET_COUNT);
            w.leaseMs = std::clamp<std::int64_t>(r.leaseMs, 0, RollingWindow::MAX_TIME_MS);
            p.queue.push_back(std::move(w));
            d.ticket = p.queue.back().ticket;
        }
        return d;
    }
    const Usage cost = costOf(r);
    ensureClassScopes(p, l, r.model, nowMs);
    for (auto& sc : p.scopes) {
        const auto b = budgetsOf(l, sc.model);
        if (b && (sc.model.empty() || l.models.at(sc.model).matches(sc.model, r.model)))
            recordIn(sc, l, cost, nowMs);
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
        slot.inputTokens = std::clamp<std::int64_t>(r.inputTokens, 0, RollingWindow::MAX_BUCKET_COUNT);
        slot.outputTokens = std::clamp<std::int64_t>(r.outputTokens, 0, RollingWindow::MAX_BUCKET_COUNT);
        const std::int64_t lease = r.leaseMs > 0 ? r.leaseMs : l.maxHoldMs;
        slot.leaseUntilMs = lease > INT64_MAX - nowMs ? INT64_MAX : nowMs + lease;
        p.slots.push_back(std::move(slot));
        d.slotTaken = true;
    }
    if (ticket != 0)
        dequeue(p, ticket);
    if (remainderApplies(p, l, r.model, nowMs))
        p.remainingRequests = std::max<std::int64_t>(0, p.remainingRequests - 1);
    p.lastAdmitMs = nowMs;
    ++p.admittedTotal;
    return d;
}

bool QuotaPolicy::dequeue(ProviderState& p, std::uint64_t ticket, std::int64_t waiterPid)
{
    return std::erase_if(p.queue, [&](const Waiter& w) {
        return w.ticket == ticket && (waiterPid == 0 || w.pid == waiterPid);
    }) != 0;
}

std::optional<QuotaPolicy::HandOff> QuotaPolicy::handOff(
    QuotaState& s, ProviderState& p, const ProviderLimits& l, std::int64_t nowMs)
{
    if (p.queue.empty() || !l.parallel)
        return std::nullopt;
    const Waiter& head = p.queue.front();
    if (!head.holds || !head.wantsSlot || nowMs > head.deadlineMs)
        return std::nullopt;
    AdmitRequest r;
    r.provider = p.name;
    r.caller = head.caller;
    r.model = head.model;
    r.tokens = head.tokens;
    r.inputTokens = head.inputTokens;
    r.outputTokens = head.outputTokens;
    r.estimated = head.estimated;
    r.wantsSlot = true;
    r.pid = head.holderPid > 0 ? head.holderPid : head.pid;
    r.waiterPid = head.pid;
    r.deadlineMs = head.deadlineMs;
    r.pidNs = head.pidNs;
    r.startTicks = head.holderPid > 0 ? head.holderStartTicks : head.startTicks;
    r.waiterStartTicks = head.startTicks;
    r.takesHandOff = true;
    r.leaseMs = head.leaseMs;
    if (!evaluate(s, p, l, r, head.ticket, nowMs).admitted)
        return std::nullopt;
    HandOff h;
    h.waiter = head; // admit() dequeues it
    auto d = admit(s, p, l, r, head.ticket, nowMs, false);
    if (!d || !d->admitted || !d->slotTaken)
        return std::nullopt; // (evaluate said it would: admit decides the same)
    p.slots.back().ticket = h.waiter.ticket;
    h.decision = *d;
    h.leaseMs = r.leaseMs > 0 ? r.leaseMs : l.maxHoldMs;
    return h;
}

Slot* QuotaPolicy::handedSlot(ProviderState& p, std::uint64_t ticket, std::int64_t holderPid)
{
    if (ticket == 0)
        return nullptr;
    for (auto& slot : p.slots) {
        if (slot.ticket == ticket && slot.pid == holderPid)
            return &slot;
    }
    return nullptr;
}

std::int64_t QuotaPolicy::backoffFor(
    const ProviderLimits& l, std::int32_t consecutive, std::optional<std::int64_t> retryAfterMs)
{
    const std::int64_t cap = std::clamp<std::int64_t>(l.backoffCapMs, 1, QuotaLimits::MAX_BACKOFF_MS);
    std::int64_t exp = std::clamp<std::int64_t>(l.backoffBaseMs, 1, cap);
    for (std::int32_t i = 1; i < consecutive && exp < cap; ++i)
        exp *= 2;
    exp = std::min(exp, cap);
    if (retryAfterMs && *retryAfterMs >= 0)
        return RetryAfter::bound(*retryAfterMs); // the provider's own time: exactly that
    return exp;
}

bool QuotaPolicy::sameStorm(const ProviderState& p, std::int64_t nowMs)
{
    return backoffUntil(p, nowMs) > nowMs;
}

std::int64_t QuotaPolicy::backoffOf429(const ProviderState& p, const ProviderLimits& l, std::int64_t nowMs,
    std::optional<std::int64_t> retryAfterMs)
{
    if (retryAfterMs && *retryAfterMs >= 0)
        return RetryAfter::bound(*retryAfterMs);
    if (sameStorm(p, nowMs))
        return 0;
    const std::int32_t consecutive = std::clamp<std::int32_t>(p.consecutive429, 0, 1 << 20);
    return backoffFor(l, std::min<std::int32_t>(consecutive + 1, 1 << 20), std::nullopt);
}

std::int64_t QuotaPolicy::apply429(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs,
    std::optional<std::int64_t> retryAfterMs, std::int64_t jitterMs)
{
    const std::int64_t backoff = backoffOf429(p, l, nowMs, retryAfterMs);
    const bool same = sameStorm(p, nowMs);
    p.consecutive429 = std::clamp<std::int32_t>(p.consecutive429, 0, 1 << 20);
    if (!same)
        p.consecutive429 = std::min<std::int32_t>(p.consecutive429 + 1, 1 << 20);
    const std::int64_t jitter = std::clamp<std::int64_t>(jitterMs, 0, MAX_JITTER_MS);
    // From the bounded current end: a forged far-future one must not survive a new report.
    p.backoffUntilMs = std::max(
        backoffUntil(p, nowMs), IntMath::plusSaturated(nowMs, IntMath::plusSaturated(backoff, jitter)));
    // After the backoff, admissions restart at an even pace for one window instead of
    // all queued callers firing in the same instant.
    p.paceUntilMs = IntMath::plusSaturated(std::max(p.backoffUntilMs, nowMs), l.windowMs);
    p.last429Ms = nowMs;
    ++p.rateLimitedTotal;
    return backoff;
}

QuotaPolicy::HoldChange QuotaPolicy::applyHold(
    ProviderState& p, const ProviderLimits& l, std::int64_t nowMs, std::int64_t untilMs)
{
    const std::int64_t until = std::min(untilMs, IntMath::plusSaturated(nowMs, MAX_STOP_MS));
    const std::int64_t inForce = backoffUntil(p, nowMs);
    if (until <= inForce)
        return {};
    p.backoffUntilMs = until;
    p.paceUntilMs = std::max(p.paceUntilMs, IntMath::plusSaturated(until, l.windowMs));
    p.remainingRequests = 1;
    p.remainingUntilMs = IntMath::plusSaturated(until, std::min<std::int64_t>(l.windowMs, POST_HOLD_MS));
    p.remainingScope.clear();
    return { true, inForce <= nowMs || until - inForce > HOLD_NOTE_MS };
}

bool QuotaPolicy::applyRemaining(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs,
    std::string_view model, std::int64_t left, std::int64_t untilMs)
{
    const std::string scope = LimitLearning::scopeOf(l, model);
    const std::int64_t until = std::min(untilMs, IntMath::plusSaturated(nowMs, MAX_STOP_MS));
    if (until <= nowMs) {
        // A reset already past: the budget has refilled since, so the word kept binds no more.
        if (p.remainingUntilMs <= nowMs)
            return false;
        p.remainingRequests = 0;
        p.remainingUntilMs = 0;
        p.remainingScope.clear();
        return true;
    }
    const std::int64_t count = std::clamp<std::int64_t>(left, 0, std::int64_t(1) << 40);
    if (p.remainingRequests == count && p.remainingUntilMs == until && p.remainingScope == scope)
        return false;
    p.remainingRequests = count;
    p.remainingUntilMs = until;
    p.remainingScope = scope;
    return true;
}

bool QuotaPolicy::remainderApplies(
    const ProviderState& p, const ProviderLimits& l, std::string_view model, std::int64_t nowMs)
{
    if (nowMs >= p.remainingUntilMs)
        return false;
    return p.remainingScope.empty() || LimitLearning::scopeOf(l, model) == p.remainingScope;
}

std::int64_t QuotaPolicy::backoffUntil(const ProviderState& p, std::int64_t nowMs)
{
    return std::min(p.backoffUntilMs, IntMath::plusSaturated(nowMs, MAX_STOP_MS));
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
    atMost(p.backoffUntilMs, IntMath::plusSaturated(nowMs, MAX_STOP_MS));
    atMost(p.paceUntilMs,
        IntMath::plusSaturated(std::max(p.backoffUntilMs, nowMs), std::max<std::int64_t>(0, l.windowMs)));
    atMost(p.remainingUntilMs, IntMath::plusSaturated(nowMs, MAX_STOP_MS));
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
    const std::int64_t slotLease = IntMath::plusSaturated(nowMs, QuotaLimits::MAX_HOLD_MS);
    for (Slot& slot : p.slots) {
        atMost(slot.acquiredMs, nowMs);
        atMost(slot.leaseUntilMs, slotLease);
    }
    for (Waiter& w : p.queue) {
        atMost(w.enqueuedMs, nowMs);
        atMost(w.leaseUntilMs, IntMath::plusSaturated(nowMs, WAITER_LEASE_MS));
    }
    for (ScopeWindow& scope : p.scopes) {
        if (scope.window.boundFuture(nowMs))
            changed = true;
        if (scope.day == ScopeWindow::Day::Rolling && scope.rollingDay.boundFuture(nowMs))
            changed = true;
        // A calendar day that starts in the future (a forged state, a clock stepped back) is
        // kept as today's, where it counts until today's reset: no longer than one day.
        if (scope.day == ScopeWindow::Day::Calendar && scope.dayStartMs > nowMs) {
            scope.dayStartMs = l.dayReset.dayOf(nowMs).startMs;
            changed = true;
        }
    }
    return changed;
}

} // namespace tollgate
