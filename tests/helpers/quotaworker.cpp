// quotaworker: a caller process for the cross-process quota tests. It acquires through the
// core library (as any client would), "calls the API" for a random time while holding its
// parallel slot, releases, and logs — in its own file, independently of Tollgate — when it
// asked, when it was admitted and when it let go:
//
//   quotaworker HOME PROVIDER PREFIX ITERATIONS LOGFILE SEED MAXTOKENS MAXHOLDMS
//   log line: <asked_us> <admitted_us> <released_us> <fence> <tokens> <caller> <release_asked_us>
//   (released: before the release attempt that succeeded; release_asked: before the first)
// (times: CLOCK_REALTIME microseconds, the same clock Tollgate stamps its history with).

#include "backend/quotalimiter.h"
#include "backend/storefactory.h"
#include "base/systemclock.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>

using namespace tollgate;

namespace {

long long nowUs()
{
    return std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::system_clock::now().time_since_epoch())
        .count();
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 9 && argc != 10) {
        std::fprintf(stderr,
            "usage: quotaworker HOME PROVIDER PREFIX ITERATIONS LOGFILE SEED MAXTOKENS MAXHOLDMS [retry]\n");
        return 2;
    }
    // retry: a failed acquire (the store unreachable) is logged as "error ..." and tried again
    // until 120 s have passed, as a long-running caller rides out a Redis restart.
    const bool retry = argc == 10 && std::string(argv[9]) == "retry";
    const auto giveUpAt = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    const std::string home = argv[1];
    const std::string provider = argv[2];
    const std::string prefix = argv[3];
    const long iterations = std::atol(argv[4]);
    FILE* log = std::fopen(argv[5], "w");
    std::mt19937_64 rng(std::strtoull(argv[6], nullptr, 10));
    const long maxTokens = std::atol(argv[7]);
    const long maxHoldMs = std::atol(argv[8]);
    if (!log) {
        std::perror(argv[5]);
        return 3;
    }
    SystemClock clock;
    ProcessProbe probe;
    auto store = StoreFactory::openBackend(home, clock, probe); // a directory or a Redis URL
    // A worker started while Redis restarts rides that out too (opening connects).
    while (!store && retry && std::chrono::steady_clock::now() < giveUpAt) {
        std::fprintf(log, "error %s\n", store.error().describe().c_str());
        std::fflush(log);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        store = StoreFactory::openBackend(home, clock, probe);
    }
    if (!store) {
        std::fprintf(stderr, "%s\n", store.error().describe().c_str());
        return 3;
    }
    QuotaLimiter limiter(**store, clock, probe);
    for (long i = 0; i < iterations; ++i) {
        AdmitRequest r;
        r.provider = provider;
        r.caller = prefix + "-" + std::to_string(rng() % 4);
        r.tokens = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(maxTokens + 1));
        r.wantsSlot = true;
        const long long asked = nowUs();
        auto permit = limiter.acquire(r, clock.now() + std::chrono::seconds(120));
        const long long admitted = nowUs();
        if (!permit && permit.error().path.empty() && retry) {
            // Refused by the quota itself (its window spent until past the deadline), not by
            // a store that did not answer: this worker is done.
            std::fprintf(log, "refused %s\n", permit.error().describe().c_str());
            break;
        }
        if (!permit) {
            std::fprintf(stderr, "acquire: %s\n", permit.error().describe().c_str());
            if (retry && std::chrono::steady_clock::now() < giveUpAt) {
                std::fprintf(log, "error %s\n", permit.error().describe().c_str());
                std::fflush(log);
                std::this_thread::sleep_for(std::chrono::milliseconds(50)); // the worker's own pace
                --i;
                continue;
            }
            return 3;
        }
        if (maxHoldMs > 0) // the simulated API call
            std::this_thread::sleep_for(
                std::chrono::milliseconds(static_cast<long>(rng() % static_cast<std::uint64_t>(maxHoldMs))));
        const std::uint64_t fence = permit->fence();
        long long released = 0; // just before the release that succeeded: inside the tenure
        // Just before the first attempt: the tenure surely lasted until here. A failed attempt
        // may still have freed the slot on the server (its answer lost in a stall), so from
        // here to `released` the slot may be anyone's.
        const long long releaseAsked = nowUs();
        for (;;) {
            released = nowUs();
            auto rel = permit->release();
            if (rel)
                break;
            std::fprintf(stderr, "release: %s\n", rel.error().describe().c_str());
            // Not given back (the store was down): tried again, as a careful caller does —
            // the slot stays taken while this process lives. Logged as held until then.
            if (!retry || std::chrono::steady_clock::now() >= giveUpAt)
                return 3;
            std::fprintf(log, "error %s\n", rel.error().describe().c_str());
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        std::fprintf(log, "%lld %lld %lld %llu %lld %s %lld\n", asked, admitted, released,
            static_cast<unsigned long long>(fence), static_cast<long long>(r.tokens), r.caller.c_str(),
            releaseAsked);
        std::fflush(log);
    }
    std::fclose(log);
    return 0;
}
