#pragma once

// CapiStatus: what one function of the C library answers — a status code of tollgate.h (the
// core's ErrorKind for 1-8, the library's own above), the errno, the message naming the file or
// URL, and for a refusal when the quota could admit. Filled into a tollgate_error at the edge.

#include "base/result.h"

#include <cstdint>
#include <string>

namespace tollgate::capi {

struct CapiStatus
{
    int code = 0; // TOLLGATE_OK
    int sysErrno = 0;
    std::string message;
    std::int64_t retryAfterMs = -1;

    [[nodiscard]] bool ok() const { return code == 0; }
    [[nodiscard]] static CapiStatus of(const Error& error);
    [[nodiscard]] static CapiStatus make(int code, std::string message);
};

} // namespace tollgate::capi
