#pragma once

// HistoryEvent: one line of history.jsonl — every admission, wait, 429, success report,
// pause, resume, limit change and release, with who did it. Per-request detail lives here,
// never in the hot state.

#include "result.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace tollgate {

struct HistoryEvent
{
    std::int64_t timeMs = 0;
    std::string type; // admit, gave-up, 429, ok, pause, resume, limits, release, reclaim, reset, gap
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

    [[nodiscard]] std::string toJsonLine() const; // ends with '\n'
    [[nodiscard]] static Result<HistoryEvent> fromJsonLine(std::string_view line);
};

} // namespace tollgate
