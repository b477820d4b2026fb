#pragma once

// HistoryEvent: one line of history.jsonl — every admission, wait, 429, success report,
// pause, resume, limit change and release, with who did it. Per-request detail lives here,
// never in the hot state.

#include "base/result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate {

// Every kind of event. The history stores them by name (docs/PROTOCOL.md section 6); the
// names are mapped in this one place, eventTypeName() and eventTypeFromName().
enum class EventType : std::uint8_t {
    Admit, // "admit": a request admitted (with its fence)
    RateLimited, // "429": a caller reported a 429
    Ok, // "ok": a caller reported success (ends a backoff streak)
    GaveUp, // "gave-up": a waiter reached its deadline
    Pause, // "pause"
    Resume, // "resume"
    Limits, // "limits": limits set, changed or removed
    Release, // "release": a slot given back
    Reclaim, // "reclaim": a slot or waiter of a dead or expired holder taken back
    BackoffReset, // "backoff-reset"
    Reset, // "reset": the state was lost and restarted conservatively
    LockRelease, // "lock-release": a lock file force-released from the dashboard
    LockClean, // "lock-clean": a stale lock file cleaned from the dashboard
    Gap, // "gap": events that could not be written
    Hold, // "hold": the provider said nothing is left until a time (learned by the proxy)
    Overloaded, // "overloaded": the provider answered 529/503 overloaded (not a quota event: no backoff)
    LimitMismatch, // "limit-mismatch": the provider reports a limit other than Tollgate's (LimitMismatch)
    QuotaWarning, // "quota-warning": the provider warns that a window is nearly used up (subscription plans)
    BrokenOff, // "broken-off": the upstream broke an answer off (proxy): no success, the estimate stands
    Other, // a name this version does not know (a newer writer): kept in HistoryEvent::otherType
};

[[nodiscard]] std::string_view eventTypeName(EventType type); // "" for Other
[[nodiscard]] std::optional<EventType> eventTypeFromName(std::string_view name);
// Every type but Other, in the order above (for filters and documentation).
[[nodiscard]] const std::vector<EventType>& allEventTypes();

struct HistoryEvent
{
    std::int64_t timeMs = 0;
    EventType type = EventType::Other;
    std::string otherType; // the name as read, when type is Other
    std::string provider; // empty: all providers
    std::string caller;
    std::string model;
    std::int64_t pid = 0;
    std::int64_t tokens = 0;
    std::uint64_t fence = 0;
    std::int64_t waitedMs = 0;
    std::string reason; // wait reason, pause reason, or what changed
    std::int64_t retryAfterMs = 0;
    std::int64_t backoffMs = 0;
    // "gap" events only: how many events could not be written, from sinceMs (unix ms) on.
    std::int64_t lost = 0;
    std::int64_t sinceMs = 0;

    // The name the history uses for this event's type.
    [[nodiscard]] std::string_view typeName() const
    {
        return type == EventType::Other ? std::string_view(otherType) : eventTypeName(type);
    }
    [[nodiscard]] std::string toJsonLine() const; // ends with '\n'
    [[nodiscard]] static Result<HistoryEvent> fromJsonLine(std::string_view line);
    // An event's detail with who caused it: "paused (by ops)", or "by ops" alone.
    static std::string byWhom(const std::string& what, const std::string& who)
    {
        if (who.empty())
            return what;
        return what.empty() ? "by " + who : what + " (by " + who + ")";
    }
};

// What one read of the history returned (HistoryReader, a store's HistoryCursor).
struct HistoryBatch
{
    std::vector<HistoryEvent> events;
    std::size_t badLines = 0; // entries that did not parse (skipped, counted)
    std::uint64_t skippedBytes = 0; // unread history skipped over (see HistoryReader::MAX_UNREAD)
    std::uint64_t skippedEvents = 0; // events trimmed from a capped history before they were read
};

} // namespace tollgate
