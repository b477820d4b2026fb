#include "base/result.h"

#include <cstring>

namespace tollgate {

std::string Error::describe() const
{
    std::string out;
    if (!path.empty()) {
        out += path;
        out += ": ";
    }
    out += message;
    if (sysErrno != 0) {
        out += " (";
        out += std::strerror(sysErrno);
        out += ")";
    }
    return out;
}

Error Error::fromErrno(int err, std::string path, std::string what)
{
    ErrorKind kind = ErrorKind::Io;
    switch (err) {
    case ENOENT:
    case ENOTDIR:
        kind = ErrorKind::NotFound;
        break;
    case EACCES:
    case EPERM:
    case EROFS:
        kind = ErrorKind::Permission;
        break;
    case EWOULDBLOCK:
        kind = ErrorKind::Busy;
        break;
    default:
        break;
    }
    return Error { kind, err, std::move(path), std::move(what) };
}

Error Error::make(ErrorKind kind, std::string path, std::string message)
{
    return Error { kind, 0, std::move(path), std::move(message) };
}

const char* errorKindName(ErrorKind kind)
{
    switch (kind) {
    case ErrorKind::Usage:
        return "usage";
    case ErrorKind::NotFound:
        return "not-found";
    case ErrorKind::Permission:
        return "permission";
    case ErrorKind::Io:
        return "io";
    case ErrorKind::Corrupt:
        return "corrupt";
    case ErrorKind::Busy:
        return "busy";
    case ErrorKind::Timeout:
        return "timeout";
    case ErrorKind::Unsupported:
        return "unsupported";
    }
    return "unknown";
}

} // namespace tollgate
