#pragma once

// IntMath: whole-number arithmetic that neither overflows nor rounds toward zero where the
// callers need a floor (times before 1970 and bucket indexes of negative instants).

#include <cstdint>

namespace tollgate {

struct IntMath
{
    // a + b, held at the int64 bound it would cross.
    static constexpr std::int64_t plusSaturated(std::int64_t a, std::int64_t b)
    {
        std::int64_t r = 0;
        if (__builtin_add_overflow(a, b, &r))
            return b > 0 ? INT64_MAX : INT64_MIN;
        return r;
    }

    // a / b rounded toward negative infinity (b != 0).
    static constexpr std::int64_t floorDiv(std::int64_t a, std::int64_t b)
    {
        return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
    }
};

} // namespace tollgate
