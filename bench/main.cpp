// tollgate-bench: measures the shared quota's costs side by side with their floor and with a
// Redis token bucket, and prints Markdown (the result table, then the targets).
//
//   tollgate-bench [--only LIST] [--calls N] [--warmup N] [--window-calls N]
//                  [--duration-ms N] [--rounds N] [--redis-calls N]
//                  [--redis-server PATH] [--no-redis] [--budgets-config one|six|full|two]
//
// LIST is a comma-separated subset of: acquire,floor,aggregate,window,wakeup,budgets,redis
// (floor needs acquire to size its I/O; it falls back to 4 KiB otherwise).

#include "benches.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

namespace {

const char* const SECTIONS[] = { "acquire", "floor", "aggregate", "window", "wakeup", "budgets", "redis" };

void usage()
{
    std::fprintf(stderr,
        "usage: tollgate-bench [--only acquire,floor,aggregate,window,wakeup,budgets,redis] [--calls N]\n"
        "                      [--warmup N] [--window-calls N] [--duration-ms N] [--rounds N] [--redis-calls N]\n"
        "                      [--redis-server PATH] [--no-redis] [--budgets-config one|six|full|two]\n");
}

int positive(const char* opt, const char* v)
{
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (!*v || *end || n < 1 || n > 100000000)
        throw std::invalid_argument(std::string(opt) + " needs a whole number from 1 to 100000000");
    return static_cast<int>(n);
}

std::string cell(const std::optional<double>& v, int decimals)
{
    return v ? bench::fmtNumber(*v, decimals) : "–";
}

void printTable(const std::vector<bench::Row>& rows)
{
    std::printf("| # | measurement | p50 µs | p99 µs | mean µs | ops/s | n | notes |\n");
    std::printf("|---|---|---:|---:|---:|---:|---:|---|\n");
    for (const auto& r : rows) {
        std::printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.id.c_str(), r.what.c_str(), cell(r.p50Us, 1).c_str(),
            cell(r.p99Us, 1).c_str(), cell(r.meanUs, 1).c_str(),
            r.opsPerSec ? bench::fmtThousands(*r.opsPerSec).c_str() : "–",
            r.n ? bench::fmtThousands(static_cast<double>(r.n)).c_str() : "–", r.note.c_str());
    }
}

void target(const char* name, const std::string& measured, const std::string& goal, std::optional<bool> pass,
    bool informational = false)
{
    const char* result = !pass ? "not measured"
        : informational        ? (*pass ? "(info) within" : "(info) outside")
        : *pass                ? "**PASS**"
                               : "**FAIL**";
    std::printf("| %s | %s | %s | %s |\n", name, measured.c_str(), goal.c_str(), result);
}

void printTargets(const bench::Figures& f)
{
    using bench::fmtNumber;
    using bench::fmtThousands;
    std::printf("| target | measured | goal | result |\n|---|---|---|---|\n");
    if (f.acquireP50Us && f.floorOpenCloseP50Us) {
        const double r = *f.acquireP50Us / *f.floorOpenCloseP50Us;
        target("acquire p50 vs floor (open+flock+pread+pwrite+unlock+close)",
            fmtNumber(*f.acquireP50Us, 1) + " / " + fmtNumber(*f.floorOpenCloseP50Us, 1) + " µs = " + fmtNumber(r, 2) + "×",
            "≤ 3×", r <= 3.0);
    } else {
        target("acquire p50 vs floor (open … close)", "–", "≤ 3×", std::nullopt);
    }
    if (f.acquireP50Us && f.floorKeptOpenP50Us) {
        const double r = *f.acquireP50Us / *f.floorKeptOpenP50Us;
        target("acquire p50 vs floor, fd kept open (like the store)",
            fmtNumber(*f.acquireP50Us, 1) + " / " + fmtNumber(*f.floorKeptOpenP50Us, 1) + " µs = " + fmtNumber(r, 2) + "×",
            "≤ 3×", r <= 3.0);
    } else {
        target("acquire p50 vs floor, fd kept open", "–", "≤ 3×", std::nullopt);
    }
    if (f.agg8PerSec) {
        if (f.redis8PerSec) {
            target("8-process aggregate vs Redis 8 clients (this run)",
                fmtThousands(*f.agg8PerSec) + " vs " + fmtThousands(*f.redis8PerSec) + " /s = "
                    + fmtNumber(*f.agg8PerSec / *f.redis8PerSec, 2) + "×",
                "≥ 1.2× (issue 8)", *f.agg8PerSec >= 1.2 * *f.redis8PerSec);
        } else {
            constexpr double REFERENCE = 35000; // shared/REFERENCE.md, same machine class
            target("8-process aggregate vs Redis 8 clients (REFERENCE.md figure: Redis not run)",
                fmtThousands(*f.agg8PerSec) + " vs 35,000 /s = " + fmtNumber(*f.agg8PerSec / REFERENCE, 2) + "×", "≥ 1×",
                *f.agg8PerSec >= REFERENCE);
        }
    } else {
        target("8-process aggregate vs Redis 8 clients", "–", "≥ 1.2×", std::nullopt);
    }
    if (f.agg8PerSec && f.agg1PerSec) {
        const double r = *f.agg8PerSec / *f.agg1PerSec;
        target("8-process aggregate vs 1 process (same run)",
            fmtThousands(*f.agg8PerSec) + " vs " + fmtThousands(*f.agg1PerSec) + " /s = " + fmtNumber(r, 2) + "×",
            "≥ 0.9× (issue 8)", r >= 0.9);
    }
    if (f.agg8P99Us) {
        target("per-call p99 with 8 processes", fmtNumber(*f.agg8P99Us / 1000.0, 2) + " ms", "< 2 ms (issue 8)",
            *f.agg8P99Us < 2000.0);
    }
    if (f.windowP50Us.size() >= 2) {
        double lo = f.windowP50Us.front().second;
        double hi = lo;
        std::string list;
        for (const auto& [limit, p50] : f.windowP50Us) {
            lo = std::min(lo, p50);
            hi = std::max(hi, p50);
            list += (list.empty() ? "" : " / ") + fmtNumber(p50, 1);
        }
        target("acquire p50 flat from 100 to 1,000,000 per window", list + " µs: max/min = " + fmtNumber(hi / lo, 2) + "×",
            "≤ 2×", hi / lo <= 2.0);
        double lo99 = f.windowP99Us.front().second;
        double hi99 = lo99;
        std::string list99;
        for (const auto& [limit, p99] : f.windowP99Us) {
            lo99 = std::min(lo99, p99);
            hi99 = std::max(hi99, p99);
            list99 += (list99.empty() ? "" : " / ") + fmtNumber(p99, 1);
        }
        target("the same for p99 (not a target)", list99 + " µs: max/min = " + fmtNumber(hi99 / lo99, 2) + "×", "≤ 2×",
            hi99 / lo99 <= 2.0, true);
    } else {
        target("acquire flat from 100 to 1,000,000 per window", "–", "≤ 2×", std::nullopt);
    }
    if (f.wakeP99Us) {
        target("wake-up p99", fmtNumber(*f.wakeP99Us, 1) + " µs", "< 5,000 µs", *f.wakeP99Us < 5000.0);
    } else {
        target("wake-up p99", "–", "< 5,000 µs", std::nullopt);
    }
    if (f.redisHomeP99Us)
        target("Redis home: 1-client acquire p99", fmtNumber(*f.redisHomeP99Us, 1) + " µs", "< 1,000 µs",
            *f.redisHomeP99Us < 1000.0);
    if (f.redisHomeCommandsPerAcquire)
        target("Redis home: round trips per uncontended acquire", fmtNumber(*f.redisHomeCommandsPerAcquire, 3),
            "1", *f.redisHomeCommandsPerAcquire <= 1.0005);
    if (f.redisHome8PerSec && f.redisBucket8SameRun)
        target("Redis home: 8-client aggregate vs the bare token bucket (same server, same run)",
            fmtThousands(*f.redisHome8PerSec) + " vs " + fmtThousands(*f.redisBucket8SameRun) + " /s = "
                + fmtNumber(*f.redisHome8PerSec / *f.redisBucket8SameRun, 2) + "×",
            "≥ 0.8×", *f.redisHome8PerSec >= 0.8 * *f.redisBucket8SameRun);
    if (f.budgetOneP50Us && f.budgetFullP50Us) {
        const double r = *f.budgetFullP50Us / *f.budgetOneP50Us;
        target("issue 25: acquire p50, 6 limits + 10 classes (7c) vs 1 limit (7a), file home, same run",
            fmtNumber(*f.budgetFullP50Us, 1) + " / " + fmtNumber(*f.budgetOneP50Us, 1) + " µs = " + fmtNumber(r, 2) + "×",
            "≤ 1.5×", r <= 1.5);
        const double r99 = *f.budgetFullP99Us / *f.budgetOneP99Us;
        target("the same for p99 (not a target)",
            fmtNumber(*f.budgetFullP99Us, 1) + " / " + fmtNumber(*f.budgetOneP99Us, 1) + " µs = " + fmtNumber(r99, 2) + "×",
            "≤ 1.5×", r99 <= 1.5, true);
        if (f.budgetTwoP50Us)
            target("(analysis) 7e, the same with only the 2 classes the model is in, vs 7a",
                fmtNumber(*f.budgetTwoP50Us, 1) + " / " + fmtNumber(*f.budgetOneP50Us, 1) + " µs = "
                    + fmtNumber(*f.budgetTwoP50Us / *f.budgetOneP50Us, 2) + "×",
                "≤ 1.5×", *f.budgetTwoP50Us <= 1.5 * *f.budgetOneP50Us, true);
    }
    if (f.redisHomeP50Us) {
        if (f.redisBudgetsP50Us) {
            const double r = *f.redisBudgetsP50Us / *f.redisHomeP50Us;
            target("issue 25: acquire p50, 6 limits + 10 classes (7d) vs 1 limit (6c), Redis home, same run",
                fmtNumber(*f.redisBudgetsP50Us, 1) + " / " + fmtNumber(*f.redisHomeP50Us, 1) + " µs = " + fmtNumber(r, 2)
                    + "×",
                "≤ 1.5×", r <= 1.5);
        } else {
            target("issue 25: acquire p50, 6 limits + 10 classes vs 1 limit, Redis home",
                "1 limit (6c): " + fmtNumber(*f.redisHomeP50Us, 1) + " µs; 6 limits + 10 classes: refused by the home ("
                    + f.redisBudgetsRefused + ")",
                "≤ 1.5×", std::nullopt);
        }
    }
    if (f.redisLowerBound8PerSec && f.redisBucket8SameRun)
        target("(reach of that target) row 6f, the lower-bound admission, vs the bucket",
            fmtThousands(*f.redisLowerBound8PerSec) + " vs " + fmtThousands(*f.redisBucket8SameRun) + " /s = "
                + fmtNumber(*f.redisLowerBound8PerSec / *f.redisBucket8SameRun, 2) + "×",
            "≥ 0.8× if the target can be met at all", *f.redisLowerBound8PerSec >= 0.8 * *f.redisBucket8SameRun);
    if (f.redisLowerBound8PerSec && f.redisHome8PerSec)
        target("issue 27: Redis home, 8 clients (6e) vs the lower-bound admission (6f), same run",
            fmtThousands(*f.redisHome8PerSec) + " vs " + fmtThousands(*f.redisLowerBound8PerSec) + " /s = "
                + fmtNumber(*f.redisHome8PerSec / *f.redisLowerBound8PerSec, 2) + "×",
            "≥ 0.8×", *f.redisHome8PerSec >= 0.8 * *f.redisLowerBound8PerSec);
}

} // namespace

int main(int argc, char** argv)
{
    bench::Config c;
    std::set<std::string> only;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            auto next = [&]() -> const char* {
                if (i + 1 >= argc)
                    throw std::invalid_argument(a + " needs a value");
                return argv[++i];
            };
            if (a == "--only") {
                std::stringstream ss(next());
                for (std::string s; std::getline(ss, s, ',');) {
                    bool known = false;
                    for (const char* k : SECTIONS)
                        known = known || s == k;
                    if (!known)
                        throw std::invalid_argument("unknown section '" + s + "'");
                    only.insert(s);
                }
            } else if (a == "--calls") {
                c.calls = positive("--calls", next());
            } else if (a == "--warmup") {
                c.warmup = positive("--warmup", next());
            } else if (a == "--window-calls") {
                c.windowCalls = positive("--window-calls", next());
            } else if (a == "--duration-ms") {
                c.durationMs = positive("--duration-ms", next());
            } else if (a == "--rounds") {
                c.rounds = positive("--rounds", next());
            } else if (a == "--redis-calls") {
                c.redisCalls = positive("--redis-calls", next());
            } else if (a == "--redis-server") {
                c.redisServer = next();
            } else if (a == "--budgets-config") {
                c.budgetsConfig = next();
                if (c.budgetsConfig != "one" && c.budgetsConfig != "six" && c.budgetsConfig != "full"
                    && c.budgetsConfig != "two")
                    throw std::invalid_argument("--budgets-config needs one, six, full or two");
            } else if (a == "--no-redis") {
                c.redis = false;
            } else if (a == "-h" || a == "--help") {
                usage();
                return 0;
            } else {
                throw std::invalid_argument("unknown option '" + a + "'");
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tollgate-bench: %s\n", e.what());
        usage();
        return 2;
    }
    auto want = [&](const char* s) { return only.empty() || only.count(s) != 0; };

    std::vector<bench::Row> rows;
    bench::Figures f;
    int failures = 0;
    auto section = [&](const char* name, void (*fn)(const bench::Config&, std::vector<bench::Row>&, bench::Figures&)) {
        if (!want(name))
            return;
        try {
            fn(c, rows, f);
        } catch (const std::exception& e) {
            ++failures;
            std::fprintf(stderr, "tollgate-bench: %s failed: %s\n", name, e.what());
            rows.push_back(bench::Row { "!", std::string(name) + " FAILED", {}, {}, {}, {}, 0, e.what() });
        }
    };
    section("acquire", bench::benchAcquire);
    section("floor", bench::benchFloor);
    section("aggregate", bench::benchAggregate);
    section("window", bench::benchWindowSizes);
    section("wakeup", bench::benchWakeup);
    section("budgets", bench::benchBudgets);
    if (want("redis")) {
        if (c.redis)
            section("redis", bench::benchRedis);
        else
            f.redisSkipped = "--no-redis given";
    }

    std::printf("### Results\n\n");
    printTable(rows);
    if (!f.redisSkipped.empty())
        std::printf("\n**Redis rows skipped:** %s\n", f.redisSkipped.c_str());
    if (f.stateBytes)
        std::printf("\nState transaction size used for the floor rows: %zu bytes (QuotaState::encode() + 24-byte slot "
                    "header).\n",
            f.stateBytes);
    std::printf("\n### Targets\n\n");
    printTargets(f);
    std::fflush(stdout);
    return failures ? 1 : 0;
}
