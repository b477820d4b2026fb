#pragma once

// QuotaPolicy: the admission rules, as pure functions of (state, limits, request, now).
// No I/O and no clock of its own, so every rule is tested without sleeping; the limiter
// runs these inside a store transaction.
//
// A request is admitted only when all hold, in this order: nothing is paused (globally or for
// the provider); no 429 backoff is in force (nor, after one, the pacing that spreads the
// restart); it is first in the provider's FIFO queue (or the queue is empty); the provider's
// rolling window has room for one more request and its tokens; so does the model's, when the
// model has limits; and, when it asks for one, a parallel slot is free.
//
// Limits come per scope — the provider, and every model class the request's model matches —
// each with a budget per rolling window and per day (ProviderLimits), in four metrics
// (requests, tokens, input and output tokens). A request is admitted only when every budget of
// every scope it counts in has room for it, and is then recorded in each.

#include "history/historyevent.h"
#include "quota/quotalimits.h"
#include "quota/quotastate.h"
#include "quota/retryafter.h"
#include "system/processprobe.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <vector>

namespace tollgate {

struct AdmitRequest
{
    std::string provider;
    std::string caller;
    std::string model;
    std::int64_t tokens = 0;
    // The provider's split of the tokens (its counting rule's input and output). Both 0: not
    // known, and `tokens` counts in full toward each input and output limit; given, tokens is
    // their sum.
    std::int64_t inputTokens = 0;
    std::int64_t outputTokens = 0;
    // The cost is an estimate (the proxy's reading of a body), not a fact the caller stated: it
    // is never refused as too large. Where it exceeds a limit it is taken as that whole limit,
    // so it is admitted once a window is empty; its real usage corrects the window at the end.
    bool estimated = false;
    bool wantsSlot = false;
    std::int64_t pid = 0; // the process recorded as slot holder (may be the caller's parent)
    std::int64_t waiterPid = 0; // the process that waits (queue entry); 0 = pid
    std::int64_t deadlineMs = 0; // for the queue entry
    // Identity of holder and waiter beyond the pid (the limiter fills these in): the pid
    // namespace both pids are numbered in, and their start times (0 = unknown).
    std::uint64_t pidNs = 0;
    std::uint64_t startTicks = 0;
    std::uint64_t waiterStartTicks = 0;
    // How long the slot's lease lasts (seen from other pid namespaces); the holder renews it.
    // 0: the provider's maximum hold time (for a holder that does not renew: acquire --slot).
    std::int64_t leaseMs = 0;
    // A slot may be handed to this request while it waits (QuotaPolicy::handOff): its holder
    // lives no longer than the waiter (the waiter itself, or `run`'s keeper, which dies with
    // its runner), so a slot handed to a waiter that dies is not left to a holder that does
    // not know it holds it. Not for `acquire --pid` of a longer-lived process.
    bool takesHandOff = false;
};

struct AdmitDecision
{
    bool admitted = false;
    WaitReason reason = WaitReason::None;
    std::int64_t retryAtMs = INT64_MAX; // when to look again without a ring; INT64_MAX: on a ring
    std::uint64_t fence = 0; // when admitted
    std::uint64_t ticket = 0; // the queue ticket (kept across retries)
    bool slotTaken = false;
};

class QuotaPolicy
{
public:
    // A waiter whose deadline passed this long ago without it leaving is a ghost.
    static constexpr std::int64_t GHOST_GRACE_MS = 5000;
    // A waiter re-checks at least every QuotaLimiter::MAX_SLEEP; it renews its lease when a
    // third of it is gone. Seen from another pid namespace, a waiter whose lease ran out died.
    static constexpr std::int64_t WAITER_LEASE_MS = 15000;
    // The jitter added to one 429's backoff is at most this.
    static constexpr std::int64_t MAX_JITTER_MS = 5000;
    // The longest one 429 report stops the provider's callers: the longest backoff plus the
    // jitter. A stored backoff reaching further (a forged or hand-edited state.bin) is cut to
    // this from now.
    static constexpr std::int64_t MAX_STOP_MS = QuotaLimits::MAX_BACKOFF_MS + MAX_JITTER_MS;
    // A hold that moves the end of the one in force on by no more than this is the same hold
    // (applyHold: extended without a history event).
    static constexpr std::int64_t HOLD_NOTE_MS = 1000;
    // After a hold, one request goes until an answer restates what remains, for at most this
    // (or the window, if shorter): an answer that states nothing must not stop callers for a
    // long window's length.
    static constexpr std::int64_t POST_HOLD_MS = 60000;
    // The lease of a holder that renews it (`tollgate run`, QuotaLimiter::RUN_LEASE), renewed
    // every third of it.
    static constexpr std::int64_t RENEWED_LEASE_MS = 30000;

    // How long the placeholders of a lost state hold their slots: as long as a live holder
    // may go without vouching for itself — the maximum hold time (the lease of `acquire
    // --slot`, which never renews), and at least one renewed lease, so that every running
    // `tollgate run` has renewed, and so taken its slot back (reestablish), before the rest
    // are freed.
    [[nodiscard]] static std::int64_t placeholderHoldMs(const ProviderLimits& l)
    {
        return std::max(l.maxHoldMs, RENEWED_LEASE_MS);
    }
    // A holder renews (QuotaLimiter::renewSlot) a slot the state no longer has: the state was
    // lost and started again with placeholders (fillConservatively), and this holder, admitted
    // before that (its fence is below every fence issued since, which start at the reset's
    // time in µs), still runs. It takes one of those placeholders back, before anyone else
    // can be admitted into it. false: no placeholder of a reset after its admission (the slot
    // was released by hand or reclaimed: it stays gone).
    static bool reestablish(ProviderState& p, const Slot& held);
    // When a placeholder stops holding its slot: its lease end (a placeholder from before
    // placeholders had one: one window after the reset).
    [[nodiscard]] static std::int64_t placeholderEnd(const Slot& s, const ProviderLimits& l);

    // The backoff end as judged at nowMs: never more than MAX_STOP_MS ahead.
    [[nodiscard]] static std::int64_t backoffUntil(const ProviderState& p, std::int64_t nowMs);
    // Brings times a state cannot truthfully hold back within bounds: a backoff (and the pacing
    // after it) ending more than MAX_STOP_MS from now, "happened at" times in the future, leases
    // longer than any holder or waiter takes. Persisting the result (true: changed) is what
    // makes the bound hold: clamped only when read, a forged "year 292 million" would stay
    // MAX_STOP_MS ahead of every look for ever.
    static bool boundTimes(QuotaState& s, ProviderState& p, const ProviderLimits& l, std::int64_t nowMs);

    // Who holds a slot. The holder's pid is probed only from its own pid namespace (the
    // probe's); from anywhere else (or when either namespace is unknown) the slot is held
    // until its lease ends. cheap: only kill(pid, 0), no /proc reads.
    [[nodiscard]] static bool sameNamespace(std::uint64_t pidNs, const ProcessProbe& probe);
    [[nodiscard]] static std::int64_t leaseEnd(const Slot& s, const ProviderLimits& l);
    // Why the slot no longer has a holder ("" while it has): "holder died", "lease expired"
    // or "placeholder expired". The same judgement for the limiter, status and dashboard.
    [[nodiscard]] static std::string whyHolderGone(const Slot& s, const ProviderLimits& l, std::int64_t nowMs,
        const ProcessProbe& probe, bool cheap = false);
    [[nodiscard]] static bool holderAlive(
        const Slot& s, const ProviderLimits& l, std::int64_t nowMs, const ProcessProbe& probe)
    {
        return whyHolderGone(s, l, nowMs, probe).empty();
    }
    // Why a queue entry is a ghost ("" while its process waits).
    [[nodiscard]] static std::string whyWaiterGone(
        const Waiter& w, std::int64_t nowMs, const ProcessProbe& probe);
    // Renews the waiter's lease when a third of it is gone; true when the state changed.
    static bool renewWaiter(ProviderState& p, std::uint64_t ticket, std::int64_t nowMs);

    // What the next transaction would see: the rules every transaction applies before it
    // decides (windows synced with the limits, vanished holders and waiters, expired
    // placeholders and dead holders reclaimed), applied to `state` — a reader's copy: the
    // read side (status, the dashboard) shows what the limiter would act on, and writes nothing.
    static void settle(
        QuotaState& state, const QuotaLimits& limits, std::int64_t nowMs, const ProcessProbe& probe);
    // Makes the provider's windows match its limits (creates, rescales, drops scopes).
    static bool syncProvider(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs);
    // A fresh state after a lost one: windows full (as if the limits had been spent just now,
    // so for one window nothing is admitted), parallel slots taken by placeholders (pid 0)
    // held for placeholderHoldMs (their lease end), which holders still running take back.
    static void fillConservatively(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs);

    // Removes queue entries from the front whose process is gone or whose deadline is long past.
    static bool pruneQueueHead(
        ProviderState& p, std::int64_t nowMs, const ProcessProbe& probe, std::vector<HistoryEvent>& events);
    // Every transaction: frees slots whose holder pid no longer exists (one kill(pid, 0) per
    // slot of this namespace; the costlier zombie and pid-reuse checks run in reclaimSlots)
    // and slots of other namespaces whose lease ran out.
    static int reclaimVanished(
        ProviderState& p, std::int64_t nowMs, const ProcessProbe& probe, std::vector<HistoryEvent>& events);
    // Removes slots whose holder is dead (and expired placeholders); with overdue, also slots
    // held longer than the maximum hold time. `who` names the process doing it.
    static int reclaimSlots(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs,
        const ProcessProbe& probe, bool overdue, const std::string& who, std::vector<HistoryEvent>& events);

    [[nodiscard]] static AdmitDecision evaluate(const QuotaState& s, const ProviderState& p,
        const ProviderLimits& l, const AdmitRequest& r, std::uint64_t ticket, std::int64_t nowMs);
    // evaluate(), then apply: record the admission, or queue the request (when `enqueue`).
    [[nodiscard]] static Result<AdmitDecision> admit(QuotaState& s, ProviderState& p, const ProviderLimits& l,
        const AdmitRequest& r, std::uint64_t ticket, std::int64_t nowMs, bool enqueue);
    // Takes the waiter `ticket` out of the queue; with a waiter pid, only if it is that pid's
    // (a leave done late must not take out another's waiter given the same ticket again: a
    // state that fell back to its previous copy issues its tickets again).
    static bool dequeue(ProviderState& p, std::uint64_t ticket, std::int64_t waiterPid = 0);

    // Hand-off (issue 27): a slot given back goes straight to the head of the queue, so the
    // head needs no look of its own to take it (on a Redis home the ring carries the
    // admission: one call fewer per queued admission, and no slot idle while the head wakes).
    // Only a head that takes a handed slot (Waiter::holds), before its deadline (the backends
    // hand off only to a head of the releaser's own pid namespace or host, whose holder is
    // probed rather than judged by its lease); it is admitted as its own look would admit it now (evaluate
    // and admit with its ticket, its request as it queued it), and the slot keeps its ticket (Slot::ticket):
    // the waiter finds it by that ticket when it looks (handedSlot), and one that gives up first gives it
    // back. Nothing else changes: a head that cannot go now stays queued and is rung as before. The
    // admission, for its history event and the ring.
    struct HandOff
    {
        Waiter waiter; // as it was queued
        AdmitDecision decision;
        std::int64_t leaseMs = 0; // the slot's lease
    };
    [[nodiscard]] static std::optional<HandOff> handOff(
        QuotaState& s, ProviderState& p, const ProviderLimits& l, std::int64_t nowMs);
    // The slot handed to the waiter with this ticket (0: none) for this holder pid, while it is
    // held (the pid too: a ticket issued again after a lost state must not find another's slot).
    [[nodiscard]] static Slot* handedSlot(ProviderState& p, std::uint64_t ticket, std::int64_t holderPid);

    // The backoff of a 429 (docs/PROXY.md, "429 storms"): the time the provider named
    // (Retry-After, retry-after-ms: exactly that, at most RetryAfter::MAX_MS) when it named
    // one (a value >= 0); else base * 2^(n-1) capped at cap (at most QuotaLimits::MAX_BACKOFF_MS),
    // n = consecutive 429s — seed 003's 60 -> 120 -> ... schedule, for 429s that name no time.
    [[nodiscard]] static std::int64_t backoffFor(
        const ProviderLimits& l, std::int32_t consecutive, std::optional<std::int64_t> retryAfterMs);
    // Whether a 429 heard at nowMs belongs to the storm already being waited out: a backoff is
    // in force, and nobody is admitted during one, so the call it answers was admitted before
    // the backoff began. Such a 429 never escalates the doubling.
    [[nodiscard]] static bool sameStorm(const ProviderState& p, std::int64_t nowMs);
    // The backoff a 429 heard now starts (before jitter): the named time; for a new step of a
    // storm the doubling; 0 for a 429 of the same storm that names no time (the backoff in
    // force stands).
    [[nodiscard]] static std::int64_t backoffOf429(const ProviderState& p, const ProviderLimits& l,
        std::int64_t nowMs, std::optional<std::int64_t> retryAfterMs);
    // Applies a 429: a new step of a storm counts one more consecutive 429; the backoff
    // (backoffOf429, plus jitterMs: 0 .. MAX_JITTER_MS, clamped, chosen by the caller) extends
    // the one in force, never shortens it; admissions are paced for a window after it.
    // Returns the backoff (backoffOf429).
    static std::int64_t apply429(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs,
        std::optional<std::int64_t> retryAfterMs, std::int64_t jitterMs);
    // The provider said nothing is left until untilMs (QuotaBackend::holdUntil): no admission
    // before it, then admissions at the window's even pace for one window (the reset frees
    // room for the next request, not for every waiter at once). `changed` false: a backoff
    // already in force lasts as long (nothing changes). `noted`: worth a `hold` history event —
    // the hold starts (none in force), or it moves the end in force on by more than
    // HOLD_NOTE_MS; the answers of one hold (every answer in flight repeats the reset, a
    // relative one a little later each time) extend it without a line each.
    struct HoldChange
    {
        bool changed = false;
        bool noted = false;
    };
    static HoldChange applyHold(
        ProviderState& p, const ProviderLimits& l, std::int64_t nowMs, std::int64_t untilMs);
    // The provider's answer for `model` said `left` requests remain until untilMs (less those
    // admitted after the answered request, which the word may not count: the backend's part):
    // until then at most that many more admissions of the model's scope (its first class; none:
    // the whole provider), each admission taking one. The latest word replaces the one kept: it
    // counts every request the provider received, those still in flight included. A hold
    // (applyHold) leaves one request to the whole provider after its end: the reset frees room
    // for the next request, and the next answer says how much more (for at most POST_HOLD_MS).
    // A word whose reset is already past clears the one kept (the budget has refilled since).
    // false: nothing changed.
    static bool applyRemaining(ProviderState& p, const ProviderLimits& l, std::int64_t nowMs,
        std::string_view model, std::int64_t left, std::int64_t untilMs);
    // Whether the kept remainder applies to a request for `model` now (in force, and the model's
    // first class is its scope, or it is the provider's).
    [[nodiscard]] static bool remainderApplies(
        const ProviderState& p, const ProviderLimits& l, std::string_view model, std::int64_t nowMs);
    // An admission at atMs counted an estimate and really used delta more (or less, negative):
    // the difference goes into the window bucket (and day) that counted it, in every scope the
    // model counts in; input and output only in scopes that split. false: nothing to do.
    static bool correct(ProviderState& p, const ProviderLimits& l, const std::string& model,
        std::int64_t atMs, std::int64_t nowMs, const RollingWindow::Usage& delta);
    // What a request counts, per metric (1 request; its tokens, split when known).
    [[nodiscard]] static RollingWindow::Usage costOf(const AdmitRequest& r);
    // Why a request can never be admitted under these limits, if so: a stated cost above a
    // limit of a scope it counts in (an estimated cost never is; see AdmitRequest::estimated).
    [[nodiscard]] static std::optional<std::string> impossible(
        const ProviderLimits& l, const AdmitRequest& r);
};

} // namespace tollgate
