#include "quotapeek.h"

#include "fd.h"
#include "flockguard.h"
#include "statefile.h"

#include <fcntl.h>

namespace tollgate {

namespace {

constexpr std::size_t MAX_LIMITS_BYTES = 4 * 1024 * 1024;

// nullopt when the file does not exist.
Result<std::optional<Fd>> openIfThere(const std::string& path)
{
    auto fd = Fd::open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (!fd) {
        if (fd.error().sysErrno == ENOENT)
            return std::optional<Fd>();
        return fd.error();
    }
    auto st = fd->stat();
    if (!st)
        return st.error();
    if (!S_ISREG(st->st_mode))
        return Error::make(ErrorKind::Permission, path, "is not a regular file");
    return std::optional<Fd>(std::move(fd).value());
}

} // namespace

Result<QuotaView> QuotaPeek::read(const std::string& homeDir, std::chrono::milliseconds lockTimeout)
{
    QuotaView view;
    const std::string limitsPath = homeDir + "/limits.json";
    // limits.json is only ever replaced by rename: reading it needs no lock.
    auto limits = openIfThere(limitsPath);
    if (!limits)
        return limits.error();
    if (*limits) {
        auto text = (*limits)->readAll(MAX_LIMITS_BYTES);
        auto parsed = text ? QuotaLimits::fromJson(*text) : Result<QuotaLimits>(text.error());
        if (parsed) {
            view.limits = std::move(parsed).value();
        } else {
            view.corruptFile = limitsPath;
            view.corruptReason = parsed.error().message;
        }
    }

    const std::string statePath = homeDir + "/state.bin";
    auto lockFd = openIfThere(homeDir + "/state.lock");
    if (!lockFd)
        return lockFd.error();
    std::optional<FlockGuard> guard;
    if (*lockFd) {
        auto g = FlockGuard::lock(**lockFd, false, std::chrono::steady_clock::now() + lockTimeout);
        if (!g)
            return g.error();
        guard.emplace(std::move(g).value());
    }
    auto stateFd = openIfThere(statePath);
    if (!stateFd)
        return stateFd.error();
    if (!*stateFd)
        return view;
    StateFile file(std::move(**stateFd));
    auto state = file.read();
    if (!state) {
        if (state.error().kind != ErrorKind::Corrupt && state.error().kind != ErrorKind::Unsupported)
            return state.error();
        if (view.corruptFile.empty()) {
            view.corruptFile = statePath;
            view.corruptReason = state.error().message;
        }
        return view;
    }
    view.state = std::move(*state);
    return view;
}

} // namespace tollgate
