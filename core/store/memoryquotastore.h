#pragma once

// MemoryQuotaStore: the whole store contract (quotastore.h) and its read side (quotareader.h)
// in one process's memory: for tests of everything above the store, and the proof that the
// limiter needs nothing of the file store. Nothing survives the object; one mutex serialises
// every transaction, and a condition variable is the doorbell.
//
// Strict mode runs every transaction function twice — first on a throwaway copy, then for
// real — as an optimistic store (Redis, a retry after a conflict) may: a caller whose function
// is not pure (a side effect, a counter, an output it appends to) behaves differently under it,
// which is what the strict tests look for.

#include "base/clock.h"
#include "store/quotareader.h"
#include "store/quotastore.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

namespace tollgate {

class MemoryQuotaStore final : public QuotaStore, public QuotaReader
{
public:
    // The history keeps the last HISTORY_CAP events (a cursor that falls behind skips the rest,
    // counted as skipped).
    static constexpr std::size_t HISTORY_CAP = 100000;

    explicit MemoryQuotaStore(bool strict = false)
        : m_strict(strict)
    {
    }

    using QuotaStore::transact;
    // Never waits for another process: `wait` is not needed.
    [[nodiscard]] Result<void> transact(const StoreWait& wait, const TxFunction& fn) override;
    [[nodiscard]] Result<void> updateLimits(const LimitsFunction& fn) override;
    [[nodiscard]] std::uint32_t changeMark() const override;
    void waitForChange(std::uint32_t mark, std::chrono::nanoseconds timeout) const override;
    [[nodiscard]] std::string describe() const override { return "memory"; }

    [[nodiscard]] Result<QuotaView> snapshot() override;
    [[nodiscard]] std::unique_ptr<HistoryCursor> history() const override;
    // An eventfd written at every commit; the feed must not outlive the store.
    [[nodiscard]] Result<std::unique_ptr<ChangeFeed>> subscribe() const override;

    // How many transaction functions ran (strict mode counts both runs).
    [[nodiscard]] std::uint64_t functionRuns() const;

private:
    friend class MemoryHistoryCursor;
    friend class MemoryFeed;
    Result<void> run(const LimitsFunction* limitsFn, const TxFunction* fn);
    // Events from sequence number `from` on; sets `next` and the count of events lost to the cap.
    std::vector<HistoryEvent> eventsFrom(std::uint64_t from, std::uint64_t& next, std::uint64_t& lost) const;

    const bool m_strict;
    mutable std::mutex m_mutex; // guards everything below
    mutable std::condition_variable m_rang;
    QuotaState m_state;
    bool m_hasState = false; // a transaction committed a state
    QuotaLimits m_limits;
    std::deque<HistoryEvent> m_history;
    std::uint64_t m_historyBase = 0; // sequence number of m_history.front()
    std::uint32_t m_generation = 0;
    std::uint64_t m_runs = 0;
    mutable std::vector<int> m_feeds; // eventfds of the live feeds (owned by them)
};

} // namespace tollgate
