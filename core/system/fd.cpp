#include "system/fd.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace tollgate {

namespace {

Error openError(int err, const std::string& path, int flags)
{
    if (err == ELOOP)
        return Error::make(ErrorKind::Permission, path, "is a symbolic link; refusing to follow it");
    return Error::fromErrno(err, path, (flags & O_CREAT) ? "cannot create" : "cannot open");
}

Result<Fd> requireRegular(Result<Fd> fd, int flags)
{
    if (!fd) {
        const Error& e = fd.error();
        // Opening a directory for writing fails with EISDIR, a FIFO without a reader opened
        // non-blocking for writing with ENXIO: both mean "not a regular file" to the user.
        if (e.sysErrno == EISDIR)
            return Error::make(
                ErrorKind::Permission, e.path, "is a directory, not a regular file; refusing it");
        if (e.sysErrno == ENXIO)
            return Error::make(
                ErrorKind::Permission, e.path, "is a FIFO or socket, not a regular file; refusing it");
        return fd;
    }
    auto st = fd->stat();
    if (!st)
        return st.error();
    if (!S_ISREG(st->st_mode)) {
        return Error::make(ErrorKind::Permission, fd->path(),
            std::string("is ") + Fd::fileTypeName(st->st_mode) + ", not a regular file; refusing it");
    }
    if (!(flags & O_NONBLOCK)) {
        const int fl = ::fcntl(fd->get(), F_GETFL);
        if (fl >= 0)
            (void)::fcntl(fd->get(), F_SETFL, fl & ~O_NONBLOCK);
    }
    return fd;
}

} // namespace

Fd::~Fd()
{
    reset();
}

Fd::Fd(Fd&& other) noexcept
    : m_fd(other.m_fd)
    , m_path(std::move(other.m_path))
{
    other.m_fd = -1;
}

Fd& Fd::operator=(Fd&& other) noexcept
{
    if (this != &other) {
        reset();
        m_fd = other.m_fd;
        m_path = std::move(other.m_path);
        other.m_fd = -1;
    }
    return *this;
}

void Fd::reset()
{
    if (m_fd >= 0) {
        ::close(m_fd);
        m_fd = -1;
    }
}

Result<Fd> Fd::open(const std::string& path, int flags, mode_t mode)
{
    int fd;
    do {
        fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return openError(errno, path, flags);
    return Fd(fd, path);
}

const char* Fd::fileTypeName(mode_t mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "an unknown kind of file";
}

Result<Fd> Fd::openAt(const Fd& dir, const std::string& name, int flags, mode_t mode)
{
    const std::string path = dir.path() + "/" + name;
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
        return Error::make(ErrorKind::Usage, path, "is not a plain file name");
    int fd;
    do {
        fd = ::openat(dir.get(), name.c_str(), flags | O_CLOEXEC | O_NOFOLLOW, mode);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return openError(errno, path, flags);
    return Fd(fd, path);
}

Result<Fd> Fd::openRegular(const std::string& path, int flags, mode_t mode)
{
    return requireRegular(open(path, flags | O_NOFOLLOW | O_NONBLOCK, mode), flags);
}

Result<Fd> Fd::openRegularFollowing(const std::string& path)
{
    return requireRegular(open(path, O_RDONLY | O_NONBLOCK), O_RDONLY);
}

Result<Fd> Fd::openRegularAt(const Fd& dir, const std::string& name, int flags, mode_t mode)
{
    return requireRegular(openAt(dir, name, flags | O_NONBLOCK, mode), flags);
}

Result<struct stat> Fd::stat() const
{
    struct stat st
    {
    };
    if (::fstat(m_fd, &st) != 0)
        return Error::fromErrno(errno, m_path, "cannot stat");
    return st;
}

Result<std::size_t> Fd::preadSome(char* buf, std::size_t len, off_t offset) const
{
    ssize_t n;
    do {
        n = ::pread(m_fd, buf, len, offset);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return Error::fromErrno(errno, m_path, "cannot read");
    return static_cast<std::size_t>(n);
}

Result<std::string> Fd::readAll(std::size_t maxBytes) const
{
    auto st = stat();
    if (!st)
        return st.error();
    if (static_cast<std::size_t>(st->st_size) > maxBytes) {
        return Error::make(ErrorKind::Corrupt, m_path,
            "file is " + std::to_string(st->st_size) + " bytes, larger than the " + std::to_string(maxBytes)
                + " allowed; not read");
    }
    std::string out;
    out.resize(static_cast<std::size_t>(st->st_size) + 1);
    std::size_t used = 0;
    for (;;) {
        if (used == out.size()) {
            if (out.size() > maxBytes)
                return Error::make(ErrorKind::Corrupt, m_path,
                    "file grew past the " + std::to_string(maxBytes) + " bytes allowed while reading");
            out.resize(out.size() * 2);
        }
        auto n = preadSome(out.data() + used, out.size() - used, static_cast<off_t>(used));
        if (!n)
            return n.error();
        if (*n == 0)
            break;
        used += *n;
    }
    if (used > maxBytes)
        return Error::make(ErrorKind::Corrupt, m_path,
            "file grew past the " + std::to_string(maxBytes) + " bytes allowed while reading");
    out.resize(used);
    return out;
}

Result<void> Fd::writeAll(std::string_view data) const
{
    while (!data.empty()) {
        ssize_t n = ::write(m_fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return Error::fromErrno(errno, m_path, "cannot write");
        }
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return {};
}

Result<void> Fd::pwriteAll(std::string_view data, off_t offset) const
{
    while (!data.empty()) {
        ssize_t n = ::pwrite(m_fd, data.data(), data.size(), offset);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return Error::fromErrno(errno, m_path, "cannot write");
        }
        data.remove_prefix(static_cast<std::size_t>(n));
        offset += n;
    }
    return {};
}

Result<void> Fd::truncate(off_t length) const
{
    int rc;
    do {
        rc = ::ftruncate(m_fd, length);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0)
        return Error::fromErrno(errno, m_path, "cannot truncate");
    return {};
}

Result<void> Fd::syncData() const
{
    int rc;
    do {
        rc = ::fdatasync(m_fd);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0)
        return Error::fromErrno(errno, m_path, "cannot sync");
    return {};
}

} // namespace tollgate
