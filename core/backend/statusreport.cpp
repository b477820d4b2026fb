// StatusReport: the status document of a home (moved here from the CLI's status command so that
// every front-end gives out the same one).

#include "backend/statusreport.h"

#include "quota/holderstatus.h"
#include "quota/quotapolicy.h"
#include "system/hostidentity.h"

#include <algorithm>

namespace tollgate {

using nlohmann::json;

namespace {

// "Can the next call go now?" (core's Capacity, the limiter's own rules), for scripts.
json capacityJson(const ProviderCapacity& c)
{
    auto opt = [](const std::optional<std::int64_t>& v) { return v ? json(*v) : json(nullptr); };
    auto ms = [](std::int64_t v) { return v == Capacity::NEVER ? json(nullptr) : json(v); };
    json j;
    j["level"] = capacityLevelName(c.level);
    j["blocked_by"] = c.level == CapacityLevel::Blocked ? json(waitReasonName(c.blockedBy)) : json(nullptr);
    j["blocked_until_ms"] = opt(c.blockedUntilMs);
    j["next_call_in_ms"] = ms(c.nextCallInMs); // null: not a matter of time (paused, slots held)
    j["requests_left"] = opt(c.window.requestsLeft);
    j["next_request_in_ms"] = ms(c.window.nextRequestInMs);
    j["tokens_left"] = opt(c.window.tokensLeft);
    j["tokens_free_in_ms"] = ms(c.window.tokensFreeInMs);
    j["slots_in_use"] = c.slotsInUse;
    j["slots_free"] = opt(c.slotsFree);
    j["backoff_remaining_ms"] = c.backoffRemainingMs;
    j["pace_remaining_ms"] = c.paceRemainingMs;
    return j;
}

// What the provider's own headers said (tollgate proxy); null: never reported.
json reportedJson(const ProviderCapacity& cap, std::int64_t now)
{
    json r = nullptr;
    if (cap.reportedAtMs > 0) {
        auto orNull = [](std::int64_t v) { return v < 0 ? json(nullptr) : json(v); };
        r = json::object();
        r["requests_per_minute"] = orNull(cap.reportedRequests);
        r["tokens_per_minute"] = orNull(cap.reportedTokens);
        r["input_tokens_per_minute"] = orNull(cap.reportedInputTokens);
        r["output_tokens_per_minute"] = orNull(cap.reportedOutputTokens);
        r["class"] = cap.reportedScope.empty() ? json(nullptr) : json(cap.reportedScope);
        r["reported_at_ms"] = cap.reportedAtMs;
        r["age_ms"] = std::max<std::int64_t>(0, now - cap.reportedAtMs);
    }
    return r;
}

const char* planStatusText(PlanUsage::Status s)
{
    switch (s) {
    case PlanUsage::Status::Allowed:
        return "allowed";
    case PlanUsage::Status::Warning:
        return "allowed_warning";
    case PlanUsage::Status::Rejected:
        return "rejected";
    case PlanUsage::Status::Unknown:
        break;
    }
    return "unknown";
}

// A subscription plan's windows as the last answer stated them; null: never stated.
json planJson(const ProviderCapacity& cap, std::int64_t now)
{
    if (cap.plan.atMs == 0)
        return nullptr;
    const PlanUsage& u = cap.plan;
    auto window = [&](std::int64_t permille, std::int64_t resetMs) {
        json w = json::object();
        w["utilization"] = permille < 0 ? json(nullptr) : json(static_cast<double>(permille) / 1000.0);
        w["reset_ms"] = resetMs == 0 ? json(nullptr) : json(resetMs);
        w["resets_in_ms"] = resetMs == 0 ? json(nullptr) : json(std::max<std::int64_t>(0, resetMs - now));
        return w;
    };
    return json { { "status", planStatusText(u.status) }, { "current", cap.planCurrent },
        { "five_hour", window(u.fiveHourPermille, u.fiveHourResetMs) },
        { "seven_day", window(u.sevenDayPermille, u.sevenDayResetMs) }, { "stated_at_ms", u.atMs },
        { "age_ms", std::max<std::int64_t>(0, now - u.atMs) } };
}

// A holder's or waiter's host on a Redis home: "host_id", and "host_name" for people (null for
// an id written by a version that recorded none); "host_is_ours". Nothing on a directory home.
void hostFields(json& j, const std::string& host, bool ours)
{
    if (host.empty())
        return;
    j["host_id"] = host.substr(0, host.find(' '));
    const std::string name = HostIdentity::nameOf(host);
    j["host_name"] = name.empty() ? json(nullptr) : json(name);
    j["host_is_ours"] = ours;
}

json slotsJson(const ProcessProbe& probe, const ProviderState& ps, const ProviderLimits& l, std::int64_t now)
{
    json slots = json::array();
    for (const auto& s : ps.slots) {
        json sj;
        sj["fence"] = s.fence;
        sj["pid"] = s.pid;
        sj["caller"] = s.caller;
        sj["model"] = s.model;
        sj["age_ms"] = now - s.acquiredMs;
        const HolderStatus h = HolderStatus::judge(s, l, now, probe);
        sj["state"] = holderStateName(h.state);
        sj["pid_namespace"] = holderNamespaceName(h.ns);
        hostFields(sj, s.host, h.ns == HolderNamespace::Ours);
        if (h.ns != HolderNamespace::Ours && s.pid != 0)
            sj["lease_remaining_ms"] = h.leaseLeftMs;
        slots.push_back(sj);
    }
    return slots;
}

json queueJson(const ProcessProbe& probe, const ProviderState& ps, std::int64_t now)
{
    json waiters = json::array();
    for (const auto& w : ps.queue) {
        json wj;
        wj["caller"] = w.caller;
        wj["pid"] = w.pid;
        hostFields(wj, w.host, QuotaPolicy::sameNamespace(w.pidNs, probe));
        wj["waiting_ms"] = now - w.enqueuedMs;
        wj["reason"] = waitReasonName(w.reason);
        waiters.push_back(wj);
    }
    return waiters;
}

// Each budget beyond requests and tokens per window (input/output, per day), for scripts:
// used, limit, left and when one more fits, as the limiter judges it.
json budgetsJson(const WindowCapacity& w)
{
    json out = json::array();
    for (const BudgetCapacity& b : w.budgets) {
        json j;
        j["metric"] = b.metric;
        j["per"] = b.perDay ? "day" : "window";
        j["limit"] = b.given;
        j["effective_limit"] = b.limit;
        j["used"] = b.used;
        j["left"] = b.left;
        j["free_in_ms"] = b.freeInMs == Capacity::NEVER ? json(nullptr) : json(b.freeInMs);
        j["day_ends_at_ms"] = b.dayEndsAtMs > 0 ? json(b.dayEndsAtMs) : json(nullptr);
        out.push_back(j);
    }
    return out;
}

} // namespace

json StatusReport::limitsJson(const std::string& name, const ProviderLimits& l)
{
    json j;
    j["provider"] = name;
    j["requests"] = l.requests ? json(*l.requests) : json(nullptr);
    j["tokens"] = l.tokens ? json(*l.tokens) : json(nullptr);
    j["window_seconds"] = static_cast<double>(l.windowMs) / 1000.0;
    j["parallel"] = l.parallel ? json(*l.parallel) : json(nullptr);
    j["headroom_percent"] = l.headroomPercent;
    j["effective_requests"] = l.requests ? json(l.effective(*l.requests)) : json(nullptr);
    j["effective_tokens"] = l.tokens ? json(l.effective(*l.tokens)) : json(nullptr);
    j["backoff_base_seconds"] = static_cast<double>(l.backoffBaseMs) / 1000.0;
    j["backoff_cap_seconds"] = static_cast<double>(l.backoffCapMs) / 1000.0;
    j["max_hold_seconds"] = static_cast<double>(l.maxHoldMs) / 1000.0;
    auto opt = [](const std::optional<std::int64_t>& v) { return v ? json(*v) : json(nullptr); };
    auto budget = [&](const Budget& b) {
        return json { { "requests", opt(b.requests) }, { "tokens", opt(b.tokens) },
            { "input_tokens", opt(b.inputTokens) }, { "output_tokens", opt(b.outputTokens) } };
    };
    j["input_tokens"] = opt(l.inputTokens);
    j["output_tokens"] = opt(l.outputTokens);
    j["per_day"] = budget(l.perDay);
    j["day_resets"] = l.dayReset.text();
    j["learn"] = l.learn;
    j["learned"] = l.learned;
    json models = json::object();
    for (const auto& [m, ml] : l.models) {
        json mj;
        mj["requests"] = ml.requests ? json(*ml.requests) : json(nullptr);
        mj["tokens"] = ml.tokens ? json(*ml.tokens) : json(nullptr);
        mj["window_seconds"] = static_cast<double>(ml.windowMs) / 1000.0;
        mj["input_tokens"] = opt(ml.inputTokens);
        mj["output_tokens"] = opt(ml.outputTokens);
        mj["per_day"] = budget(ml.perDay);
        mj["match"] = ml.match.empty() ? json::array({ m }) : json(ml.match);
        mj["learned"] = ml.learned;
        models[m] = mj;
    }
    j["models"] = models;
    return j;
}

// Which host this is (machine id + pid namespace): holders from other hosts are judged by
// their lease, never by a pid of ours.
json StatusReport::hostJson(const ProcessProbe& probe)
{
    json host;
    host["name"] = HostIdentity::hostName();
    auto id = HostIdentity::current(probe.pidNamespace());
    host["id"] = id ? json(*id) : json(nullptr);
    if (!id)
        host["problem"] = id.error().describe();
    return host;
}

json StatusReport::providerJson(const ProcessProbe& probe, const ProviderLook& p)
{
    const ProviderCapacity& cap = p.capacity;
    json j = limitsJson(p.name, p.limits);
    j["used_requests"] = cap.window.requestsUsed;
    j["used_tokens"] = cap.window.tokensUsed;
    j["paused"] = cap.paused;
    j["pause_reason"] = cap.pauseReason;
    j["backoff_remaining_ms"] = cap.backoffRemainingMs;
    j["consecutive_429s"] = cap.consecutive429;
    j["admitted_total"] = p.state.admittedTotal;
    j["rate_limited_total"] = p.state.rateLimitedTotal;
    j["waiting"] = cap.waiting;
    j["capacity"] = capacityJson(cap);
    j["budgets"] = budgetsJson(cap.window);
    json classes = json::object();
    for (const WindowCapacity& m : cap.models) {
        classes[m.model] = json { { "used_requests", m.requestsUsed }, { "used_tokens", m.tokensUsed },
            { "requests_left", m.requestsLeft ? json(*m.requestsLeft) : json(nullptr) },
            { "tokens_left", m.tokensLeft ? json(*m.tokensLeft) : json(nullptr) },
            { "budgets", budgetsJson(m) } };
    }
    j["classes"] = classes;
    j["provider_reported"] = reportedJson(cap, p.now);
    // What the provider's latest answer said remains (less admissions since), until its reset.
    j["provider_remaining"] = cap.providerRequestsLeft ? json { { "requests", *cap.providerRequestsLeft },
        { "reset_in_ms", std::max<std::int64_t>(0, cap.providerRequestsResetMs - p.now) },
        { "class", cap.providerRequestsScope.empty() ? json(nullptr) : json(cap.providerRequestsScope) } }
                                                       : json(nullptr);
    j["limit_notices"] = cap.limitNotices;
    j["plan"] = planJson(cap, p.now);
    j["slots"] = slotsJson(probe, p.state, p.limits, p.now);
    j["queue"] = queueJson(probe, p.state, p.now);
    j["state_lost"] = p.stateLost;
    return j;
}

json StatusReport::homeJson(
    const std::string& home, const QuotaView* view, std::int64_t now, const ProcessProbe& probe)
{
    json out;
    out["home"] = home;
    out["host"] = hostJson(probe);
    out["home_exists"] = view != nullptr;
    if (!view) {
        out["paused_all"] = false;
        out["pause_reason"] = "";
        out["providers"] = json::array();
        return out;
    }
    QuotaState state = view->state.value_or(QuotaState {});
    QuotaPolicy::settle(state, view->limits, now, probe);
    out["paused_all"] = state.pausedAll;
    out["pause_reason"] = state.pauseReason;
    out["data_lost"] = view->dataLostAtMs > 0
        ? json { { "at_ms", view->dataLostAtMs }, { "reason", view->dataLostReason } }
        : json(nullptr);
    json providers = json::array();
    for (const auto& [name, l] : view->limits.providers()) {
        const ProviderCapacity cap = Capacity::forProvider(state, name, &l, now, &probe);
        const bool lost
            = std::find(view->lostStates.begin(), view->lostStates.end(), name) != view->lostStates.end();
        providers.push_back(
            providerJson(probe, ProviderLook { name, l, *state.provider(name), cap, now, lost }));
    }
    out["providers"] = providers;
    return out;
}

} // namespace tollgate
