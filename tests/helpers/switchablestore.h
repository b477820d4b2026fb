#pragma once

// SwitchableStore: the memory store behind two switches. Down: every operation fails as an
// unreachable store's would (what the proxy meets when Redis goes away mid-exchange). Held:
// every operation waits at a gate until the test opens it (a store that stalls), so a test can
// see what else waits with it. Either switch may be flipped from another thread.

#include "store/memoryquotastore.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace tollgate::test {

class SwitchableStore final : public QuotaStore
{
public:
    // The longest an operation waits at a closed gate: a test that forgets to open it fails
    // rather than hangs.
    static constexpr std::chrono::seconds GATE_LIMIT { 120 };

    using QuotaStore::transact;
    Result<void> transact(const StoreWait& wait, const TxFunction& fn) override
    {
        atGate();
        if (down)
            return Error::make(ErrorKind::Io, {}, "the store is down (test)");
        return m_memory.transact(wait, fn);
    }
    Result<void> updateLimits(const LimitsFunction& fn) override
    {
        atGate();
        if (down)
            return Error::make(ErrorKind::Io, {}, "the store is down (test)");
        return m_memory.updateLimits(fn);
    }
    std::uint32_t changeMark() const override { return m_memory.changeMark(); }
    void waitForChange(std::uint32_t mark, std::chrono::nanoseconds timeout) const override
    {
        m_memory.waitForChange(mark, timeout);
    }
    std::string describe() const override { return "memory (switchable)"; }
    MemoryQuotaStore& memory() { return m_memory; }

    void hold()
    {
        std::lock_guard lock(m_gate);
        m_held = true;
    }
    void open()
    {
        {
            std::lock_guard lock(m_gate);
            m_held = false;
        }
        m_moved.notify_all();
    }
    // Waits until an operation waits at the gate, for at most `limit`; true if one does.
    bool someoneWaits(std::chrono::milliseconds limit)
    {
        std::unique_lock lock(m_gate);
        return m_moved.wait_for(lock, limit, [&] { return m_waiting > 0; });
    }

    std::atomic<bool> down { false };

private:
    void atGate()
    {
        std::unique_lock lock(m_gate);
        if (!m_held)
            return;
        ++m_waiting;
        m_moved.notify_all();
        m_moved.wait_for(lock, GATE_LIMIT, [&] { return !m_held; });
        --m_waiting;
    }

    MemoryQuotaStore m_memory;
    std::mutex m_gate;
    std::condition_variable m_moved;
    bool m_held = false;
    int m_waiting = 0;
};

} // namespace tollgate::test
