#include "capistatus.h"

#include "tollgate.h"

namespace tollgate::capi {

CapiStatus CapiStatus::of(const Error& error)
{
    CapiStatus s;
    // ErrorKind's order is the header's 1-8 (static_asserts in tollgate.cpp keep it so).
    s.code = static_cast<int>(error.kind) + TOLLGATE_E_USAGE;
    s.sysErrno = error.sysErrno;
    s.message = error.describe();
    return s;
}

CapiStatus CapiStatus::make(int code, std::string message)
{
    CapiStatus s;
    s.code = code;
    s.message = std::move(message);
    return s;
}

} // namespace tollgate::capi
