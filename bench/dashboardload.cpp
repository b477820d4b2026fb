// tollgate-dashload: the load that bench/dashboardscale.sh puts on a dashboard.
//
//   tollgate-dashload hold  HOME LOCKDIR LOCKS PROVIDERS SLOTS
//       Sets PROVIDERS providers' limits (parallel SLOTS, plenty of requests), takes
//       PROVIDERS*SLOTS parallel slots and LOCKS lock files in LOCKDIR, all held by this one
//       live process, prints "ready" and sleeps until killed. "Holders" here means what the
//       dashboard shows as holders: slots and lock files whose holder pid is alive. One process
//       holding them all is realistic for the dashboard's cost (it judges each row, and probes
//       each distinct pid), and keeps the bench from forking 20,000 processes.
//   tollgate-dashload admit HOME RATE SECONDS
//       Admits RATE requests per second (no slot) on provider "traffic" for SECONDS: each
//       admission rewrites state.bin and appends one history line, as a caller would.
//   tollgate-dashload churn LOCKFILE RATE SECONDS
//       Releases and takes LOCKFILE again RATE times per second for SECONDS (a short job run
//       over and over): each round unlinks the lock and link()s a new temp file to it, so the
//       directory changes, not the other lock files in it.

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "lock/lockfile.h"
#include "store/filequotastore.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace tollgate;

namespace {

int fail(const std::string& what, const Error& e)
{
    std::fprintf(stderr, "tollgate-dashload: %s: %s\n", what.c_str(), e.describe().c_str());
    return 3;
}

int hold(const std::string& home, const std::string& lockDir, long locks, long providers, long slots)
{
    SystemClock clock;
    ProcessProbe probe;
    auto store = FileQuotaStore::open(home, clock);
    if (!store)
        return fail("open " + home, store.error());
    QuotaLimiter limiter(**store, clock, probe);
    for (long p = 0; p < providers; ++p) {
        const std::string name = "provider" + std::to_string(p);
        ProviderLimits l;
        l.requests = 1000000;
        l.parallel = slots;
        l.maxHoldMs = 7LL * 24 * 3600 * 1000;
        if (auto ok = limiter.setLimits(name, l, "dashload"); !ok)
            return fail("limits " + name, ok.error());
        // One transaction per provider (PROVIDERS*SLOTS admissions one by one would rewrite
        // a growing state.bin each time): the slots are exactly what acquire() records.
        const std::int64_t nowMs
            = std::chrono::duration_cast<std::chrono::milliseconds>(clock.now().time_since_epoch()).count();
        auto done = (*store)->transact([&](QuotaTransaction& tx) -> Result<void> {
            ProviderState& ps = tx.state.ensureProvider(name);
            for (long s = 0; s < slots; ++s) {
                Slot slot;
                slot.fence = tx.state.nextFence++;
                slot.pid = ProcessProbe::selfPid();
                slot.pidNs = probe.pidNamespace();
                slot.startTicks = probe.startTicks(slot.pid).value_or(0);
                slot.acquiredMs = nowMs;
                slot.leaseUntilMs = nowMs + l.maxHoldMs;
                slot.caller = "holder-" + std::to_string(s);
                ps.slots.push_back(std::move(slot));
            }
            tx.changed = true;
            return {};
        });
        if (!done)
            return fail("slots of " + name, done.error());
    }
    for (long i = 0; i < locks; ++i) {
        char name[64];
        std::snprintf(name, sizeof name, "/job-%05ld.lock", i);
        auto lock = LockFile::open(lockDir + name, clock, probe);
        if (!lock)
            return fail(name, lock.error());
        LockOptions o;
        o.tag = "bench job " + std::to_string(i);
        o.staleSeconds = 0;
        auto got = lock->tryAcquire(o);
        if (!got)
            return fail(name, got.error());
    }
    std::printf("ready\n");
    std::fflush(stdout);
    for (;;)
        ::pause();
}

int admit(const std::string& home, long rate, long seconds)
{
    SystemClock clock;
    ProcessProbe probe;
    auto store = FileQuotaStore::open(home, clock);
    if (!store)
        return fail("open " + home, store.error());
    QuotaLimiter limiter(**store, clock, probe);
    ProviderLimits l;
    l.requests = 1LL << 30;
    if (auto ok = limiter.setLimits("traffic", l, "dashload"); !ok)
        return fail("limits traffic", ok.error());
    using namespace std::chrono;
    const auto start = steady_clock::now();
    const long total = rate * seconds;
    for (long i = 0; i < total; ++i) {
        std::this_thread::sleep_until(start + microseconds(i * 1000000 / rate));
        AdmitRequest r;
        r.provider = "traffic";
        r.caller = "caller-" + std::to_string(i % 7);
        r.tokens = 100;
        auto permit = limiter.acquire(r, clock.now());
        if (!permit)
            return fail("admit", permit.error());
    }
    return 0;
}

int churn(const std::string& path, long rate, long seconds)
{
    SystemClock clock;
    ProcessProbe probe;
    auto lock = LockFile::open(path, clock, probe);
    if (!lock)
        return fail("open " + path, lock.error());
    LockOptions first;
    first.staleSeconds = 0;
    if (auto got = lock->tryAcquire(first); !got || !got->acquired)
        return fail(
            "take", got ? Error::make(ErrorKind::Busy, path, "held by another process") : got.error());
    using namespace std::chrono;
    const auto start = steady_clock::now();
    const long total = rate * seconds;
    for (long i = 0; i < total; ++i) {
        std::this_thread::sleep_until(start + microseconds(i * 1000000 / rate));
        if (auto gone = lock->release(ProcessProbe::selfPid(), false); !gone)
            return fail("release " + path, gone.error());
        LockOptions o;
        o.tag = "churn " + std::to_string(i);
        o.staleSeconds = 0;
        auto got = lock->tryAcquire(o);
        if (!got)
            return fail("take " + path, got.error());
    }
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    const std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 6 && a[0] == "hold") {
        // Lock files are made by link(); nothing stays open, but be generous anyway.
        rlimit rl {};
        if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
            rl.rlim_cur = rl.rlim_max;
            (void)::setrlimit(RLIMIT_NOFILE, &rl);
        }
        return hold(a[1], a[2], std::atol(a[3].c_str()), std::atol(a[4].c_str()), std::atol(a[5].c_str()));
    }
    if (a.size() == 4 && a[0] == "admit")
        return admit(a[1], std::atol(a[2].c_str()), std::atol(a[3].c_str()));
    if (a.size() == 4 && a[0] == "churn")
        return churn(a[1], std::atol(a[2].c_str()), std::atol(a[3].c_str()));
    std::fprintf(stderr,
        "usage: tollgate-dashload hold HOME LOCKDIR LOCKS PROVIDERS SLOTS\n"
        "       tollgate-dashload admit HOME RATE SECONDS\n"
        "       tollgate-dashload churn LOCKFILE RATE SECONDS\n");
    return 2;
}
