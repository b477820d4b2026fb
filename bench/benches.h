#pragma once

// The measurements of tollgate-bench. Each appends rows to the result table and fills the
// figures the targets are judged on.

#include "benchutil.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bench {

struct Config {
    int calls = 20000; // timed calls per latency row (after warm-up)
    int warmup = 2000;
    int windowCalls = 5000; // timed calls per window-size row
    int durationMs = 2000; // per aggregate-throughput configuration
    int rounds = 500; // wake-up ping-pong hand-overs
    int redisCalls = 10000;
    bool redis = true;
    std::string redisServer = "redis-server";
};

// The figures the targets are judged on (nullopt: not measured).
struct Figures {
    std::optional<double> acquireP50Us;
    std::optional<double> floorOpenCloseP50Us;
    std::optional<double> floorKeptOpenP50Us;
    std::optional<double> agg1PerSec;
    std::optional<double> agg8PerSec;
    std::optional<double> agg8P99Us; // per-call latency with 8 processes
    std::vector<std::pair<std::int64_t, double>> windowP50Us; // limit -> p50
    std::vector<std::pair<std::int64_t, double>> windowP99Us;
    std::optional<double> wakeP99Us;
    std::optional<double> redis8PerSec;
    std::optional<double> redisHomeP99Us; // Tollgate's Redis home, 1 client
    std::optional<double> redisHomeCommandsPerAcquire;
    std::optional<double> redisHome8PerSec;
    std::optional<double> redisBucket8SameRun; // the bare bucket, measured next to it
    std::optional<double> redisLowerBound8PerSec; // row 6f: what any admission with the home's semantics can reach at most
    std::string redisSkipped; // why, when the Redis rows were skipped
    std::size_t stateBytes = 0; // encoded state + slot header, as measured after row 1
};

void benchAcquire(const Config& c, std::vector<Row>& rows, Figures& f);
void benchFloor(const Config& c, std::vector<Row>& rows, Figures& f);
void benchAggregate(const Config& c, std::vector<Row>& rows, Figures& f);
void benchWindowSizes(const Config& c, std::vector<Row>& rows, Figures& f);
void benchWakeup(const Config& c, std::vector<Row>& rows, Figures& f);
void benchRedis(const Config& c, std::vector<Row>& rows, Figures& f);

} // namespace bench
