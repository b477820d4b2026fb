#pragma once

// Capacity: per provider, the answer to "can my next call go now?" — requests and tokens left
// in the rolling window and when more free up, parallel slots in use and free, the 429 backoff
// still to run, a pause and its reason — computed from a QuotaState + QuotaLimits at an
// injected `now` (unix ms). A pure function: no I/O, no clock of its own, never throws.
//
// Invariant: the verdict is the limiter's, not a second copy of its rules. The state is
// prepared exactly as QuotaLimiter::acquire prepares it inside its transaction (syncProvider,
// boundTimes and — when a ProcessProbe is given — reclaiming slots whose holder is gone and
// queue heads that are ghosts), then QuotaPolicy::evaluate judges the *probe call*: a call of
// one token with no model that takes a parallel slot when the provider has a parallel limit
// (what `tollgate run` asks for), with no queue ticket (a newcomer). `blocked` is true exactly
// when a try (`acquire` with a deadline of now) of that call would be refused. The figures
// (left, free in) come from the same RollingWindow::whenFits and limits with headroom applied
// (ProviderLimits::effective), as the limiter uses them.
//
// Level rule:
//   Blocked  the probe call would be refused now: paused (globally or the provider), a 429
//            backoff or the pacing after it, callers already queued, no request or token left
//            in a window, or no parallel slot free.
//   Near     not blocked, but some limit is at least NEAR_PERCENT % used: requests or tokens
//            in the provider's window or a model's window (of the effective limit), or slots.
//   Ok       otherwise (also: a provider with no limits at all).
//
// Times: every "...InMs" is ms from now, ≥ 0; INT64_MAX (NEVER) when nothing that merely
// passes time frees it (a held slot, a pause). A state "from the future" (the clock was moved
// back) is judged as the limiter judges it: a backoff reaches at most QuotaPolicy::MAX_STOP_MS
// ahead; window buckets from the future still count, conservatively, until they leave the
// window; ages are never negative; percentages are clamped to 0..100.

#include "quota/quotalimits.h"
#include "quota/quotapolicy.h"
#include "quota/quotastate.h"
#include "system/processprobe.h"

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate {

enum class CapacityLevel : std::uint8_t { Ok = 0, Near, Blocked };
// "ok", "near", "blocked" (the JSON and the terminal use these words).
[[nodiscard]] const char* capacityLevelName(CapacityLevel level);

// One budget beyond the window's requests and tokens: input or output tokens per window, or
// any metric per day (issue 25's metrics), with the same figures.
struct BudgetCapacity
{
    std::string metric; // "requests", "tokens", "input_tokens" or "output_tokens"
    bool perDay = false; // false: per window
    std::int64_t given = 0; // as set
    std::int64_t limit = 0; // headroom applied
    std::int64_t used = 0;
    std::int64_t left = 0; // ≥ 0
    std::int64_t freeInMs = 0; // when one more fits (0: now; NEVER: not by waiting)
    int percent = 0; // 0..100
    // A calendar day: when it ends (unix ms); 0 for a rolling day or a window.
    std::int64_t dayEndsAtMs = 0;
};

// One rolling window: the provider's (model empty) or one model class's.
struct WindowCapacity
{
    std::string model; // empty: the provider-wide window
    std::int64_t windowMs = 0;
    // Limits as given in limits.json and as the limiter applies them (headroom applied);
    // nullopt: no such limit.
    std::optional<std::int64_t> requestLimitGiven;
    std::optional<std::int64_t> requestLimit;
    std::optional<std::int64_t> tokenLimitGiven;
    std::optional<std::int64_t> tokenLimit;
    std::int64_t requestsUsed = 0; // counted in the window now
    std::int64_t tokensUsed = 0;
    std::optional<std::int64_t> requestsLeft; // limit − used, ≥ 0; nullopt: no request limit
    std::optional<std::int64_t> tokensLeft;
    // When the next request fits (0: now). For a full window: when the oldest counted request
    // leaves it. 0 when there is no request limit.
    std::int64_t nextRequestInMs = 0;
    // When one more token fits (0: now; 0 without a token limit).
    std::int64_t tokensFreeInMs = 0;
    int requestsPercent = 0; // used of the effective limit, 0..100 (0 without a limit)
    int tokensPercent = 0;
    // Input and output tokens per window, then every per-day metric, each only when limited.
    std::vector<BudgetCapacity> budgets;
    std::vector<std::string> match; // a class's model patterns (empty: the model of its name)
};

struct ProviderCapacity
{
    std::string provider;
    bool hasLimits = false; // false: a provider only the state knows (limits removed)
    std::int64_t headroomPercent = 100;
    WindowCapacity window; // the provider-wide window
    std::vector<WindowCapacity> models; // one per model limit, by model name

    std::optional<std::int64_t> slotLimit; // the parallel limit; nullopt: none
    std::int64_t slotsInUse = 0; // held slots (after reclaiming dead holders when probed)
    std::optional<std::int64_t> slotsFree; // nullopt: no parallel limit
    int slotsPercent = 0;

    std::int64_t backoffRemainingMs = 0; // 429 backoff still to run (bounded as the limiter bounds it)
    std::int32_t consecutive429 = 0;
    std::int64_t paceRemainingMs = 0; // after a backoff, admissions are spread until then
    // What the provider's latest answer said remains of its requests until its reset, less what
    // was admitted since (ProviderState::remaining*); nullopt: nothing said, or its reset passed.
    std::optional<std::int64_t> providerRequestsLeft;
    std::int64_t providerRequestsResetMs = 0; // when (unix ms)
    std::string providerRequestsScope; // the class it is for; empty: the provider

    bool paused = false; // the provider or everything
    bool pausedAll = false; // paused because everything is
    std::string pauseReason; // the provider's reason, or the global one
    std::int64_t pausedForMs = 0; // how long it has been paused (≥ 0)

    std::size_t waiting = 0; // callers queued for this provider

    // The provider's own limits per minute, as its headers last said (learned by the proxy;
    // -1: not reported; reportedAtMs 0: never), and each budget where they differ from the
    // limits set, in LimitMismatch's words ("provider reports 40 requests/min; Tollgate is
    // set to 60"). A notice never changes the level: the limits set are what the limiter applies.
    std::int64_t reportedAtMs = 0;
    std::int64_t reportedRequests = -1;
    std::int64_t reportedTokens = -1;
    std::int64_t reportedInputTokens = -1;
    std::int64_t reportedOutputTokens = -1;
    std::string reportedScope; // the class the figures are for; empty: the provider
    std::vector<std::string> limitNotices;
    // Whether unset limits follow the provider's (limits set --learn), and which did.
    bool learning = false;
    std::vector<std::string> learned;

    // A subscription plan's 5-hour and 7-day windows as the last answer through the proxy
    // stated them (plan.atMs 0: never). Kept as stated: a reset already past means the window
    // has started again since (planCurrent false: the figures are of an earlier window).
    PlanUsage plan;
    bool planCurrent = false;

    CapacityLevel level = CapacityLevel::Ok;
    WaitReason blockedBy = WaitReason::None; // the limiter's reason when blocked
    // When the probe call may go, if only time stands in the way (backoff, pacing, a window,
    // an expiring placeholder slot); nullopt while not blocked or blocked for no set time
    // (paused, queued callers, slots of live holders). Absolute unix ms.
    std::optional<std::int64_t> blockedUntilMs;
    std::int64_t nextCallInMs = 0; // 0: now; NEVER when not time-bound; else blockedUntilMs − now
};

class Capacity
{
public:
    static constexpr int NEAR_PERCENT = 80;
    static constexpr std::int64_t NEVER = INT64_MAX;

    // One provider. `limits` may be null (the provider has none: then Ok, unless paused or
    // backing off). `probe`: when given, slots whose holder is gone and ghost queue heads are
    // discounted as acquire would reclaim them (it probes pids: not for a GUI thread).
    [[nodiscard]] static ProviderCapacity forProvider(const QuotaState& state, std::string_view provider,
        const ProviderLimits* limits, std::int64_t nowMs, const ProcessProbe* probe = nullptr);
    // What acquire would reclaim before it judges — slots whose holder is gone, ghost queue
    // heads — taken out of a copy of the state (after the same sync and time bounds), so that
    // capacity computed from it without a probe (the dashboard's GUI thread, between
    // snapshots) is what `status` computes with one. Probes pids: not for a GUI thread.
    static void discountGone(
        QuotaState& state, const QuotaLimits& limits, std::int64_t nowMs, const ProcessProbe& probe);
    // Every provider that has limits or appears in the state, by name. `state` null: no state yet.
    [[nodiscard]] static std::vector<ProviderCapacity> compute(const QuotaState* state,
        const QuotaLimits& limits, std::int64_t nowMs, const ProcessProbe* probe = nullptr);

private:
    // As acquire prepares a provider inside its transaction: limits synced, times bounded,
    // and with a probe what it would reclaim taken out.
    static void prepare(QuotaState& state, ProviderState& p, const ProviderLimits* limits, std::int64_t nowMs,
        const ProcessProbe* probe);
};

} // namespace tollgate
