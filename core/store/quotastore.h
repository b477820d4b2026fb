#pragma once

// QuotaStore: storage for a state this process can transform itself, behind a narrow
// interface: the file store (FileQuotaStore) and the memory store (MemoryQuotaStore). The
// quota's operations are QuotaBackend's (backend/quotabackend.h); LocalQuotaBackend runs each as
// one transaction here. A store whose state lives elsewhere (Redis) implements QuotaBackend
// directly instead, with every operation atomic on the server. A store offers exactly three
// things: transact(), a change mark with a wait for it to move (the doorbell), and the
// limits, changed only through updateLimits().
//
// The contract every store keeps and every caller relies on:
// - Atomic: a transaction function sees the state and limits as of one instant and its
//   result (the state, when `changed`; the limits, for updateLimits) is committed whole or
//   not at all, serialised with every transaction of every process on the same home.
// - May run more than once: a store may call the function again after a conflict (an
//   optimistic store retries), always on a fresh copy of the state. So a function only reads
//   its inputs and writes the transaction object (and plain output variables it overwrites
//   on every run); it performs no other side effect (no I/O, no signals, no counters).
//   FileQuotaStore runs it exactly once, under state.lock.
// - An error returned by the function aborts the transaction: nothing is committed.
// - Events: `events` are appended to the history after the commit, best effort (a failure
//   there is a warning from takeWarnings(), never an error of a committed transaction).
// - Crash safety: a process killed at any instant leaves the previous or the new state,
//   never a mix (FileQuotaStore: two checksummed slots in state.bin; limits.json replaced by
//   rename after fsync). A holder that dies keeps nothing locked: state.lock is an flock,
//   released by the kernel. Slots and waiters of a dead process are reclaimed by the next
//   transaction that sees them (QuotaPolicy), not by the store.
// - No wait is endless: transact() gives up after the store's own deadline with
//   ErrorKind::Timeout naming where the store lives ("the store did not answer"). A caller
//   with a deadline of its own, or a cancel flag, passes them in a StoreWait.

#include "history/historyevent.h"
#include "quota/quotalimits.h"
#include "quota/quotastate.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <vector>

namespace tollgate {

// How long one transaction may wait for the store's exclusion (FileQuotaStore: state.lock),
// for a caller that has a deadline of its own or can be interrupted (`acquire --timeout 0`,
// a signal). The store bounds `deadline` by its own timeout and gives it a floor of its own
// (room for a transaction that holds the lock for the usual microseconds: a try still waits
// for one). `cancel` ends the wait early: a signal handler sets it, and the wait, which the
// signal interrupts, sees it. A wait ended either way fails before the transaction runs:
// nothing is committed. Ended by `cancel`, the error is ErrorKind::Timeout with sysErrno
// EINTR. A store that never waits for another process (memory) ignores both.
struct StoreWait
{
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    const std::atomic<bool>* cancel = nullptr;
};

struct QuotaTransaction
{
    QuotaState& state;
    const QuotaLimits& limits;
    std::vector<HistoryEvent> events;
    bool changed = false; // write the state back
    bool ring = false; // capacity may have appeared: wake waiters
};

class QuotaStore
{
public:
    using TxFunction = std::function<Result<void>(QuotaTransaction&)>;
    using LimitsFunction = std::function<Result<void>(QuotaLimits&, QuotaTransaction&)>;

    virtual ~QuotaStore() = default;
    [[nodiscard]] Result<void> transact(const TxFunction& fn) { return transact(StoreWait {}, fn); }
    [[nodiscard]] virtual Result<void> transact(const StoreWait& wait, const TxFunction& fn) = 0;
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
