#pragma once

// Clock: wall time is injected everywhere the core reasons about ages, windows and
// backoffs, so tests move time instead of sleeping.

#include <chrono>
#include <cstdint>

namespace tollgate {

using WallTime = std::chrono::system_clock::time_point;

class Clock
{
public:
    virtual ~Clock() = default;
    [[nodiscard]] virtual WallTime now() const = 0;

    [[nodiscard]] std::int64_t unixSeconds() const
    {
        return std::chrono::duration_cast<std::chrono::seconds>(now().time_since_epoch()).count();
    }
    // Unix milliseconds: the unit of every time in the state, the history and the store.
    [[nodiscard]] std::int64_t unixMs() const
    {
        return std::chrono::duration_cast<std::chrono::milliseconds>(now().time_since_epoch()).count();
    }
};

} // namespace tollgate
