// lockworker: a separate process that hammers a lock file through the core library, for the
// cross-process tests (locks behave differently inside one process, so these must be real
// processes). It checks exclusion independently of the lock itself: while it believes it holds
// the lock it creates "<path>.inside" with O_EXCL, which fails if anyone else is inside too.
//
//   lockworker hammer PATH ITERATIONS   try-acquire / verify / release in a loop
//   lockworker storm  PATH ITERATIONS   the same, while forked children keep leaving behind
//                                       locks whose holder has died (stale takeover storm)
// Prints one line: "wins=N overlaps=N mismatches=N lost=N takeovers=N abandoned=N".

#include "base/offsetclock.h"
#include "base/systemclock.h"
#include "lock/lockfile.h"
#include "system/fd.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <random>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace tollgate;

namespace {

struct Counts
{
    long wins = 0, overlaps = 0, mismatches = 0, lost = 0, takeovers = 0, abandoned = 0;
};

// A child that takes the lock (if it can) as itself and dies holding it.
void abandonLock(const std::string& path, Counts& c)
{
    const pid_t child = ::fork();
    if (child == 0) {
        SystemClock realClock;
        ProcessProbe probe;
        auto lock = LockFile::open(path, realClock, probe);
        LockOptions o;
        o.tag = "abandoned";
        bool won = false;
        if (lock) {
            auto r = lock->tryAcquire(o);
            won = r && r->acquired;
        }
        ::_exit(won ? 0 : 1);
    }
    if (child > 0) {
        int status = 0;
        while (::waitpid(child, &status, 0) < 0 && errno == EINTR) { }
        ++c.abandoned;
    }
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 4) {
        std::fprintf(stderr, "usage: lockworker hammer|storm PATH ITERATIONS\n");
        return 2;
    }
    const std::string mode = argv[1];
    const std::string path = argv[2];
    const long iterations = std::atol(argv[3]);
    const bool storm = mode == "storm";

    // In a storm the workers look at the world two hours ahead, so every lock a dead child
    // left (stamped with the real time) is old enough to be stale, while their own locks
    // (stamped two hours ahead) are fresh.
    OffsetClock clock(storm ? std::chrono::hours(2) : std::chrono::hours(0));
    ProcessProbe probe;
    auto lock = LockFile::open(path, clock, probe);
    if (!lock) {
        std::fprintf(stderr, "%s\n", lock.error().describe().c_str());
        return 3;
    }
    const std::string marker = path + ".inside";
    const std::string self = std::to_string(::getpid());
    std::mt19937 rng(static_cast<unsigned>(::getpid()));
    Counts c;
    LockOptions options;
    options.tag = "worker " + self;
    options.staleSeconds = 3600;

    for (long i = 0; i < iterations; ++i) {
        if (storm && rng() % 3 == 0)
            abandonLock(path, c);
        auto r = lock->tryAcquire(options);
        if (!r) {
            std::fprintf(stderr, "tryAcquire: %s\n", r.error().describe().c_str());
            return 3;
        }
        if (!r->acquired)
            continue;
        ++c.wins;
        if (r->tookOverStale)
            ++c.takeovers;
        const int m = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        if (m < 0)
            ++c.overlaps;
        auto fd = Fd::openRegular(path, O_RDONLY);
        auto content = fd ? fd->readAll(4096) : Result<std::string>(fd.error());
        if (!content || content->rfind("pid=" + self + "\n", 0) != 0)
            ++c.mismatches;
        if (m >= 0) {
            ::close(m);
            ::unlink(marker.c_str());
        }
        auto rel = lock->release(::getpid(), false);
        if (!rel || rel->state != ReleaseState::Released)
            ++c.lost;
    }
    std::printf("wins=%ld overlaps=%ld mismatches=%ld lost=%ld takeovers=%ld abandoned=%ld\n", c.wins,
        c.overlaps, c.mismatches, c.lost, c.takeovers, c.abandoned);
    return 0;
}
