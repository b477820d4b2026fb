#include "quota/capacity.h"

#include "quota/limitmismatch.h"

#include <algorithm>
#include <set>

namespace tollgate {

namespace {

std::int64_t inMs(std::int64_t atMs, std::int64_t nowMs)
{
    if (atMs == INT64_MAX)
        return Capacity::NEVER;
    return atMs > nowMs ? atMs - nowMs : 0;
}

int percent(std::int64_t used, const std::optional<std::int64_t>& limit)
{
    if (!limit || *limit <= 0)
        return 0;
    if (used >= *limit)
        return 100;
    // used < limit ≤ 2^40: no overflow
    return static_cast<int>(std::max<std::int64_t>(0, used) * 100 / *limit);
}

std::optional<std::int64_t> effective(const ProviderLimits& l, const std::optional<std::int64_t>& given)
{
    return given ? std::optional<std::int64_t>(l.effective(*given)) : std::nullopt;
}

WindowCapacity windowFigures(const RollingWindow* w, std::string model, const ProviderLimits& l,
    const std::optional<std::int64_t>& requests, const std::optional<std::int64_t>& tokens,
    std::int64_t windowMs, std::int64_t nowMs)
{
    WindowCapacity c;
    c.model = std::move(model);
    c.windowMs = w ? w->windowMs() : windowMs;
    c.requestLimitGiven = requests;
    c.tokenLimitGiven = tokens;
    c.requestLimit = effective(l, requests);
    c.tokenLimit = effective(l, tokens);
    if (w) {
        const auto u = w->usage(nowMs);
        c.requestsUsed = u.requests;
        c.tokensUsed = u.tokens;
    }
    if (c.requestLimit) {
        c.requestsLeft = std::max<std::int64_t>(0, *c.requestLimit - c.requestsUsed);
        // The limiter's own question (QuotaPolicy's windowAllows): when does one more fit?
        if (w)
            c.nextRequestInMs = inMs(w->whenFits(nowMs, 1, *c.requestLimit, 0, -1), nowMs);
    }
    if (c.tokenLimit) {
        c.tokensLeft = std::max<std::int64_t>(0, *c.tokenLimit - c.tokensUsed);
        if (w)
            c.tokensFreeInMs = inMs(w->whenFits(nowMs, 0, -1, 1, *c.tokenLimit), nowMs);
    }
    c.requestsPercent = percent(c.requestsUsed, c.requestLimit);
    c.tokensPercent = percent(c.tokensUsed, c.tokenLimit);
    return c;
}

// The budgets beyond requests and tokens per window: what each has used, its limit and when
// one more unit fits — the same whenFits as the limiter's, per metric.
void budgetFigures(WindowCapacity& c, const ScopeWindow* sc, const ProviderLimits& l, const Budget& window,
    const Budget& day, std::int64_t nowMs)
{
    struct Metric
    {
        const char* name;
        std::optional<std::int64_t> Budget::*member;
        std::int64_t RollingWindow::Usage::*used;
    };
    constexpr Metric METRICS[] = {
        { "requests", &Budget::requests, &RollingWindow::Usage::requests },
        { "tokens", &Budget::tokens, &RollingWindow::Usage::tokens },
        { "input_tokens", &Budget::inputTokens, &RollingWindow::Usage::input },
        { "output_tokens", &Budget::outputTokens, &RollingWindow::Usage::output },
    };
    const DayReset::Span span = l.dayReset.dayOf(nowMs);
    for (const bool perDay : { false, true }) {
        const Budget& b = perDay ? day : window;
        for (const Metric& m : METRICS) {
            const auto& given = b.*m.member;
            // Requests and tokens per window have their own fields.
            if (!given || (!perDay && (m.member == &Budget::requests || m.member == &Budget::tokens)))
                continue;
            BudgetCapacity bc;
            bc.metric = m.name;
            bc.perDay = perDay;
            bc.given = *given;
            bc.limit = l.effective(*given);
            RollingWindow::Usage used;
            if (sc)
                used = perDay ? sc->dayUsage(nowMs, span.startMs) : sc->window.usage(nowMs);
            bc.used = used.*m.used;
            bc.left = std::max<std::int64_t>(0, bc.limit - bc.used);
            bc.percent = percent(bc.used, bc.limit);
            RollingWindow::Usage one { 0, 0, 0, 0 };
            RollingWindow::Usage limit { -1, -1, -1, -1 };
            one.*m.used = 1;
            limit.*m.used = bc.limit;
            if (!sc) {
                bc.freeInMs = 0;
            } else if (!perDay) {
                bc.freeInMs = inMs(sc->window.whenFits(nowMs, one, limit), nowMs);
            } else if (sc->day == ScopeWindow::Day::Rolling) {
                bc.freeInMs = inMs(sc->rollingDay.whenFits(nowMs, one, limit), nowMs);
            } else {
                bc.dayEndsAtMs = span.endMs;
                bc.freeInMs = bc.used + 1 <= bc.limit ? 0 : inMs(span.endMs, nowMs);
            }
            c.budgets.push_back(std::move(bc));
        }
    }
}

} // namespace

const char* capacityLevelName(CapacityLevel level)
{
    switch (level) {
    case CapacityLevel::Ok:
        return "ok";
    case CapacityLevel::Near:
        return "near";
    case CapacityLevel::Blocked:
        return "blocked";
    }
    return "ok";
}

void Capacity::prepare(QuotaState& state, ProviderState& p, const ProviderLimits* limits, std::int64_t nowMs,
    const ProcessProbe* probe)
{
    const ProviderLimits none;
    const ProviderLimits& l = limits ? *limits : none;
    if (limits)
        QuotaPolicy::syncProvider(p, l, nowMs);
    QuotaPolicy::boundTimes(state, p, l, nowMs);
    if (!probe)
        return;
    std::vector<HistoryEvent> ignored;
    QuotaPolicy::reclaimVanished(p, nowMs, *probe, ignored);
    QuotaPolicy::pruneQueueHead(p, nowMs, *probe, ignored);
    // acquire reclaims dead holders only when a slot is what it lacks; discounting them
    // always gives the same verdict (a free slot is only ever looked at then).
    if (limits)
        QuotaPolicy::reclaimSlots(p, l, nowMs, *probe, false, "", ignored);
}

void Capacity::discountGone(
    QuotaState& state, const QuotaLimits& limits, std::int64_t nowMs, const ProcessProbe& probe)
{
    for (ProviderState& p : state.providers)
        prepare(state, p, limits.find(p.name), nowMs, &probe);
}

ProviderCapacity Capacity::forProvider(const QuotaState& state, std::string_view provider,
    const ProviderLimits* limits, std::int64_t nowMs, const ProcessProbe* probe)
{
    const ProviderLimits none;
    const ProviderLimits& l = limits ? *limits : none;

    // A private copy, prepared as acquire prepares the stored one inside its transaction.
    QuotaState s;
    s.pausedAll = state.pausedAll;
    s.pauseReason = state.pauseReason;
    s.pausedAtMs = state.pausedAtMs;
    ProviderState p;
    if (const ProviderState* stored = state.provider(provider))
        p = *stored;
    p.name = std::string(provider);
    prepare(s, p, limits, nowMs, probe);

    ProviderCapacity c;
    c.provider = p.name;
    c.hasLimits = limits != nullptr;
    c.headroomPercent = l.headroomPercent;
    c.window = windowFigures(
        p.scope("") ? &p.scope("")->window : nullptr, "", l, l.requests, l.tokens, l.windowMs, nowMs);
    budgetFigures(c.window, p.scope(""), l, l.perWindow(), l.perDay, nowMs);
    for (const auto& [model, ml] : l.models) {
        const ScopeWindow* sc = p.scope(model);
        c.models.push_back(
            windowFigures(sc ? &sc->window : nullptr, model, l, ml.requests, ml.tokens, ml.windowMs, nowMs));
        budgetFigures(c.models.back(), sc, l, ml.perWindow(), ml.perDay, nowMs);
        c.models.back().match = ml.match;
    }

    c.reportedAtMs = p.reportedAtMs;
    c.reportedRequests = p.reportedRequests;
    c.reportedTokens = p.reportedTokens;
    c.reportedInputTokens = p.reportedInputTokens;
    c.reportedOutputTokens = p.reportedOutputTokens;
    c.reportedScope = p.reportedScope;
    c.learning = l.learn;
    c.learned = l.learned;
    c.plan = p.plan;
    c.planCurrent = p.plan.current(nowMs);
    for (auto& n : LimitMismatch::find(p, limits))
        c.limitNotices.push_back(std::move(n.text));

    c.slotLimit = l.parallel;
    c.slotsInUse = static_cast<std::int64_t>(p.slots.size());
    if (l.parallel)
        c.slotsFree = std::max<std::int64_t>(0, *l.parallel - c.slotsInUse);
    c.slotsPercent = percent(c.slotsInUse, l.parallel);

    c.backoffRemainingMs = inMs(QuotaPolicy::backoffUntil(p, nowMs), nowMs);
    c.consecutive429 = std::max<std::int32_t>(0, p.consecutive429);
    c.paceRemainingMs = c.backoffRemainingMs > 0 ? 0 : inMs(p.paceUntilMs, nowMs);
    if (p.remainingUntilMs > nowMs) {
        c.providerRequestsLeft = p.remainingRequests;
        c.providerRequestsResetMs = p.remainingUntilMs;
        c.providerRequestsScope = p.remainingScope;
    }

    c.paused = s.pausedAll || p.paused;
    c.pausedAll = s.pausedAll && !p.paused;
    c.pauseReason = p.paused ? p.pauseReason : (s.pausedAll ? s.pauseReason : std::string());
    if (c.paused) {
        const std::int64_t at = p.paused ? p.pausedAtMs : s.pausedAtMs;
        c.pausedForMs = at > 0 ? std::max<std::int64_t>(0, nowMs - at) : 0;
    }
    c.waiting = p.queue.size();

    // The verdict: the limiter's rule on the probe call.
    AdmitRequest r;
    r.provider = c.provider;
    r.tokens = 1;
    r.wantsSlot = l.parallel.has_value();
    const AdmitDecision d = QuotaPolicy::evaluate(s, p, l, r, 0, nowMs);
    if (!d.admitted) {
        c.level = CapacityLevel::Blocked;
        c.blockedBy = d.reason;
        if (d.retryAtMs != INT64_MAX) {
            c.blockedUntilMs = std::max(d.retryAtMs, nowMs);
            c.nextCallInMs = *c.blockedUntilMs - nowMs;
        } else {
            c.nextCallInMs = NEVER;
        }
        return c;
    }
    int highest = std::max({ c.window.requestsPercent, c.window.tokensPercent, c.slotsPercent });
    for (const auto& b : c.window.budgets)
        highest = std::max(highest, b.percent);
    for (const auto& m : c.models) {
        highest = std::max({ highest, m.requestsPercent, m.tokensPercent });
        for (const auto& b : m.budgets)
            highest = std::max(highest, b.percent);
    }
    c.level = highest >= NEAR_PERCENT ? CapacityLevel::Near : CapacityLevel::Ok;
    return c;
}

std::vector<ProviderCapacity> Capacity::compute(
    const QuotaState* state, const QuotaLimits& limits, std::int64_t nowMs, const ProcessProbe* probe)
{
    std::set<std::string, std::less<>> names;
    for (const auto& [name, l] : limits.providers())
        names.insert(name);
    if (state) {
        for (const auto& p : state->providers)
            names.insert(p.name);
    }
    const QuotaState empty;
    std::vector<ProviderCapacity> out;
    out.reserve(names.size());
    for (const auto& name : names)
        out.push_back(forProvider(state ? *state : empty, name, limits.find(name), nowMs, probe));
    return out;
}

} // namespace tollgate
