#pragma once

#include "base/clock.h"

namespace tollgate {

class SystemClock final : public Clock
{
public:
    [[nodiscard]] WallTime now() const override { return std::chrono::system_clock::now(); }
};

} // namespace tollgate
