#include "homedir.h"

#include "pathpolicy.h"

#include <cerrno>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

namespace tollgate {

Result<std::string> HomeDir::resolve(const std::optional<std::string>& explicitDir)
{
    std::string dir;
    if (explicitDir && !explicitDir->empty()) {
        dir = *explicitDir;
    } else if (const char* env = std::getenv("TOLLGATE_HOME"); env && *env) {
        dir = env;
    } else if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) {
        dir = std::string(xdg) + "/tollgate";
    } else if (const char* home = std::getenv("HOME"); home && *home) {
        dir = std::string(home) + "/.local/state/tollgate";
    } else {
        return Error::make(ErrorKind::Usage, "", "no home directory: pass --home DIR or set TOLLGATE_HOME");
    }
    while (dir.size() > 1 && dir.back() == '/')
        dir.pop_back();
    auto valid = PathPolicy::validate(dir);
    if (!valid)
        return valid.error();
    return dir;
}

Result<void> HomeDir::check(const std::string& dir)
{
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0)
        return Error::fromErrno(errno, dir, "cannot use the Tollgate home directory");
    if (S_ISLNK(st.st_mode))
        return Error::make(ErrorKind::Permission, dir, "the Tollgate home is a symbolic link; refusing it");
    if (!S_ISDIR(st.st_mode))
        return Error::make(ErrorKind::Usage, dir, "the Tollgate home is not a directory");
    if (st.st_uid != ::geteuid())
        return Error::make(ErrorKind::Permission, dir,
            "the Tollgate home belongs to another user (uid " + std::to_string(st.st_uid) + "); refusing it");
    if (st.st_mode & 022) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return Error::make(ErrorKind::Permission, dir,
            std::string("the Tollgate home is writable by others (mode ") + mode + "); refusing it: chmod 700 " + dir);
    }
    return {};
}

Result<void> HomeDir::ensure(const std::string& dir)
{
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) {
        if (errno != ENOENT)
            return Error::fromErrno(errno, dir, "cannot use the Tollgate home directory");
        // Create missing parents too, each 0700 (only the ones we create).
        for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
            if (pos != dir.size() && dir[pos] != '/')
                continue;
            const std::string part = dir.substr(0, pos);
            if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
                return Error::fromErrno(errno, part, "cannot create the Tollgate home directory");
        }
        ::chmod(dir.c_str(), 0700);
    }
    return check(dir);
}

} // namespace tollgate
