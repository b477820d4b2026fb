#include "exchange/quotaexchange.h"

#include "history/historyevent.h"
#include "quota/capacity.h"
#include "quota/limitlearning.h"
#include "quota/rollingwindow.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace tollgate {

namespace {

// "5h 97%, 7d 41%": the plan's windows as the answer gave them (for history events; the state
// keeps no utilisation).
std::string utilisationOf(const SubscriptionReport& plan)
{
    std::string out;
    for (const SubscriptionWindow& w : plan.windows) {
        if (!w.utilization)
            continue;
        if (!out.empty())
            out += ", ";
        out += w.name + " " + std::to_string(static_cast<long long>(*w.utilization * 100.0 + 0.5)) + "%";
    }
    return out;
}

// "the plan's five_hour window (5h 97%, 7d 41%)": which window limits, as far as it was said.
std::string planWindow(const SubscriptionReport& plan)
{
    std::string out = "the subscription plan's "
        + (plan.representativeClaim.empty() ? std::string("usage") : plan.representativeClaim + " window");
    if (const std::string used = utilisationOf(plan); !used.empty())
        out += " (" + used + ")";
    return out;
}

std::string secondsFrom(std::int64_t untilMs, std::int64_t nowMs)
{
    return std::to_string((untilMs - nowMs + 999) / 1000) + " s from now";
}

} // namespace

QuotaExchange::QuotaExchange(std::string provider, std::chrono::milliseconds queueTimeout, const Clock& clock)
    : QuotaExchange(provider, CountingRule::forProvider(provider), queueTimeout, clock)
{
}

QuotaExchange::QuotaExchange(
    std::string provider, CountingRule rule, std::chrono::milliseconds queueTimeout, const Clock& clock)
    : m_provider(std::move(provider))
    , m_rule(rule)
    , m_queueTimeout(queueTimeout)
    , m_clock(&clock)
{
}

AdmitRequest QuotaExchange::askFor(const RequestEstimate& estimate, std::string caller) const
{
    AdmitRequest ask;
    ask.provider = m_provider;
    ask.caller = std::move(caller);
    ask.model = estimate.model;
    // Both bounded like a window's count, so their sum cannot overflow.
    ask.inputTokens = std::clamp<std::int64_t>(
        countedInput(ask.caller, ask.model, estimate.inputTokens), 0, RollingWindow::MAX_BUCKET_COUNT);
    ask.outputTokens = std::clamp<std::int64_t>(estimate.maxOutputTokens, 0, RollingWindow::MAX_BUCKET_COUNT);
    ask.tokens = ask.inputTokens + ask.outputTokens;
    // The proxy's reading of a body, not the caller's word: an agent's prompt larger than the
    // window's whole token limit waits for an empty window instead of a 400 it cannot avoid.
    ask.estimated = true;
    ask.wantsSlot = true;
    return ask;
}

std::int64_t QuotaExchange::countedInput(
    const std::string& caller, const std::string& model, std::int64_t promptTokens) const
{
    // Only Anthropic's rule leaves part of the prompt (the cache's reads) uncounted; under the
    // others the whole prompt counts, and nothing is learnt or reduced.
    if (m_rule.kind() != CountingRule::Kind::Anthropic)
        return promptTokens;
    std::lock_guard lock(m_promptMutex);
    return m_prompts.estimate(caller, model, promptTokens, m_clock->unixMs());
}

QuotaExchange::Admission QuotaExchange::firstTry(ExchangeStore& store, const AdmitRequest& request) const
{
    // A deadline of now makes the acquire a try: it never queues (it is refused when others wait).
    auto now = store.quick([&](QuotaLimiter& l) { return l.acquire(request, m_clock->now()); });
    if (!now && now.error().kind == ErrorKind::Timeout) {
        Admission wait;
        wait.mustWait = true;
        return wait;
    }
    return conclude(store, std::move(now), false);
}

Result<Permit> QuotaExchange::waitInQueue(
    ExchangeStore& store, const AdmitRequest& request, const std::atomic<bool>& cancel) const
{
    const auto deadline = m_clock->now() + m_queueTimeout;
    return store.check(store.limiter().acquire(request, deadline, &cancel));
}

QuotaExchange::Admission QuotaExchange::conclude(
    ExchangeStore& store, Result<Permit>&& permit, bool hungUp) const
{
    Admission out;
    out.hungUp = hungUp;
    if (permit) {
        out.permit.emplace(std::move(permit).value());
        return out;
    }
    const Error& why = permit.error();
    const QuotaLimiter::Refusal& refusal = store.limiter().lastRefusal();
    if (why.kind == ErrorKind::Timeout && why.path.empty() && refusal.paused) {
        // No time ends a pause: a Retry-After would be a guess the client's retry logic takes
        // for a promise. Without one, its own backoff applies (and the body says why).
        out.refusal = Refusal { 429,
            "no room in the shared quota for '" + m_provider + "' (" + why.message + ")", std::nullopt };
    } else if (why.kind == ErrorKind::Timeout && why.path.empty() && refusal.earliestMs) {
        // The policy's own earliest admission (a backoff's end, a window's or day's room),
        // rounded up: the client that retries then is not refused again for this wait. Refused
        // early when it lies beyond the queue timeout, so the client can go elsewhere now.
        const std::int64_t inMs = *refusal.earliestMs - m_clock->unixMs();
        out.refusal = Refusal { 429,
            "no room in the shared quota for '" + m_provider + "' within the queue timeout (" + why.message
                + ")",
            std::max<std::int64_t>(1, inMs / 1000 + (inMs % 1000 > 0 ? 1 : 0)) };
    } else if (why.kind == ErrorKind::Timeout)
        out.refusal = Refusal { 429,
            "no room in the shared quota for '" + m_provider + "' within the queue timeout (" + why.message
                + ")",
            retryAfterSeconds(store) };
    else
        out.refusal = Refusal { why.kind == ErrorKind::Usage ? 400u : 502u, why.describe(), std::nullopt };
    return out;
}

std::int64_t QuotaExchange::retryAfterSeconds(ExchangeStore& store) const
{
    auto snap = store.quick([](QuotaLimiter& l) { return l.snapshot(); });
    if (!snap)
        return 1;
    const ProviderCapacity c = Capacity::forProvider(
        snap->state, m_provider, snap->limits.find(m_provider), snap->nowMs, &store.probe());
    if (c.nextCallInMs <= 0 || c.nextCallInMs == Capacity::NEVER)
        return 1;
    return std::max<std::int64_t>(1, (c.nextCallInMs + 999) / 1000);
}

namespace {

// The 5-hour and 7-day windows of a plan as the state keeps them (atMs 1: stated; the store
// dates it). Nothing of a plan: atMs 0.
PlanUsage planUsageOf(const SubscriptionReport& plan)
{
    PlanUsage u;
    if (!plan.known())
        return u;
    u.atMs = 1;
    if (plan.status)
        u.status = *plan.status == SubscriptionStatus::Rejected ? PlanUsage::Status::Rejected
            : *plan.status == SubscriptionStatus::AllowedWarning ? PlanUsage::Status::Warning
                                                                   : PlanUsage::Status::Allowed;
    auto window = [&](std::string_view name, std::int64_t& permille, std::int64_t& resetMs) {
        const SubscriptionWindow* w = plan.window(name);
        if (!w)
            return;
        if (w->utilization)
            permille = std::clamp<std::int64_t>(
                static_cast<std::int64_t>(std::llround(*w->utilization * 1000.0)), 0, PlanUsage::MAX_PERMILLE);
        if (w->resetAtMs)
            resetMs = std::max<std::int64_t>(0, *w->resetAtMs);
    };
    window("5h", u.fiveHourPermille, u.fiveHourResetMs);
    window("7d", u.sevenDayPermille, u.sevenDayResetMs);
    return u;
}

} // namespace

QuotaExchange::HeaderLesson QuotaExchange::readHeaders(const HttpHeaders& headers, const std::string& model)
{
    HeaderLesson lesson;
    lesson.nowMs = m_clock->unixMs();
    const RateLimitReport report = RateLimitHeaders::parse(headers, lesson.nowMs);
    lesson.retryAfterMs = report.retryAfterMs;
    // The provider's own word that a budget is spent until some time: nobody goes before it.
    if (const auto until = report.exhaustedUntilMs(); until && *until > lesson.nowMs) {
        lesson.holdUntilMs = std::min(*until, lesson.nowMs + MAX_HEADER_HOLD_MS);
        lesson.holdWhat = "the provider reports nothing left";
        if (*until > *lesson.holdUntilMs)
            lesson.holdWhat += " (its reset, " + secondsFrom(*until, lesson.nowMs)
                + ", is cut to 3 min: the budgets its headers state are per minute)";
    }
    // What remains of the requests until the reset (0 with a reset ahead is the hold above); a
    // reset already past clears the word kept: the budget has refilled since.
    if (const ProviderBudget& b = report.requests; b.remaining && b.resetAtMs) {
        if (*b.resetAtMs <= lesson.nowMs) {
            lesson.requestsLeft = 0;
            lesson.requestsUntilMs = *b.resetAtMs;
        } else if (*b.remaining > 0) {
            lesson.requestsLeft = *b.remaining;
            lesson.requestsUntilMs = std::min(*b.resetAtMs, lesson.nowMs + MAX_HEADER_HOLD_MS);
        }
    }
    readSubscription(report.subscription, lesson);
    // The provider's own limits (per minute, as both document them): kept for status and the
    // dashboard, and a limit-mismatch event when they differ from Tollgate's.
    ReportedLimits& r = lesson.report.limits;
    r.requests = report.requests.limit.value_or(-1);
    r.tokens = report.tokens.limit.value_or(-1);
    r.inputTokens = report.inputTokens.limit.value_or(-1);
    r.outputTokens = report.outputTokens.limit.value_or(-1);
    lesson.report.plan = planUsageOf(report.subscription);
    lesson.model = model;
    lesson.tell = m_reported.due(model, lesson.report, lesson.nowMs);
    return lesson;
}


// A plan's window rejected holds everyone until its reset, as a budget at remaining 0 does (its
// 429s would otherwise pause the provider, or back off for seconds against a 5-hour window). A
// warning is worth one history event per window, not one per answer (every answer repeats it).
void QuotaExchange::readSubscription(const SubscriptionReport& plan, HeaderLesson& lesson)
{
    if (const auto until = plan.rejectedUntilMs();
        until && *until > lesson.nowMs && (!lesson.holdUntilMs || *until > *lesson.holdUntilMs)) {
        lesson.holdUntilMs = *until;
        lesson.holdWhat = planWindow(plan) + " is used up";
    }
    lesson.planRejected = plan.rejectedUntilMs() && *plan.rejectedUntilMs() > lesson.nowMs;
    if (plan.status != SubscriptionStatus::AllowedWarning)
        return;
    // A reset cut to a day moves with every answer: such a window is named by its claim alone.
    const std::string window = plan.representativeClaim + "@"
        + (plan.resetAtMs && !plan.resetBounded ? std::to_string(*plan.resetAtMs) : std::string("far"));
    {
        std::lock_guard lock(m_warnMutex);
        if (window == m_warnedWindow)
            return;
        m_warnedWindow = window;
    }
    lesson.warning = planWindow(plan) + " is nearly used up";
    if (plan.resetAtMs)
        lesson.warning += "; it resets " + secondsFrom(*plan.resetAtMs, lesson.nowMs);
}

void QuotaExchange::learnFromHeaders(
    ExchangeStore& store, const HeaderLesson& lesson, const std::string& caller)
{
    // Before a hold: the hold leaves one request after its end, which this must not replace.
    if (const auto word = lesson.word())
        noteRemaining(store, *word);
    if (lesson.holdUntilMs) {
        const std::int64_t until = *lesson.holdUntilMs;
        (void)store.quick([&](QuotaLimiter& l) {
            return l.holdUntil(m_provider, until,
                lesson.holdWhat + " until " + secondsFrom(until, lesson.nowMs) + " (" + caller
                    + "'s answer)");
        });
    }
    if (!lesson.warning.empty())
        recordWarning(store, lesson.warning, caller);
    if (lesson.tell) {
        m_reported.note(lesson.model, lesson.report, lesson.nowMs, [&](const ReportedLimitsMemo::Report& merged) {
            return store.quick([&](QuotaLimiter& l) { return tellStore(l, merged, lesson.model, caller); }).ok();
        });
    }
}

void QuotaExchange::noteRemaining(ExchangeStore& store, const RemainingWord& word) const
{
    (void)store.quick([&](QuotaLimiter& l) {
        return l.noteRemaining(m_provider, word.model, word.left, word.untilMs, word.fence);
    });
}

Result<bool> QuotaExchange::tellStore(QuotaLimiter& limiter, const ReportedLimitsMemo::Report& report,
    const std::string& model, const std::string& caller) const
{
    auto limits = limiter.limits();
    if (!limits)
        return limits.error();
    const ProviderLimits* mine = limits->find(m_provider);
    ReportedLimits reported = report.limits;
    reported.scope = mine ? LimitLearning::scopeOf(*mine, model) : std::string();
    auto noted = limiter.noteReportedLimits(m_provider, reported, report.plan, caller);
    if (!noted || !mine)
        return noted;
    // Learning: the unset limits of the scope follow the provider's. Another proxy may learn
    // the same at once: compare-and-set, and once more against what it found.
    std::optional<ProviderLimits> expected = *mine;
    for (int attempt = 0; attempt < 2 && expected; ++attempt) {
        const auto lesson = LimitLearning::learn(*expected, reported);
        if (!lesson)
            break;
        std::optional<ProviderLimits> found;
        auto set = limiter.setLimitsIf(m_provider, expected, lesson->limits, "the proxy",
            &found, lesson->describe("learned from " + caller + "'s answer"));
        if (!set)
            return set.error();
        if (*set)
            break;
        expected = found;
    }
    return noted;
}

void QuotaExchange::recordWarning(ExchangeStore& store, const std::string& warning, const std::string& caller)
{
    HistoryEvent e;
    e.timeMs = m_clock->unixMs();
    e.type = EventType::QuotaWarning;
    e.provider = m_provider;
    e.caller = caller;
    e.reason = warning;
    (void)store.quick([&](QuotaLimiter& l) { return l.record({ e }); });
}

void QuotaExchange::settle(ExchangeStore& store, Permit& permit, const Answer& answer,
    const std::string& caller, std::int64_t promptTokens)
{
    const AnswerKind kind = answer.answered ? AnswerKind::of(static_cast<int>(answer.status),
                                answer.retryAfterMs.has_value(), answer.errorBody, m_clock->unixMs())
                                            : AnswerKind {};
    const bool ok = answer.answered && !answer.brokenOff && kind.kind == AnswerKind::Kind::Ok;
    // What the provider counts of the usage, not everything the answer reports (cache reads
    // do not count toward Anthropic's input limit).
    std::optional<CountedUsage> counted;
    if (answer.usage)
        counted = m_rule.count(*answer.usage);
    // What holds everyone (a 429's backoff, a plan's reset, a spend cap's pause) is in place
    // before the slot is given back: finishing first let a queued waiter take the slot, and
    // call upstream, between the two (inside the backoff the 429 asked for).
    const bool brokenOffSuccess = answer.brokenOff && kind.kind == AnswerKind::Kind::Ok;
    if (answer.answered && !brokenOffSuccess)
        learnFromAnswer(store, kind, answer, caller);
    (void)store.quick([&](QuotaLimiter&) {
        return counted ? permit.finish(counted->tokens, counted->inputTokens, counted->outputTokens, ok)
                       : permit.finish(-1, ok);
    });
    if (counted && promptTokens > 0 && m_rule.kind() == CountingRule::Kind::Anthropic) {
        std::lock_guard lock(m_promptMutex);
        m_prompts.learn(caller, permit.model(), promptTokens, counted->inputTokens, m_clock->unixMs());
    }
    if (answer.answered && brokenOffSuccess) {
        HistoryEvent e;
        e.timeMs = m_clock->unixMs();
        e.type = EventType::BrokenOff;
        e.provider = m_provider;
        e.caller = caller;
        e.model = permit.model();
        e.reason = "the upstream broke off its " + std::to_string(answer.status)
            + " answer before the end (not a success; the estimate stands)";
        (void)store.quick([&](QuotaLimiter& l) { return l.record({ e }); });
    }
}

void QuotaExchange::abandon(ExchangeStore& store, Permit& permit) const
{
    (void)store.quick([&](QuotaLimiter&) { return permit.finish(-1, false); });
}

// What the answer means beyond the call's own accounting (recorded by finish, after this).
void QuotaExchange::learnFromAnswer(
    ExchangeStore& store, const AnswerKind& kind, const Answer& answer, const std::string& caller)
{
    switch (kind.kind) {
    case AnswerKind::Kind::RateLimited:
        if (answer.planRejected)
            break; // held until the plan's reset already (learnFromHeaders)
        (void)store.quick(
            [&](QuotaLimiter& l) { return l.report429(m_provider, caller, answer.retryAfterMs); });
        break;
    case AnswerKind::Kind::SubscriptionLimit: {
        // A plan's window, not a rate and not a cap: it ends by itself at its reset, so everyone
        // is held until then (not paused until someone resumes by hand).
        const std::int64_t now = m_clock->unixMs();
        const std::int64_t until = kind.resetAtMs.value_or(now);
        if (until <= now)
            break;
        (void)store.quick([&](QuotaLimiter& l) {
            return l.holdUntil(m_provider, until,
                "the subscription plan's usage limit is reached until " + secondsFrom(until, now) + " ("
                    + caller + "'s 429)");
        });
        break;
    }
    case AnswerKind::Kind::SpendCap:
        (void)store.quick([&](QuotaLimiter& l) {
            return l.pause(
                m_provider, "the provider reports a spending cap: " + kind.reason, "tollgate proxy");
        });
        break;
    case AnswerKind::Kind::Overloaded: {
        // Recorded for the history and the dashboard; the provider's load is not this key's
        // quota, so nobody backs off for it (the client's own retry handles it).
        HistoryEvent e;
        e.timeMs = m_clock->unixMs();
        e.type = EventType::Overloaded;
        e.provider = m_provider;
        e.caller = caller;
        e.reason = "the provider answered " + std::to_string(answer.status) + " (overloaded)";
        (void)store.quick([&](QuotaLimiter& l) { return l.record({ e }); });
        break;
    }
    case AnswerKind::Kind::Ok:
    case AnswerKind::Kind::Other:
        break;
    }
}

void QuotaExchange::letGo(Permit& permit)
{
    if (!permit.holdsSlot() || permit.release())
        return;
    try {
        m_owed.add({ permit.provider(), permit.fence() });
    } catch (...) {
        // No memory to remember it: left to the process's exit or `tollgate release`.
    }
    permit.detach(); // owed now: its destructor must not try (and wait) again
}

void QuotaExchange::giveBackOwed(ExchangeStore* store)
{
    std::vector<OwedSlots::Owed> owed = m_owed.takeAll();
    bool reachable = store != nullptr;
    for (auto& o : owed) {
        if (reachable) {
            auto r = store->quick([&](QuotaLimiter& l) { return l.releaseSlot(o.provider, o.fence, ""); });
            if (r || r.error().kind == ErrorKind::Usage)
                continue;
            reachable = false;
        }
        try {
            m_owed.add(std::move(o));
        } catch (...) {
            // As in letGo: left to the process's exit or `tollgate release`.
        }
    }
}

} // namespace tollgate
