#include "system/pathpolicy.h"

namespace tollgate {

Result<std::string> PathPolicy::validate(std::string_view path)
{
    const std::string shown(path.substr(0, path.find('\0')));
    if (path.empty())
        return Error::make(ErrorKind::Usage, "", "empty path");
    if (path.find('\0') != std::string_view::npos)
        return Error::make(ErrorKind::Usage, shown, "path contains a NUL byte; refused");
    std::size_t start = 0;
    while (start <= path.size()) {
        std::size_t end = path.find('/', start);
        if (end == std::string_view::npos)
            end = path.size();
        if (path.substr(start, end - start) == "..")
            return Error::make(ErrorKind::Usage, shown,
                "path contains '..'; refused (give a path without parent references)");
        start = end + 1;
    }
    if (path.back() == '/')
        return Error::make(ErrorKind::Usage, shown, "path names a directory, not a file");
    return std::string(path);
}

std::string PathPolicy::dirName(const std::string& path)
{
    const auto slash = path.rfind('/');
    if (slash == std::string::npos)
        return ".";
    if (slash == 0)
        return "/";
    return path.substr(0, slash);
}

std::string PathPolicy::baseName(const std::string& path)
{
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace tollgate
