#include "backend/localquotabackend.h"

#include "quota/limitmismatch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace tollgate {

namespace {

HistoryEvent event(std::int64_t nowMs, EventType type, std::string provider, std::string caller)
{
    HistoryEvent e;
    e.timeMs = nowMs;
    e.type = type;
    e.provider = std::move(provider);
    e.caller = std::move(caller);
    return e;
}

// "what (by who)", or "by who" alone when there is no what, or "what" alone.
Result<const ProviderLimits*> knownProvider(const QuotaLimits& limits, const std::string& provider)
{
    if (const auto* l = limits.find(provider))
        return l;
    return Error::make(ErrorKind::Usage, "",
        "unknown provider '" + provider + "'; known providers: " + limits.knownProviders()
            + " (add one with: tollgate limits set PROVIDER --requests N --window SECONDS)");
}

// After a slot was given back: the head of the queue takes it at once when it can
// (QuotaPolicy::handOff), with the admission's history event; the head finds it by its ticket.
void handOffFreedSlot(QuotaTransaction& tx, ProviderState& p, std::int64_t nowMs, const ProcessProbe& probe)
{
    const ProviderLimits* l = tx.limits.find(p.name);
    if (!l || p.queue.empty())
        return;
    if (QuotaPolicy::pruneQueueHead(p, nowMs, probe, tx.events))
        tx.changed = true;
    // Only to a head of this pid namespace, which is probed, not judged by its lease (the
    // script: of this host): one that fell silent elsewhere must not keep the slot for a lease.
    if (p.queue.empty() || !QuotaPolicy::sameNamespace(p.queue.front().pidNs, probe))
        return;
    auto h = QuotaPolicy::handOff(tx.state, p, *l, nowMs);
    if (!h)
        return;
    HistoryEvent e = event(nowMs, EventType::Admit, p.name, h->waiter.caller);
    e.model = h->waiter.model;
    e.pid = h->waiter.holderPid > 0 ? h->waiter.holderPid : h->waiter.pid;
    e.tokens = h->waiter.tokens;
    e.fence = h->decision.fence;
    e.waitedMs = nowMs - h->waiter.enqueuedMs;
    e.reason = waitReasonName(WaitReason::Slots);
    tx.events.push_back(std::move(e));
    tx.changed = true;
    tx.ring = true;
}

} // namespace

std::int64_t LocalQuotaBackend::nowMs() const
{
    return m_clock->unixMs();
}

Result<AdmitOutcome> LocalQuotaBackend::admit(const AdmitStep& step)
{
    const AdmitRequest& request = step.request;
    AdmitOutcome out;
    auto r = transact(step.storeWait, [&](QuotaTransaction& tx) -> Result<void> {
        auto l = knownProvider(tx.limits, request.provider);
        if (!l)
            return l.error();
        if (auto why = QuotaPolicy::impossible(**l, request))
            return Error::make(ErrorKind::Usage, "", "this request can never be admitted: it " + *why);
        const std::int64_t now = nowMs();
        ProviderState& p = tx.state.ensureProvider(request.provider);
        if (QuotaPolicy::syncProvider(p, **l, now))
            tx.changed = true;
        if (QuotaPolicy::boundTimes(tx.state, p, **l, now))
            tx.changed = true;
        if (QuotaPolicy::reclaimVanished(p, now, *m_probe, tx.events) > 0) {
            tx.changed = true;
            tx.ring = true;
        }
        if (QuotaPolicy::pruneQueueHead(p, now, *m_probe, tx.events)) {
            tx.changed = true;
            tx.ring = true;
        }
        out.leaseMs = request.leaseMs > 0 ? request.leaseMs : (*l)->maxHoldMs;
        out.nowMs = now;
        if (const Slot* handed = QuotaPolicy::handedSlot(p, step.ticket, request.pid)) {
            // A release handed us its slot while we waited (QuotaPolicy::handOff): ours.
            out.decision.admitted = true;
            out.decision.fence = handed->fence;
            out.decision.ticket = step.ticket;
            out.decision.slotTaken = true;
            return {};
        }
        // A copy: the function reads its inputs and may run twice (quotastore.h).
        std::uint64_t myTicket = step.ticket;
        if (myTicket != 0 && std::none_of(p.queue.begin(), p.queue.end(), [&](const Waiter& w) {
                return w.ticket == myTicket;
            }))
            myTicket = 0; // judged a ghost while we lived (stopped, or a lease that lapsed): queue again
        if (myTicket != 0 && QuotaPolicy::renewWaiter(p, myTicket, now))
            tx.changed = true;
        auto d = QuotaPolicy::admit(tx.state, p, **l, request, myTicket, now, step.enqueue);
        if (!d)
            return d.error();
        if (!d->admitted && d->reason == WaitReason::Slots && request.wantsSlot) {
            // Only when a slot is what we lack is it worth asking whether holders live.
            if (QuotaPolicy::reclaimSlots(p, **l, now, *m_probe, false, "", tx.events) > 0) {
                tx.changed = true;
                d = QuotaPolicy::admit(tx.state, p, **l, request, d->ticket, now, step.enqueue);
                if (!d)
                    return d.error();
            }
        }
        out.decision = *d;
        out.nowMs = now;
        const AdmitDecision& decision = out.decision;
        if (decision.admitted) {
            HistoryEvent e = event(now, EventType::Admit, request.provider, request.caller);
            e.model = request.model;
            e.pid = request.pid;
            e.tokens = request.tokens;
            e.fence = decision.fence;
            e.waitedMs = now - step.startMs;
            if (step.firstReason != WaitReason::None)
                e.reason = waitReasonName(step.firstReason);
            tx.events.push_back(std::move(e));
            tx.changed = true;
            // The next in line is now at the head of the queue.
            tx.ring = tx.ring || !p.queue.empty();
        } else if (decision.ticket != myTicket) {
            tx.changed = true; // newly queued
        }
        return {};
    });
    if (!r)
        return r.error();
    return out;
}

LocalQuotaBackend::~LocalQuotaBackend()
{
    // The last try (see the header). A deadline of now: the store waits its floor
    // (FileQuotaStore::MIN_LOCK_WAIT), no longer. What fails here is left to the probe.
    if (!m_pendingLeaves.empty())
        (void)transact(StoreWait { std::chrono::steady_clock::now(), nullptr },
            [](QuotaTransaction&) -> Result<void> { return {}; });
}

Result<void> LocalQuotaBackend::transact(const StoreWait& wait, const QuotaStore::TxFunction& fn)
{
    if (m_pendingLeaves.empty())
        return m_store->transact(wait, fn);
    auto r = m_store->transact(wait, [&](QuotaTransaction& tx) -> Result<void> {
        leavePending(tx);
        return fn(tx);
    });
    if (r)
        m_pendingLeaves.clear();
    return r;
}

Result<void> LocalQuotaBackend::updateLimits(const QuotaStore::LimitsFunction& fn)
{
    if (m_pendingLeaves.empty())
        return m_store->updateLimits(fn);
    auto r = m_store->updateLimits([&](QuotaLimits& all, QuotaTransaction& tx) -> Result<void> {
        leavePending(tx);
        return fn(all, tx);
    });
    if (r)
        m_pendingLeaves.clear();
    return r;
}

void LocalQuotaBackend::leavePending(QuotaTransaction& tx) const
{
    for (const PendingLeave& pending : m_pendingLeaves) {
        if (ProviderState* p = tx.state.provider(pending.provider))
            leave(tx, *p, pending.ticket, pending.pid, pending.waiterPid);
        if (pending.gaveUp) {
            // Stamped now, so the history stays in the order it was written; how long it had
            // waited is as it was when it gave up.
            HistoryEvent e = *pending.gaveUp;
            e.timeMs = nowMs();
            tx.events.push_back(std::move(e));
        }
    }
}

void LocalQuotaBackend::leave(QuotaTransaction& tx, ProviderState& p, std::uint64_t ticket, std::int64_t pid,
    std::int64_t waiterPid) const
{
    if (QuotaPolicy::dequeue(p, ticket, waiterPid)) {
        tx.changed = true;
        tx.ring = true; // someone else may be at the head now
    } else if (Slot* handed = QuotaPolicy::handedSlot(p, ticket, pid)) {
        // It gave up after a release handed it a slot it never learned of: given back,
        // and on to the next in line.
        const std::int64_t now = nowMs();
        HistoryEvent e = event(now, EventType::Release, p.name, handed->caller);
        e.model = handed->model;
        e.pid = handed->pid;
        e.fence = handed->fence;
        e.reason = "given back: its waiter gave up before it learned of it";
        tx.events.push_back(std::move(e));
        const std::uint64_t fence = handed->fence;
        std::erase_if(p.slots, [&](const Slot& s) { return s.fence == fence; });
        tx.changed = true;
        tx.ring = true;
        handOffFreedSlot(tx, p, now, *m_probe);
    }
}

Result<void> LocalQuotaBackend::leaveQueue(const AdmitStep& step, bool gaveUp, const std::string& why)
{
    const AdmitRequest& request = step.request;
    const std::int64_t waiterPid = request.waiterPid > 0 ? request.waiterPid : request.pid; // as queued
    auto gaveUpAt = [&](std::int64_t now) {
        HistoryEvent e = event(now, EventType::GaveUp, request.provider, request.caller);
        e.model = request.model;
        e.pid = request.pid;
        e.tokens = request.tokens;
        e.waitedMs = now - step.startMs;
        e.reason = why;
        return e;
    };
    auto r = transact(step.storeWait, [&](QuotaTransaction& tx) -> Result<void> {
        if (ProviderState* p = tx.state.provider(request.provider))
            leave(tx, *p, step.ticket, request.pid, waiterPid);
        if (gaveUp)
            tx.events.push_back(gaveUpAt(nowMs()));
        return {};
    });
    if (!r && step.ticket != 0) {
        // Done again in the next transaction (see the header): a slot handed to us meanwhile
        // must not stay ours while we live.
        m_pendingLeaves.push_back(PendingLeave { request.provider, step.ticket, request.pid, waiterPid,
            gaveUp ? std::optional<HistoryEvent>(gaveUpAt(nowMs())) : std::nullopt });
    }
    return r;
}

Result<std::int64_t> LocalQuotaBackend::report429(const std::string& provider, const std::string& caller,
    std::optional<std::int64_t> retryAfterMs, std::uint64_t draw, std::int64_t pid)
{
    std::int64_t backoff = 0;
    const std::string& who = caller;
    auto r = transact([&](QuotaTransaction& tx) -> Result<void> {
        auto l = knownProvider(tx.limits, provider);
        if (!l)
            return l.error();
        const std::int64_t now = nowMs();
        ProviderState& p = tx.state.ensureProvider(provider);
        QuotaPolicy::syncProvider(p, **l, now);
        QuotaPolicy::boundTimes(tx.state, p, **l, now);
        const bool same = QuotaPolicy::sameStorm(p, now);
        const std::int64_t base = QuotaPolicy::backoffOf429(p, **l, now, retryAfterMs);
        // Jitter: up to 10% of the backoff (at most 5 s), so a restart is not synchronised. From
        // the draw's high 32 bits: what the Redis script computes exactly (its numbers are doubles).
        const std::int64_t span = std::min<std::int64_t>(base / 10, QuotaPolicy::MAX_JITTER_MS);
        const std::int64_t jitter
            = span > 0 ? static_cast<std::int64_t>((draw >> 32) % static_cast<std::uint64_t>(span + 1)) : 0;
        backoff = QuotaPolicy::apply429(p, **l, now, retryAfterMs, jitter);
        HistoryEvent e = event(now, EventType::RateLimited, provider, who);
        e.pid = pid > 0 ? pid : ProcessProbe::selfPid();
        e.retryAfterMs = RetryAfter::bound(retryAfterMs.value_or(0)); // what was honoured
        e.backoffMs = p.backoffUntilMs - now;
        e.reason = (same ? "same storm, " : "") + std::to_string(p.consecutive429) + " consecutive";
        tx.events.push_back(std::move(e));
        tx.changed = true;
        return {};
    });
    if (!r)
        return r.error();
    return backoff;
}

Result<void> LocalQuotaBackend::reportSuccess(const std::string& provider, const std::string& caller)
{
    return transact([&](QuotaTransaction& tx) -> Result<void> {
        if (auto l = knownProvider(tx.limits, provider); !l)
            return l.error();
        ProviderState& p = tx.state.ensureProvider(provider);
        if (p.consecutive429 != 0) {
            p.consecutive429 = 0;
            tx.changed = true;
        }
        tx.events.push_back(event(nowMs(), EventType::Ok, provider, caller));
        return {};
    });
}

Result<QuotaLimits> LocalQuotaBackend::limits(const StoreWait& wait)
{
    QuotaLimits out;
    auto r = transact(wait, [&](QuotaTransaction& tx) -> Result<void> {
        out = tx.limits;
        return {};
    });
    if (!r)
        return r.error();
    return out;
}

Result<bool> LocalQuotaBackend::setLimits(const std::string& provider,
    const std::optional<ProviderLimits>* expected, const ProviderLimits& limits, const std::string& who,
    std::optional<ProviderLimits>* found, const std::string& description)
{
    if (auto v = QuotaLimits::validate(provider, limits); !v)
        return v.error();
    bool mismatch = false;
    auto r = updateLimits([&](QuotaLimits& all, QuotaTransaction& tx) -> Result<void> {
        mismatch = false;
        // Compared under state.lock with the limits as they are now (this function may run
        // twice: once to prepare limits.json, once under the lock): an edit made on what
        // someone saw never overwrites a change made since.
        const ProviderLimits* current = all.find(provider);
        if (found)
            *found = current ? std::optional<ProviderLimits>(*current) : std::nullopt;
        if (expected && !(current ? (*expected && **expected == *current) : !expected->has_value())) {
            mismatch = true; // an error, so that nothing at all is written
            return Error::make(ErrorKind::Busy, "", "the limits of '" + provider + "' changed meanwhile");
        }
        if (auto r = all.set(provider, limits); !r)
            return r;
        const std::int64_t now = nowMs();
        QuotaPolicy::syncProvider(tx.state.ensureProvider(provider), limits, now);
        HistoryEvent e = event(now, EventType::Limits, provider, "");
        const std::string what = QuotaLimits::summary(limits);
        e.reason = HistoryEvent::byWhom(description.empty() ? what : description, who);
        tx.events.push_back(std::move(e));
        return {};
    });
    if (!r) {
        if (mismatch)
            return false;
        return r.error();
    }
    return true;
}

Result<void> LocalQuotaBackend::removeLimits(const std::string& provider, const std::string& who)
{
    return updateLimits([&](QuotaLimits& all, QuotaTransaction& tx) -> Result<void> {
        if (!all.remove(provider))
            return Error::make(ErrorKind::Usage, "",
                "unknown provider '" + provider + "'; known providers: " + all.knownProviders());
        std::erase_if(tx.state.providers, [&](const ProviderState& p) { return p.name == provider; });
        HistoryEvent e = event(nowMs(), EventType::Limits, provider, "");
        e.reason = HistoryEvent::byWhom("removed", who);
        tx.events.push_back(std::move(e));
        return {};
    });
}

Result<std::vector<std::string>> LocalQuotaBackend::importLimits(
    const QuotaLimits& incoming, bool replace, const std::string& who, bool fresh)
{
    for (const auto& [name, l] : incoming.providers()) {
        if (auto v = QuotaLimits::validate(name, l); !v)
            return v.error();
    }
    std::vector<std::string> changed;
    auto r = updateLimits([&](QuotaLimits& all, QuotaTransaction& tx) -> Result<void> {
        changed.clear(); // an output, overwritten on every run
        const std::int64_t now = nowMs();
        if (replace) {
            std::vector<std::string> gone;
            for (const auto& [name, l] : all.providers()) {
                if (!incoming.find(name))
                    gone.push_back(name);
            }
            for (const auto& name : gone) {
                all.remove(name);
                std::erase_if(tx.state.providers, [&](const ProviderState& p) { return p.name == name; });
                HistoryEvent e = event(now, EventType::Limits, name, "");
                e.reason = HistoryEvent::byWhom("removed by an import", who);
                tx.events.push_back(std::move(e));
                changed.push_back(name);
            }
        }
        for (const auto& [name, l] : incoming.providers()) {
            const ProviderLimits* current = all.find(name);
            if (current && *current == l)
                continue;
            if (auto set = all.set(name, l); !set)
                return set;
            if (!current && !tx.state.provider(name) && !fresh) {
                // Imported without a state: a restore, or the limits of a quota used elsewhere.
                // What was spent is not known, so it starts as a lost state does (as the Redis
                // script's importLimits); fences from now on lie above the reset's time in µs.
                QuotaPolicy::fillConservatively(tx.state.ensureProvider(name), l, now);
                tx.state.nextFence
                    = std::max<std::uint64_t>(tx.state.nextFence, static_cast<std::uint64_t>(now) * 1000);
                HistoryEvent reset = event(now, EventType::Reset, name, "");
                reset.reason
                    = "imported without a state (a restore): windows start full, slots held until their "
                      "holders renew";
                tx.events.push_back(std::move(reset));
            }
            QuotaPolicy::syncProvider(tx.state.ensureProvider(name), l, now);
            HistoryEvent e = event(now, EventType::Limits, name, "");
            e.reason = HistoryEvent::byWhom(current ? "changed by an import" : "added by an import", who);
            tx.events.push_back(std::move(e));
            changed.push_back(name);
        }
        return {};
    });
    if (!r)
        return r.error();
    return changed;
}

Result<void> LocalQuotaBackend::pause(
    const std::string& provider, const std::string& stored, const std::string& why, const std::string& who)
{
    return transact([&](QuotaTransaction& tx) -> Result<void> {
        const std::int64_t now = nowMs();
        if (provider.empty()) {
            tx.state.pausedAll = true;
            tx.state.pauseReason = stored;
            tx.state.pausedAtMs = now;
        } else {
            auto l = knownProvider(tx.limits, provider);
            if (!l)
                return l.error();
            ProviderState& p = tx.state.ensureProvider(provider);
            p.paused = true;
            p.pauseReason = stored;
            p.pausedAtMs = now;
        }
        HistoryEvent e = event(now, EventType::Pause, provider, "");
        e.reason = HistoryEvent::byWhom(why, who);
        tx.events.push_back(std::move(e));
        tx.changed = true;
        return {};
    });
}

Result<void> LocalQuotaBackend::resume(const std::string& provider, const std::string& who)
{
    return transact([&](QuotaTransaction& tx) -> Result<void> {
        if (provider.empty()) {
            tx.state.pausedAll = false;
            tx.state.pauseReason.clear();
            for (auto& p : tx.state.providers) {
                p.paused = false;
                p.pauseReason.clear();
            }
        } else {
            auto l = knownProvider(tx.limits, provider);
            if (!l)
                return l.error();
            ProviderState& p = tx.state.ensureProvider(provider);
            p.paused = false;
            p.pauseReason.clear();
        }
        HistoryEvent e = event(nowMs(), EventType::Resume, provider, "");
        e.reason = who.empty() ? "" : "by " + who;
        tx.events.push_back(std::move(e));
        tx.changed = true;
        tx.ring = true;
        return {};
    });
}

Result<void> LocalQuotaBackend::resetBackoff(const std::string& provider, const std::string& who)
{
    return transact([&](QuotaTransaction& tx) -> Result<void> {
        if (auto l = knownProvider(tx.limits, provider); !l)
            return l.error();
        ProviderState& p = tx.state.ensureProvider(provider);
        p.backoffUntilMs = 0;
        p.paceUntilMs = 0;
        p.consecutive429 = 0;
        p.remainingUntilMs = 0; // the user's word overrides the provider's last one
        p.remainingRequests = 0;
        p.remainingScope.clear();
        HistoryEvent e = event(nowMs(), EventType::BackoffReset, provider, "");
        e.reason = who.empty() ? "" : "by " + who;
        tx.events.push_back(std::move(e));
        tx.changed = true;
        tx.ring = true;
        return {};
    });
}

Result<void> LocalQuotaBackend::noteRemaining(const std::string& provider, const std::string& model,
    std::int64_t left, std::int64_t untilMs, std::uint64_t fence)
{
    return transact([&](QuotaTransaction& tx) -> Result<void> {
        auto l = knownProvider(tx.limits, provider);
        if (!l)
            return l.error();
        ProviderState& p = tx.state.ensureProvider(provider);
        const std::uint64_t last = tx.state.nextFence - 1;
        const std::int64_t since = fence > 0 && last > fence
            ? static_cast<std::int64_t>(std::min<std::uint64_t>(last - fence, std::uint64_t(1) << 40))
            : 0;
        if (QuotaPolicy::applyRemaining(p, **l, nowMs(), model, left - since, untilMs)) {
            tx.changed = true;
            tx.ring = left > 0 || p.remainingUntilMs == 0; // waiters held by the word before may go now
        }
        return {};
    });
}

Result<void> LocalQuotaBackend::holdUntil(
    const std::string& provider, std::int64_t untilMs, const std::string& reason)
{
    return transact([&](QuotaTransaction& tx) -> Result<void> {
        auto l = knownProvider(tx.limits, provider);
        if (!l)
            return l.error();
        const std::int64_t now = nowMs();
        ProviderState& p = tx.state.ensureProvider(provider);
        const QuotaPolicy::HoldChange hold = QuotaPolicy::applyHold(p, **l, now, untilMs);
        if (!hold.changed)
            return {};
        if (hold.noted) {
            HistoryEvent e = event(now, EventType::Hold, provider, "");
            e.reason = reason;
            tx.events.push_back(std::move(e));
        }
        tx.changed = true;
        return {};
    });
}

Result<bool> LocalQuotaBackend::noteReportedLimits(const std::string& provider,
    const ReportedLimits& reported, const PlanUsage& plan, const std::string& caller)
{
    bool written = false;
    auto done = transact([&](QuotaTransaction& tx) -> Result<void> {
        written = false; // a transaction may run more than once (quotastore.h)
        auto l = knownProvider(tx.limits, provider);
        if (!l)
            return l.error();
        const std::int64_t now = nowMs();
        ProviderState& p = tx.state.ensureProvider(provider);
        auto keep = [](std::int64_t figure, std::int64_t kept) {
            return figure < 0 ? kept : std::min(figure, LimitMismatch::MAX_REPORTED);
        };
        const ReportedLimits was { p.reportedRequests, p.reportedTokens, p.reportedInputTokens,
            p.reportedOutputTokens, p.reportedScope };
        ReportedLimits next { keep(reported.requests, was.requests), keep(reported.tokens, was.tokens),
            keep(reported.inputTokens, was.inputTokens), keep(reported.outputTokens, was.outputTokens),
            reported.any() ? reported.scope : was.scope };
        const bool planSaid = plan.atMs != 0;
        const bool same = next == was && (!planSaid || plan.sameAs(p.plan));
        if (same && p.reportedAtMs <= now && now - p.reportedAtMs < LimitMismatch::REFRESH_MS)
            return {};
        // A budget is news when its figure or its scope changed.
        auto changed = [&](const std::string& budget) {
            if (next.scope != was.scope)
                return true;
            if (budget == "requests")
                return next.requests != was.requests;
            if (budget == "tokens")
                return next.tokens != was.tokens;
            if (budget == "input tokens")
                return next.inputTokens != was.inputTokens;
            return next.outputTokens != was.outputTokens;
        };
        for (const LimitNotice& n : LimitMismatch::find(next, *l, changed)) {
            HistoryEvent e = event(now, EventType::LimitMismatch, provider, caller);
            e.reason = n.text;
            tx.events.push_back(std::move(e));
        }
        p.reportedRequests = next.requests;
        p.reportedTokens = next.tokens;
        p.reportedInputTokens = next.inputTokens;
        p.reportedOutputTokens = next.outputTokens;
        p.reportedScope = next.scope;
        p.reportedAtMs = now;
        if (planSaid) {
            p.plan = plan;
            p.plan.atMs = now;
        }
        tx.changed = true;
        written = true;
        return {};
    });
    if (!done)
        return done.error();
    return written;
}

namespace {

// An admission at `at` counted `estimated` tokens and used `used`: the difference goes into
// the bucket of `at`, in every scope the model counts in (QuotaPolicy::correct). Only the token
// total is known here: a split scope keeps the estimate's input and output. Returns the
// difference applied; 0: nothing changed (none, `at` ahead, or the provider no longer known).
std::int64_t correctAdmission(ProviderState& p, const ProviderLimits* l, const std::string& model,
    std::int64_t at, std::int64_t now, std::int64_t estimated, std::int64_t used)
{
    const std::int64_t delta = std::clamp<std::int64_t>(used, 0, RollingWindow::MAX_BUCKET_COUNT)
        - std::clamp<std::int64_t>(estimated, 0, RollingWindow::MAX_BUCKET_COUNT);
    if (delta == 0 || at > now || !l)
        return 0;
    return QuotaPolicy::correct(p, *l, model, at, now, RollingWindow::Usage { 0, delta, 0, 0 }) ? delta : 0;
}

// What finishAdmission takes back and adds, per metric: the admission recorded its estimate as
// QuotaPolicy::costOf did (an estimate without a split counts whole toward input and output),
// so the difference is taken from that. Without the used split only the total moves.
RollingWindow::Usage deltaOf(const AdmissionEnd& end, std::int64_t estimated)
{
    AdmitRequest asked;
    asked.tokens = estimated;
    asked.inputTokens = end.estimatedInputTokens;
    asked.outputTokens = end.estimatedOutputTokens;
    const RollingWindow::Usage was = QuotaPolicy::costOf(asked);
    auto clamp
        = [](std::int64_t v) { return std::clamp<std::int64_t>(v, 0, RollingWindow::MAX_BUCKET_COUNT); };
    RollingWindow::Usage d { 0, clamp(end.usedTokens) - was.tokens, 0, 0 };
    if (end.usedInputTokens >= 0 && end.usedOutputTokens >= 0) {
        d.input = clamp(end.usedInputTokens) - was.input;
        d.output = clamp(end.usedOutputTokens) - was.output;
    }
    return d;
}

// Applies an admission's end (deltaOf); returns {changed, capacity came back}.
std::pair<bool, bool> correctEnd(ProviderState& p, const ProviderLimits* l, const std::string& model,
    std::int64_t at, std::int64_t now, const RollingWindow::Usage& d)
{
    if ((d.tokens == 0 && d.input == 0 && d.output == 0) || at > now || !l)
        return { false, false };
    if (!QuotaPolicy::correct(p, *l, model, at, now, d))
        return { false, false };
    return { true, d.tokens < 0 || d.input < 0 || d.output < 0 };
}

} // namespace

Result<void> LocalQuotaBackend::correctTokens(const std::string& provider, const std::string& model,
    std::int64_t admittedAtMs, std::int64_t estimated, std::int64_t used)
{
    return transact([&](QuotaTransaction& tx) -> Result<void> {
        auto l = knownProvider(tx.limits, provider);
        if (!l)
            return l.error();
        const std::int64_t now = nowMs();
        if (used == estimated || admittedAtMs > now)
            return {}; // else no state is even touched
        const std::int64_t delta = correctAdmission(
            tx.state.ensureProvider(provider), *l, model, admittedAtMs, now, estimated, used);
        tx.changed = delta != 0;
        tx.ring = delta < 0; // capacity may have come back
        return {};
    });
}

Result<int> LocalQuotaBackend::releaseStale(bool overdue, const std::string& who)
{
    int n = 0;
    auto r = transact([&](QuotaTransaction& tx) -> Result<void> {
        n = 0; // an output, overwritten on every run
        const std::int64_t now = nowMs();
        for (auto& p : tx.state.providers) {
            const ProviderLimits* l = tx.limits.find(p.name);
            if (!l)
                continue;
            n += QuotaPolicy::reclaimSlots(p, *l, now, *m_probe, overdue, who, tx.events);
            // Ghost waiters anywhere in the queue, not only at the head.
            const auto before = p.queue.size();
            std::erase_if(p.queue,
                [&](const Waiter& w) { return !QuotaPolicy::whyWaiterGone(w, now, *m_probe).empty(); });
            n += static_cast<int>(before - p.queue.size());
        }
        if (n > 0) {
            tx.changed = true;
            tx.ring = true;
        }
        return {};
    });
    if (!r)
        return r.error();
    return n;
}

namespace {

// The slot of `fence` in `provider`; `owner` is set only when there is one.
std::vector<Slot>::iterator findSlot(
    QuotaState& state, const std::string& provider, std::uint64_t fence, ProviderState*& owner)
{
    owner = nullptr;
    ProviderState* p = state.provider(provider);
    if (!p)
        return {};
    auto it = std::find_if(p->slots.begin(), p->slots.end(), [&](const Slot& s) { return s.fence == fence; });
    if (it != p->slots.end())
        owner = p;
    return it;
}

} // namespace

Result<bool> LocalQuotaBackend::releaseSlot(
    const std::string& provider, std::uint64_t fence, const std::string& who)
{
    bool found = false;
    auto r = transact([&](QuotaTransaction& tx) -> Result<void> {
        found = false; // an output, overwritten on every run
        ProviderState* p = nullptr;
        const auto it = findSlot(tx.state, provider, fence, p);
        if (!p)
            return {};
        HistoryEvent e = event(nowMs(), EventType::Release, provider, it->caller);
        e.model = it->model;
        e.pid = it->pid;
        e.fence = fence;
        if (!who.empty())
            e.reason = "forced by " + who;
        tx.events.push_back(std::move(e));
        p->slots.erase(it);
        found = true;
        tx.changed = true;
        tx.ring = true;
        handOffFreedSlot(tx, *p, nowMs(), *m_probe);
        return {};
    });
    if (!r)
        return r.error();
    return found;
}

Result<bool> LocalQuotaBackend::finishAdmission(const AdmissionEnd& end)
{
    bool found = false;
    auto r = transact([&](QuotaTransaction& tx) -> Result<void> {
        found = false; // an output, overwritten on every run
        const std::int64_t now = nowMs();
        ProviderState* p = nullptr;
        const auto it = findSlot(tx.state, end.provider, end.fence, p);
        std::int64_t at = end.admittedAtMs;
        std::int64_t estimated = end.estimated;
        std::string model = end.model;
        std::string caller = end.caller;
        AdmissionEnd ended = end;
        if (p) {
            at = it->acquiredMs;
            estimated = it->tokens;
            // The slot's own split of the estimate, when it kept one (the permit's otherwise).
            if (it->inputTokens != 0 || it->outputTokens != 0) {
                ended.estimatedInputTokens = it->inputTokens;
                ended.estimatedOutputTokens = it->outputTokens;
            }
            model = it->model;
            caller = it->caller;
            HistoryEvent e = event(now, EventType::Release, end.provider, it->caller);
            e.model = it->model;
            e.pid = it->pid;
            e.fence = end.fence;
            tx.events.push_back(std::move(e));
            p->slots.erase(it);
            found = true;
            tx.changed = true;
            tx.ring = true;
        } else {
            if (auto l = knownProvider(tx.limits, end.provider); !l)
                return l.error();
            p = &tx.state.ensureProvider(end.provider);
        }
        if (end.usedTokens >= 0 && at > 0) {
            const auto [changed, freed]
                = correctEnd(*p, tx.limits.find(end.provider), model, at, now, deltaOf(ended, estimated));
            tx.changed = tx.changed || changed;
            tx.ring = tx.ring || freed;
        }
        if (end.success) {
            if (p->consecutive429 != 0) {
                p->consecutive429 = 0;
                tx.changed = true;
            }
            tx.events.push_back(event(now, EventType::Ok, end.provider, caller));
        }
        if (found)
            handOffFreedSlot(tx, *p, now, *m_probe);
        return {};
    });
    if (!r)
        return r.error();
    return found;
}

Result<bool> LocalQuotaBackend::renewSlot(
    const std::string& provider, std::uint64_t fence, std::int64_t leaseMs, const Slot* holder)
{
    bool found = false;
    auto r = transact([&](QuotaTransaction& tx) -> Result<void> {
        found = false; // an output, overwritten on every run
        ProviderState* p = nullptr;
        const auto it = findSlot(tx.state, provider, fence, p);
        const std::int64_t now = nowMs();
        const std::int64_t until
            = leaseMs > INT64_MAX - now ? INT64_MAX : now + std::max<std::int64_t>(1, leaseMs);
        if (!p) {
            // Lost with the state (started again with placeholders): taken back if a
            // placeholder of that reset is left.
            ProviderState* q = tx.state.provider(provider);
            if (!holder || !q)
                return {};
            Slot back = *holder;
            back.fence = fence;
            back.leaseUntilMs = until;
            if (!QuotaPolicy::reestablish(*q, back))
                return {};
            found = true;
            tx.changed = true;
            return {};
        }
        it->leaseUntilMs = until;
        found = true;
        tx.changed = true;
        return {};
    });
    if (!r)
        return r.error();
    return found;
}

Result<void> LocalQuotaBackend::record(const std::vector<HistoryEvent>& events)
{
    return transact([&events](QuotaTransaction& tx) -> Result<void> {
        tx.events.insert(tx.events.end(), events.begin(), events.end());
        return {};
    });
}

Result<LimiterSnapshot> LocalQuotaBackend::snapshot()
{
    LimiterSnapshot out;
    auto r = transact([&](QuotaTransaction& tx) -> Result<void> {
        out.state = tx.state;
        out.limits = tx.limits;
        out.nowMs = nowMs();
        return {};
    });
    if (!r)
        return r.error();
    return out;
}

} // namespace tollgate
