#pragma once

// QuotaReader: the read side of a home, the one thing front-ends (status, history, status
// --watch, the dashboard) read through, whatever the store. It never creates, moves or
// writes anything: a corrupt file is reported, named, and left as it is, so looking at a home
// can never change what the callers see.
//
// Contract every reader keeps:
// - snapshot() is the limits and state of one instant (a writer's transaction is never seen
//   half-done). It may wait for a writer, up to the reader's own deadline (ErrorKind::Timeout).
// - A HistoryCursor returns each event once, in order: its first poll() returns what the store
//   keeps, each later one only what was appended since. Rotation or trimming in between never
//   makes it skip unread events silently (what it had to skip is counted in the batch).
// - A home that went away reads as ErrorKind::NotFound, never as an empty home.
// - A cursor stands on its own: it may outlive the reader object that made it (not the store).

#include "history/historyevent.h"
#include "store/changefeed.h"
#include "store/quotaview.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace tollgate {

class HistoryCursor
{
public:
    virtual ~HistoryCursor() = default;
    [[nodiscard]] virtual Result<HistoryBatch> poll() = 0;
};

class QuotaReader
{
public:
    virtual ~QuotaReader() = default;
    [[nodiscard]] virtual Result<QuotaView> snapshot() = 0;
    [[nodiscard]] virtual std::unique_ptr<HistoryCursor> history() const = 0;
    // The change subscription (see changefeed.h).
    [[nodiscard]] virtual Result<std::unique_ptr<ChangeFeed>> subscribe() const = 0;
    [[nodiscard]] virtual std::string describe() const = 0; // where the home is, for messages
};

} // namespace tollgate
