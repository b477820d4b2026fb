#include "locktarget.h"

#include "fd.h"
#include "flockguard.h"

#include <QFile>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tollgate::ui {

namespace {

// Other removers hold a lock file's flock for microseconds; a holder that keeps it longer is
// stopped or hostile, and the action is refused rather than waited on.
constexpr auto FLOCK_WAIT = std::chrono::milliseconds(1000);

Result<LockTarget::Look> readFrom(const Fd& fd)
{
    LockTarget::Look look;
    auto st = fd.stat();
    if (!st)
        return st.error();
    look.exists = true;
    look.identity.device = static_cast<quint64>(st->st_dev);
    look.identity.inode = static_cast<quint64>(st->st_ino);
    look.identity.mtime = static_cast<qint64>(st->st_mtim.tv_sec);
    auto content = fd.readAll(LockInfo::MAX_FILE_BYTES);
    if (!content) {
        if (content.error().kind != ErrorKind::Corrupt)
            return content.error();
        // Too big to be a lock: identified by inode and mtime only.
        look.identity.content = QByteArray("(oversized)");
        return look;
    }
    look.identity.content = QByteArray::fromStdString(*content);
    if (auto info = LockInfo::parse(*content); info)
        look.info = std::move(info).value();
    return look;
}

} // namespace

Result<LockTarget::Look> LockTarget::look(const QString& path)
{
    auto fd = Fd::openRegular(QFile::encodeName(path).toStdString(), O_RDONLY);
    if (!fd) {
        if (fd.error().sysErrno == ENOENT)
            return Look {};
        return fd.error();
    }
    return readFrom(*fd);
}

Result<LockTarget::Outcome> LockTarget::removeIfSame(const QString& path, const LockIdentity& expected,
    const std::function<bool(const Look&)>& decide, Look& found)
{
    const std::string native = QFile::encodeName(path).toStdString();
    found = Look {};
    auto fd = Fd::openRegular(native, O_RDONLY);
    if (!fd) {
        if (fd.error().sysErrno == ENOENT)
            return Outcome::Gone;
        return fd.error();
    }
    auto guard = FlockGuard::lock(*fd, true, std::chrono::steady_clock::now() + FLOCK_WAIT);
    if (!guard)
        return guard.error();
    auto mine = readFrom(*fd);
    if (!mine)
        return mine.error();
    found = *mine;
    // The path must still name the inode we hold the flock of: otherwise another remover got
    // there first and a new lock (not ours to judge here) may be in its place.
    struct stat now
    {
    };
    if (::lstat(native.c_str(), &now) != 0) {
        if (errno == ENOENT)
            return Outcome::Gone;
        return Error::fromErrno(errno, native, "cannot stat");
    }
    if (static_cast<quint64>(now.st_dev) != found.identity.device
        || static_cast<quint64>(now.st_ino) != found.identity.inode) {
        auto current = look(path);
        found = current ? *current : Look {};
        return found.exists ? Outcome::Changed : Outcome::Gone;
    }
    if (!(found.identity == expected))
        return Outcome::Changed;
    if (!decide(found))
        return Outcome::Kept;
    if (::unlink(native.c_str()) != 0) {
        if (errno == ENOENT)
            return Outcome::Gone;
        return Error::fromErrno(errno, native, "cannot remove the lock file");
    }
    return Outcome::Removed;
}

} // namespace tollgate::ui
