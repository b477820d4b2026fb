#pragma once

// The measurements of tollgate-bench. Each appends rows to the result table and fills the
// figures the targets are judged on.

#include "benchutil.h"
#include "quota/quotalimits.h"
#include "quota/quotapolicy.h"

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
    std::string budgetsConfig; // rows 7: "one", "six", "full" or "two" alone (for a profiler); empty: all
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
    // Rows 7 (issue 25): acquire with one limit against 6 limits and 10 classes, same run.
    std::optional<double> budgetOneP50Us; // 7a
    std::optional<double> budgetOneP99Us;
    std::optional<double> budgetSixP50Us; // 7b: 6 limits, no classes
    std::optional<double> budgetFullP50Us; // 7c: 6 limits and 10 classes, the model in two
    std::optional<double> budgetFullP99Us;
    std::optional<double> budgetTwoP50Us; // 7e: full with only the two classes the model is in
    std::optional<double> redisHomeP50Us; // 6c: the Redis home with one limit
    std::string redisBudgetsRefused; // why 7c could not be set on the Redis home (empty: measured)
    std::optional<double> redisBudgetsP50Us; // 7c on the Redis home, once its script enforces it
};

// The configurations of rows 7 (issue 25: "admission with 6 limits per provider and 10
// classes costs at most 1.5x today's single-limit acquire p50"), shared by the file home's rows
// and the Redis home's attempt. Every limit is far above what a bench run can use, so nothing
// ever waits: the rows measure the cost of checking and recording, not of waiting.
//   one   requests per 60 s, as row 1a (today's single-limit acquire); the request names no model
//   six   requests, input and output tokens per 60 s, and per day with a calendar day starting
//         at 00:00 in America/Los_Angeles; no classes
//   full  six, and 10 model classes each with the same 6 limits, 16 patterns among them; the
//         request names "claude-opus-4-5-20251101", which two classes match ("claude-opus-4*",
//         "claude-*"), and states 1,000 input and 500 output tokens
//   two   (not a target, for the analysis) full with only the two classes the model is in: what
//         full would cost if the state held no scope for the 8 classes the request never uses
enum class BudgetConfig { One, Six, Full, Two };
[[nodiscard]] tollgate::ProviderLimits budgetLimits(BudgetConfig config);
[[nodiscard]] tollgate::AdmitRequest budgetRequest(BudgetConfig config, const std::string& provider);

void benchAcquire(const Config& c, std::vector<Row>& rows, Figures& f);
void benchFloor(const Config& c, std::vector<Row>& rows, Figures& f);
void benchAggregate(const Config& c, std::vector<Row>& rows, Figures& f);
void benchWindowSizes(const Config& c, std::vector<Row>& rows, Figures& f);
void benchWakeup(const Config& c, std::vector<Row>& rows, Figures& f);
void benchBudgets(const Config& c, std::vector<Row>& rows, Figures& f);
void benchRedis(const Config& c, std::vector<Row>& rows, Figures& f);

} // namespace bench
