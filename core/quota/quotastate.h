#pragma once

// QuotaState: the hot, shared state of every provider — what is in each rolling window,
// who holds a parallel slot, who is waiting and in which order, the 429 backoff and pauses.
// It is bounded regardless of traffic (per-request detail goes to the history), so every
// transaction costs the same at 100 and at 1,000,000 requests per window.
// encode()/decode() give the versioned binary form documented in docs/PROTOCOL.md.

#include "base/result.h"
#include "quota/planusage.h"
#include "quota/rollingwindow.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tollgate {

enum class WaitReason : std::uint8_t { None = 0, Paused, Backoff, Queue, Window, Tokens, Slots };
[[nodiscard]] const char* waitReasonName(WaitReason r);

// A holder is a pid *in a pid namespace*, started at a known time: the same number in another
// namespace (another container sharing the home, `unshare --pid`) is another process. Only a
// reader in the holder's namespace may probe its pid; everyone else goes by its lease.
struct Slot
{
    std::uint64_t fence = 0; // the admission's fencing token; identifies the slot
    std::int64_t pid = 0; // holder; 0 = unknown (placeholder after a state reset)
    std::int64_t acquiredMs = 0;
    std::int64_t tokens = 0;
    std::string caller;
    std::string model;
    std::uint64_t pidNs = 0; // the holder's pid namespace (inode); 0 = unknown: never "ours"
    std::uint64_t startTicks = 0; // the holder's start (ticks since boot); 0 = unknown
    // Until when the holder vouches for itself to readers outside its namespace; 0 = no lease
    // recorded (a slot from format 1): acquiredMs + the provider's maximum hold time.
    std::int64_t leaseUntilMs = 0;
    // The holder's host (HostIdentity) on a Redis home; empty on a file home (this machine).
    // Not part of the file format.
    std::string host;
    // The estimate's split into input and output (AdmitRequest::inputTokens / outputTokens;
    // both 0: none), so an end reported by another process (report-ok --fence) corrects each
    // from what it counted. Format 5.
    std::int64_t inputTokens = 0;
    std::int64_t outputTokens = 0;
    // The queue ticket of the waiter this slot was handed to by a release (QuotaPolicy::handOff);
    // 0: admitted by its own look. The waiter finds its slot by it. Format 7.
    std::uint64_t ticket = 0;
};

struct Waiter
{
    std::uint64_t ticket = 0; // arrival order
    std::int64_t pid = 0;
    std::int64_t enqueuedMs = 0;
    std::int64_t deadlineMs = 0; // after this (plus grace) the entry is a ghost
    std::int64_t tokens = 0;
    std::string caller;
    std::string model;
    bool wantsSlot = false;
    WaitReason reason = WaitReason::None; // why it waits, as last judged
    std::uint64_t pidNs = 0; // as in Slot
    std::uint64_t startTicks = 0;
    std::int64_t leaseUntilMs = 0; // renewed while it waits; 0 = none (then only the deadline)
    std::string host; // as in Slot
    // What a release needs to admit this waiter in its place (QuotaPolicy::handOff), format 7:
    // it takes a slot handed to it (AdmitRequest::takesHandOff), the estimate's split and
    // whether it is one, the lease it asked (0: the provider's maximum hold), its holder. A
    // waiter without `holds` is only rung, as before format 7.
    bool holds = false;
    bool estimated = false;
    std::int64_t inputTokens = 0;
    std::int64_t outputTokens = 0;
    std::int64_t leaseMs = 0;
    // The holder the slot is for, when another process than the waiter (`run`'s keeper): its
    // pid and start (0: the waiter's own).
    std::int64_t holderPid = 0;
    std::uint64_t holderStartTicks = 0;
};

// The usage of one scope: the provider (model "") or one model class, in its rolling window
// and, when its limits have a per-day budget, in its day.
struct ScopeWindow
{
    enum class Day : std::uint8_t { None = 0, Rolling = 1, Calendar = 2 };
    static constexpr std::int64_t DAY_MS = 24LL * 3600 * 1000;

    ScopeWindow(std::string scope = {}, RollingWindow w = RollingWindow()) // NOLINT: { name, window }
        : model(std::move(scope))
        , window(w)
    {
    }

    std::string model; // empty: the provider-wide window; otherwise a class's name
    RollingWindow window;
    // The buckets' input and output hold the provider's split: set while the scope's limits
    // have an input or output budget (turned on, the split of what is already counted is
    // unknown, so all its tokens count toward each).
    bool split = false;
    Day day = Day::None;
    RollingWindow rollingDay { DAY_MS }; // Day::Rolling: the last 24 hours
    std::int64_t dayStartMs = 0; // Day::Calendar: the start of the day dayUsed counts
    RollingWindow::Usage dayUsed; // Day::Calendar

    // What the day holds at nowMs, for a calendar day that starts at dayStart (a day that has
    // ended holds nothing).
    [[nodiscard]] RollingWindow::Usage dayUsage(std::int64_t nowMs, std::int64_t dayStart) const;
};

struct ProviderState
{
    std::string name;
    bool paused = false;
    std::string pauseReason;
    std::int64_t pausedAtMs = 0;
    std::int32_t consecutive429 = 0;
    std::int64_t backoffUntilMs = 0;
    std::int64_t last429Ms = 0;
    std::int64_t paceUntilMs = 0; // after a backoff, admissions are spread out until then
    std::int64_t lastAdmitMs = 0;
    std::uint64_t admittedTotal = 0;
    std::uint64_t rateLimitedTotal = 0;
    // The provider's own limits, per minute, as its last answer's rate-limit headers gave them
    // (learned by the proxy); -1: not reported. reportedAtMs 0: never reported.
    std::int64_t reportedAtMs = 0;
    std::int64_t reportedRequests = -1;
    std::int64_t reportedTokens = -1;
    std::int64_t reportedInputTokens = -1; // format 5
    std::int64_t reportedOutputTokens = -1; // format 5
    std::string reportedScope; // the class the reported limits are for; empty: the provider
    PlanUsage plan; // format 5: a subscription plan's windows, as last stated
    // Format 6: what the provider's latest answer said is left of its requests until its reset
    // (its rate-limit headers), for the class remainingScope ('' the whole provider): until
    // remainingUntilMs no more than remainingRequests admissions, whatever Tollgate's own
    // limits allow; each admission in that time takes one. remainingUntilMs 0: nothing said.
    std::int64_t remainingRequests = 0;
    std::int64_t remainingUntilMs = 0;
    std::string remainingScope;
    std::vector<ScopeWindow> scopes;
    std::vector<Slot> slots;
    std::vector<Waiter> queue; // FIFO: ascending ticket

    [[nodiscard]] ScopeWindow* scope(std::string_view model);
    [[nodiscard]] const ScopeWindow* scope(std::string_view model) const;
};

struct QuotaState
{
    static constexpr std::uint32_t FORMAT_VERSION = 7;
    // The version written while no scope splits tokens or counts a day: a home whose limits use
    // none of version 4's metrics stays readable by the versions before it. Version 4 is written
    // while nothing of version 5 (reported input/output limits or their class, a plan's usage)
    // is kept, version 5 only once it is, version 6 only while a provider's stated remainder
    // is kept (ProviderState::remaining*), version 7 only while a slot was handed to a waiter
    // or a waiter can be handed one (Slot::ticket, Waiter::holds).
    static constexpr std::uint32_t PLAIN_FORMAT_VERSION = 3;
    // Still read (and rewritten as FORMAT_VERSION or PLAIN_FORMAT_VERSION): version 1 has slots
    // and waiters without namespace, start time and lease (docs/PROTOCOL.md says how such
    // holders are judged); versions 1 and 2 have no provider-reported limits (read as "not
    // reported"); versions 1 to 3 have no input/output split and no day (read as none); versions 1
    // to 4 no reported input/output limits and no plan usage (read as not reported); versions 1
    // to 5 no stated remainder (read as none); versions 1 to 6 no hand-off (slots of no waiter,
    // waiters only rung).
    static constexpr std::uint32_t OLDEST_READABLE_VERSION = 1;
    static constexpr std::size_t MAX_PROVIDERS = 64;
    static constexpr std::size_t MAX_SLOTS = 256; // per provider (the parallel limit's maximum)
    static constexpr std::size_t MAX_WAITERS = 512; // per provider
    static constexpr std::size_t MAX_TEXT = 256; // bytes of a stored caller/model/reason

    std::uint64_t nextFence = 1;
    std::uint64_t nextTicket = 1;
    bool pausedAll = false;
    std::string pauseReason;
    std::int64_t pausedAtMs = 0;
    std::vector<ProviderState> providers;

    [[nodiscard]] ProviderState* provider(std::string_view name);
    [[nodiscard]] const ProviderState* provider(std::string_view name) const;
    ProviderState& ensureProvider(std::string_view name);

    [[nodiscard]] std::string encode() const;
    // Never throws; a malformed buffer is ErrorKind::Corrupt with what was wrong.
    [[nodiscard]] static Result<QuotaState> decode(std::string_view bytes);
};

} // namespace tollgate
