#pragma once

// OwedSlots: parallel slots a long-lived holder (the proxy) could not give back: the store
// failed (Redis down, the home's lock held past its timeout) just as their exchanges ended.
// The holder lives on, so to every other process such a slot looks held by a live holder —
// nobody would get it until the holder exited. So it owes the slot, and tries again every
// OWED_RETRY (QuotaExchange::giveBackOwed) until the store takes it back or says it is gone
// (released by hand meanwhile), and once more as it stops. A give-back is by fence, so one
// the store already did (its reply lost) is "gone", not done twice.
//
// Invariants: thread-safe (one mutex); bounded — past MAX the oldest is dropped (left to the
// holder's exit, or `tollgate release`); oldest first.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace tollgate {

class OwedSlots
{
public:
    static constexpr std::size_t MAX = 4096;
    static constexpr std::chrono::seconds OWED_RETRY { 1 };

    struct Owed
    {
        std::string provider;
        std::uint64_t fence = 0;
    };

    // May throw std::bad_alloc (the caller decides what a slot it cannot remember means).
    void add(Owed owed);
    [[nodiscard]] std::vector<Owed> takeAll();
    [[nodiscard]] bool empty() const;
    [[nodiscard]] std::size_t size() const;

private:
    mutable std::mutex m_mutex;
    std::vector<Owed> m_owed; // oldest first
};

} // namespace tollgate
