#pragma once

// RetryAfter: parses an HTTP Retry-After value — delay-seconds ("120", fractions accepted)
// or an HTTP-date ("Wed, 21 Oct 2026 07:28:00 GMT", also the obsolete RFC 850 and asctime
// forms) — into milliseconds from now. A date in the past means 0.

#include "result.h"

#include <cstdint>
#include <string_view>

namespace tollgate {

class RetryAfter {
public:
    [[nodiscard]] static Result<std::int64_t> parseMs(std::string_view value, std::int64_t nowUnixMs);
};

} // namespace tollgate
