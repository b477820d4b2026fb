#include "store/quotapeek.h"

#include "store/filequotastore.h"
#include "store/statefile.h"
#include "system/flockguard.h"
#include "system/homedir.h"

#include <algorithm>
#include <fcntl.h>
#include <thread>

namespace tollgate {

namespace {


// FlockGuard::lock's loop with a caller-chosen longest pause.
Result<FlockGuard> sharedLock(
    const Fd& fd, std::chrono::steady_clock::time_point deadline, std::chrono::microseconds longestPause)
{
    auto pause = std::min(std::chrono::microseconds(10), longestPause);
    for (;;) {
        auto r = FlockGuard::tryLock(fd, false);
        if (r || r.error().kind != ErrorKind::Busy)
            return r;
        if (std::chrono::steady_clock::now() >= deadline)
            return Error::make(ErrorKind::Timeout, fd.path(), "timed out waiting for the file lock");
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, longestPause);
    }
}

} // namespace

Result<QuotaView> QuotaPeek::read(
    const std::string& homeDir, std::chrono::milliseconds lockTimeout, std::chrono::microseconds longestPause)
{
    auto home = HomeDir::open(homeDir, false);
    if (!home)
        return home.error();
    return read(*home, lockTimeout, longestPause);
}

Result<QuotaView> QuotaPeek::read(
    const Fd& home, std::chrono::milliseconds lockTimeout, std::chrono::microseconds longestPause)
{
    QuotaView view;
    const std::string limitsPath = home.path() + "/limits.json";
    // limits.json is only ever replaced by rename: reading it needs no lock.
    auto limits = HomeDir::openIfThere(home, "limits.json", O_RDONLY);
    if (!limits)
        return limits.error();
    if (*limits) {
        auto text = (*limits)->readAll(FileQuotaStore::MAX_LIMITS_BYTES);
        auto parsed = text ? QuotaLimits::fromJson(*text) : Result<QuotaLimits>(text.error());
        if (parsed) {
            view.limits = std::move(parsed).value();
        } else {
            view.corruptFile = limitsPath;
            view.limitsCorrupt = true;
            view.corruptReason = parsed.error().message;
        }
    }

    const std::string statePath = home.path() + "/state.bin";
    auto lockFd = HomeDir::openIfThere(home, "state.lock", O_RDONLY);
    if (!lockFd)
        return lockFd.error();
    std::optional<FlockGuard> guard;
    if (*lockFd) {
        auto g = sharedLock(**lockFd, std::chrono::steady_clock::now() + lockTimeout, longestPause);
        if (!g)
            return g.error();
        guard.emplace(std::move(g).value());
    }
    auto stateFd = HomeDir::openIfThere(home, "state.bin", O_RDONLY);
    if (!stateFd)
        return stateFd.error();
    if (*stateFd) {
        StateFile file(std::move(**stateFd));
        auto state = file.read();
        if (!state) {
            if (state.error().kind != ErrorKind::Corrupt && state.error().kind != ErrorKind::Unsupported)
                return state.error();
            if (view.corruptFile.empty()) {
                view.corruptFile = statePath;
                view.corruptReason = state.error().message;
            }
        } else {
            view.state = std::move(*state);
        }
    }
    if (!*limits && view.corruptFile.empty()) {
        // Lost limits are not "no limits" (see FileQuotaStore::lostLimits).
        if (auto lost = FileQuotaStore::lostLimits(home, view.state ? &*view.state : nullptr)) {
            view.corruptFile = limitsPath;
            view.limitsCorrupt = true;
            view.corruptReason = lost->message;
        }
    }
    return view;
}

} // namespace tollgate
