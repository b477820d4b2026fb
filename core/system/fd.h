#pragma once

// Fd: an owned file descriptor. Every open goes through Fd::open, which adds O_CLOEXEC (so a
// command started by `tollgate run` never inherits our lock or state descriptors) and retries
// EINTR. close() is never retried: on Linux the descriptor is gone even when close fails.

#include "base/result.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <sys/types.h>

namespace tollgate {

class Fd
{
public:
    Fd() = default;
    Fd(int fd, std::string path)
        : m_fd(fd)
        , m_path(std::move(path))
    {
    }
    ~Fd();
    Fd(Fd&& other) noexcept;
    Fd& operator=(Fd&& other) noexcept;
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;

    static Result<Fd> open(const std::string& path, int flags, mode_t mode = 0600);
    // openat(2) relative to an open directory, adding O_CLOEXEC and O_NOFOLLOW: the directory
    // was verified once, so no component of the path can be swapped after that check. `name`
    // is one path component; the error messages name dir.path() + "/" + name.
    static Result<Fd> openAt(const Fd& dir, const std::string& name, int flags, mode_t mode = 0600);
    // Opens a file that must be a regular file. Adds O_NOFOLLOW and O_NONBLOCK, so a FIFO or
    // a device planted at the path cannot block the open (which, under a lock, would block
    // every other process too), then fstat()s the descriptor and refuses anything that is not
    // a regular file (ErrorKind::Permission, naming what it is). O_NONBLOCK is cleared again
    // once the file is known to be regular. Use these for every file a user could replace.
    static Result<Fd> openRegular(const std::string& path, int flags, mode_t mode = 0600);
    static Result<Fd> openRegularAt(const Fd& dir, const std::string& name, int flags, mode_t mode = 0600);
    // The same, but a symbolic link is followed: for a file the user names on purpose where a
    // link is the norm (a CA bundle in /etc/ssl/certs, a mounted secret), read-only.
    static Result<Fd> openRegularFollowing(const std::string& path);
    // "a FIFO", "a directory", ... for messages.
    [[nodiscard]] static const char* fileTypeName(mode_t mode);

    [[nodiscard]] int get() const { return m_fd; }
    [[nodiscard]] bool valid() const { return m_fd >= 0; }
    [[nodiscard]] const std::string& path() const { return m_path; }
    void reset();
    // Gives the descriptor up without closing it (to an owner that closes it, e.g. hiredis).
    [[nodiscard]] int release()
    {
        const int fd = m_fd;
        m_fd = -1;
        return fd;
    }

    [[nodiscard]] Result<struct stat> stat() const;
    // Reads the whole file from offset 0. A file larger than maxBytes is refused without
    // reading it (ErrorKind::Corrupt), so a hostile multi-gigabyte file costs nothing.
    [[nodiscard]] Result<std::string> readAll(std::size_t maxBytes) const;
    [[nodiscard]] Result<std::size_t> preadSome(char* buf, std::size_t len, off_t offset) const;
    [[nodiscard]] Result<void> writeAll(std::string_view data) const;
    [[nodiscard]] Result<void> pwriteAll(std::string_view data, off_t offset) const;
    [[nodiscard]] Result<void> truncate(off_t length) const;
    [[nodiscard]] Result<void> syncData() const;

private:
    int m_fd = -1;
    std::string m_path;
};

} // namespace tollgate
