#pragma once

#include "base/clock.h"

namespace tollgate {

// The system clock shifted by a fixed amount: lets a separate process see the world as it
// will be later, without sleeping (used by cross-process tests and the CLI's hidden
// TOLLGATE_CLOCK_OFFSET test hook).
class OffsetClock final : public Clock
{
public:
    explicit OffsetClock(std::chrono::nanoseconds offset)
        : m_offset(std::chrono::duration_cast<WallTime::duration>(offset))
    {
    }
    [[nodiscard]] WallTime now() const override { return std::chrono::system_clock::now() + m_offset; }

private:
    WallTime::duration m_offset;
};

} // namespace tollgate
