#pragma once

// QuotaStore: the limiter's storage, kept behind this narrow interface so that the same
// limiter can later run on Redis (WATCH/MULTI or a script per transaction, pub/sub as the
// doorbell). A store offers exactly three things:
//   - transact(): run a function on the state and limits atomically with respect to every
//     other process, persist what it changed, append its history events, ring waiters;
//   - a change mark and a wait for it to move (the doorbell);
//   - the limits, changed only through updateLimits().

#include "historyevent.h"
#include "quotalimits.h"
#include "quotastate.h"

#include <chrono>
#include <functional>
#include <vector>

namespace tollgate {

struct QuotaTransaction {
    QuotaState& state;
    const QuotaLimits& limits;
    std::vector<HistoryEvent> events;
    bool changed = false; // write the state back
    bool ring = false; // capacity may have appeared: wake waiters
};

class QuotaStore {
public:
    using TxFunction = std::function<Result<void>(QuotaTransaction&)>;
    using LimitsFunction = std::function<Result<void>(QuotaLimits&, QuotaTransaction&)>;

    virtual ~QuotaStore() = default;
    [[nodiscard]] virtual Result<void> transact(const TxFunction& fn) = 0;
    // Edits the limits and the state in one transaction; the limits are saved durably first.
    [[nodiscard]] virtual Result<void> updateLimits(const LimitsFunction& fn) = 0;
    [[nodiscard]] virtual std::uint32_t changeMark() const = 0;
    virtual void waitForChange(std::uint32_t mark, std::chrono::nanoseconds timeout) const = 0;
    [[nodiscard]] virtual std::string describe() const = 0; // where it lives, for messages
    // Problems that did not undo a committed transaction (e.g. the history could not be
    // written): the deed is done, so callers report success and print these as warnings.
    // Taking them clears them.
    [[nodiscard]] virtual std::vector<Error> takeWarnings() { return {}; }
};

} // namespace tollgate
