#pragma once

// ManualClock: a clock that moves only when told (tests), or that runs at a fixed offset
// from the system clock (test helpers that must look "two hours later" to the lock code).

#include "base/clock.h"

#include <atomic>

namespace tollgate {

class ManualClock final : public Clock
{
public:
    explicit ManualClock(WallTime start)
        : m_now(start.time_since_epoch().count())
    {
    }
    [[nodiscard]] WallTime now() const override { return WallTime(WallTime::duration(m_now.load())); }
    void set(WallTime t) { m_now.store(t.time_since_epoch().count()); }
    void advance(std::chrono::nanoseconds d)
    {
        m_now.fetch_add(std::chrono::duration_cast<WallTime::duration>(d).count());
    }

private:
    std::atomic<WallTime::rep> m_now;
};

} // namespace tollgate
