#pragma once

// Small helpers for the hand-written benchmark harness: a monotonic clock in nanoseconds,
// percentiles, temporary directories, and forked worker processes with a start barrier.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace bench {

// CLOCK_MONOTONIC in nanoseconds (comparable across processes on one machine).
std::int64_t monoNs();

struct Summary {
    std::size_t n = 0;
    double p50Us = 0;
    double p99Us = 0;
    double p999Us = 0;
    double meanUs = 0;
    double maxUs = 0;
};
// Nearest-rank percentiles of durations given in nanoseconds.
Summary summarize(std::vector<std::int64_t> samplesNs);

// One line of the result table. Empty optionals print as "–".
struct Row {
    std::string id;
    std::string what;
    std::optional<double> p50Us;
    std::optional<double> p99Us;
    std::optional<double> meanUs;
    std::optional<double> opsPerSec;
    std::size_t n = 0;
    std::string note;
};

void fillLatency(Row& row, const Summary& s);

// A fresh 0700 directory under $TMPDIR (or /tmp), removed with its contents on destruction
// in the process that created it (forked children never remove it).
class TempDir {
public:
    explicit TempDir(const std::string& prefix);
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    [[nodiscard]] const std::string& path() const { return m_path; }

private:
    std::string m_path;
    int m_owner = 0;
};

// Memory shared with forked children (MAP_SHARED | MAP_ANONYMOUS), zeroed.
void* sharedAlloc(std::size_t bytes);
void sharedFree(void* p, std::size_t bytes);

// Forks `count` workers. Each runs setup(i) (returns false on failure), then waits for a
// common start signal, then run(i) (returns an exit code). The parent starts them all at
// once and returns the CLOCK_MONOTONIC time of the start signal, or nullopt if a worker
// failed to set up or exited non-zero (`error` says which). Waits at most `timeoutMs` for
// the workers to finish, then kills them (a bench never hangs).
struct Workers {
    std::function<bool(int)> setup;
    std::function<int(int)> run;
};
std::optional<std::int64_t> runWorkers(int count, const Workers& w, int timeoutMs, std::string& error);

// Reads one byte from fd, waiting until deadlineNs (monotonic). 1: read, 0: EOF, -1: timeout/error.
int readByte(int fd, std::int64_t deadlineNs, char& out);
// Sleeps about `us` microseconds.
void sleepUs(std::int64_t us);

std::string fmtNumber(double v, int decimals);
std::string fmtThousands(double v);

} // namespace bench
