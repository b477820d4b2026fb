#include "system/homedir.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tollgate {

namespace {

std::string octal(mode_t mode)
{
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
    return buf;
}

// The checks of the home, made on what fstat() of its open descriptor says.
Result<void> verifyHome(const std::string& dir, const struct stat& st)
{
    if (!S_ISDIR(st.st_mode))
        return Error::make(ErrorKind::Usage, dir, "the Tollgate home is not a directory");
    if (st.st_uid != ::geteuid())
        return Error::make(ErrorKind::Permission, dir,
            "the Tollgate home belongs to another user (uid " + std::to_string(st.st_uid) + "); refusing it");
    if (st.st_mode & 022) {
        return Error::make(ErrorKind::Permission, dir,
            "the Tollgate home is writable by others (mode " + octal(st.st_mode)
                + "); refusing it: chmod 700 " + dir);
    }
    return {};
}

Result<void> createParents(const std::string& dir)
{
    // Each missing component is created 0700 (only the ones we create). A component that
    // already exists is left as it is: the checks apply to the home itself, made below on
    // its descriptor, and whatever a parent resolves to, the home must be ours.
    for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
        if (pos != dir.size() && dir[pos] != '/')
            continue;
        const std::string part = dir.substr(0, pos);
        if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
            return Error::fromErrno(errno, part, "cannot create the Tollgate home directory");
    }
    return {};
}

// The home's last component only. A missing parent means the path is not what the user
// meant (a typo in --home): refused by name, and nothing is created.
Result<void> createLast(const std::string& dir)
{
    if (::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST)
        return {};
    const int err = errno;
    if (err != ENOENT)
        return Error::fromErrno(err, dir, "cannot create the Tollgate home directory");
    const auto slash = dir.rfind('/');
    const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
    return Error::make(ErrorKind::NotFound, parent,
        "the parent directory of the Tollgate home " + dir
            + " does not exist; a home given with --home or TOLLGATE_HOME is created only as its last "
              "directory (a typo must not create a tree): check the path, or create "
            + parent + " first");
}

} // namespace

Result<Fd> HomeDir::open(const std::string& dir, bool create)
{
    return open(dir, create ? Create::WithParents : Create::Nothing);
}

Result<Fd> HomeDir::open(const std::string& dir, Create create)
{
    // O_NONBLOCK: O_DIRECTORY already refuses a FIFO before opening it; this is belt and braces.
    const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK;
    auto fd = Fd::open(dir, flags);
    bool created = false;
    if (!fd && fd.error().sysErrno == ENOENT && create != Create::Nothing) {
        if (auto r = create == Create::Home ? createLast(dir) : createParents(dir); !r)
            return r.error();
        created = true;
        fd = Fd::open(dir, flags);
    }
    if (!fd) {
        const int err = fd.error().sysErrno;
        if (err == ENOTDIR || err == ELOOP) {
            // Only to word the message: the decision was made by the open itself. A directory
            // here now means the path was swapped between the open and this look.
            struct stat st
            {
            };
            const bool seen = ::lstat(dir.c_str(), &st) == 0;
            if (seen && S_ISDIR(st.st_mode))
                return Error::make(ErrorKind::Permission, dir,
                    "the Tollgate home was not a directory when opened (replaced meanwhile?); refusing it");
            if (seen && S_ISLNK(st.st_mode))
                return Error::make(
                    ErrorKind::Permission, dir, "the Tollgate home is a symbolic link; refusing it");
            if (seen)
                return Error::make(ErrorKind::Usage, dir, "the Tollgate home is not a directory");
        }
        return Error::fromErrno(err, dir, "cannot use the Tollgate home directory");
    }
    auto st = fd->stat();
    if (!st)
        return st.error();
    if (auto r = verifyHome(dir, *st); !r)
        return r.error();
    if (created && (st->st_mode & 07777) != 0700)
        (void)::fchmod(fd->get(), 0700); // an odd umask; fchmod, never chmod by path
    return fd;
}

Result<void> HomeDir::ensure(const std::string& dir)
{
    auto fd = open(dir, true);
    if (!fd)
        return fd.error();
    return {};
}

Result<void> HomeDir::check(const std::string& dir)
{
    auto fd = open(dir, false);
    if (!fd)
        return fd.error();
    return {};
}

Result<void> HomeDir::checkFile(const Fd& fd)
{
    auto st = fd.stat();
    if (!st)
        return st.error();
    if (!S_ISREG(st->st_mode)) {
        return Error::make(ErrorKind::Permission, fd.path(),
            std::string("is ") + Fd::fileTypeName(st->st_mode) + ", not a regular file; refusing it");
    }
    if (st->st_uid != ::geteuid()) {
        return Error::make(ErrorKind::Permission, fd.path(),
            "belongs to another user (uid " + std::to_string(st->st_uid) + "); refusing it");
    }
    if (st->st_mode & 022) {
        return Error::make(ErrorKind::Permission, fd.path(),
            "is writable by others (mode " + octal(st->st_mode) + "); refusing it: chmod 600 " + fd.path());
    }
    return {};
}

Result<Fd> HomeDir::openFile(const Fd& home, const std::string& name, int flags, mode_t mode)
{
    auto fd = Fd::openRegularAt(home, name, flags, mode);
    if (!fd)
        return fd;
    if (auto r = checkFile(*fd); !r)
        return r.error();
    return fd;
}

Result<std::optional<Fd>> HomeDir::openIfThere(const Fd& home, const std::string& name, int flags)
{
    auto fd = openFile(home, name, flags & ~O_CREAT);
    if (!fd) {
        if (fd.error().sysErrno == ENOENT)
            return std::optional<Fd>();
        return fd.error();
    }
    return std::optional<Fd>(std::move(fd).value());
}

Result<bool> HomeDir::checkEntry(const Fd& home, const std::string& name)
{
    const std::string path = home.path() + "/" + name;
    struct stat st
    {
    };
    if (::fstatat(home.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT)
            return false;
        return Error::fromErrno(errno, path, "cannot stat");
    }
    if (S_ISLNK(st.st_mode))
        return Error::make(ErrorKind::Permission, path, "is a symbolic link; refusing to follow it");
    if (!S_ISREG(st.st_mode)) {
        return Error::make(ErrorKind::Permission, path,
            std::string("is ") + Fd::fileTypeName(st.st_mode) + ", not a regular file; refusing it");
    }
    if (st.st_uid != ::geteuid()) {
        return Error::make(ErrorKind::Permission, path,
            "belongs to another user (uid " + std::to_string(st.st_uid) + "); refusing it");
    }
    if (st.st_mode & 022) {
        return Error::make(ErrorKind::Permission, path,
            "is writable by others (mode " + octal(st.st_mode) + "); refusing it: chmod 600 " + path);
    }
    return true;
}

Result<void> HomeDir::sync(const Fd& home)
{
    int rc;
    do {
        rc = ::fsync(home.get());
    } while (rc != 0 && errno == EINTR);
    if (rc != 0)
        return Error::fromErrno(errno, home.path(), "cannot sync the directory");
    return {};
}

} // namespace tollgate
