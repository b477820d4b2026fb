#include "system/secretfile.h"

#include "system/fd.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tollgate {

Result<std::string> SecretFile::read(const std::string& path, const std::string& what, std::size_t maxBytes)
{
    auto fd = Fd::openRegular(path, O_RDONLY);
    if (!fd) {
        Error e = fd.error(); // its kind and errno ("No such file or directory" says what to fix)
        e.path = path;
        e.message = "cannot read " + what + ": " + e.message;
        return e;
    }
    struct stat st
    {
    };
    if (::fstat(fd->get(), &st) != 0)
        return Error::fromErrno(errno, path, "cannot stat " + what);
    if (st.st_uid != ::geteuid())
        return Error::make(ErrorKind::Permission, path, what + " belongs to another user; refusing it");
    if (st.st_mode & 077)
        return Error::make(ErrorKind::Permission, path,
            what + " can be read or written by others; refusing it: chmod 600 " + path);
    auto text = fd->readAll(maxBytes);
    if (!text)
        return text.error();
    std::string secret = std::move(text).value();
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r'))
        secret.pop_back();
    if (secret.empty())
        return Error::make(ErrorKind::Usage, path, what + " is empty");
    return secret;
}

} // namespace tollgate
