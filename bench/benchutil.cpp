#include "benchutil.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <poll.h>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace bench {

std::int64_t monoNs()
{
    struct timespec ts {};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

Summary summarize(std::vector<std::int64_t> v)
{
    Summary s;
    s.n = v.size();
    if (v.empty())
        return s;
    std::sort(v.begin(), v.end());
    // Nearest rank: the smallest sample with at least q of all samples at or below it.
    auto rank = [&](double q) {
        auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
        k = std::clamp<std::size_t>(k, 1, v.size());
        return static_cast<double>(v[k - 1]) / 1000.0;
    };
    s.p50Us = rank(0.50);
    s.p99Us = rank(0.99);
    s.p999Us = rank(0.999);
    s.maxUs = static_cast<double>(v.back()) / 1000.0;
    const long double sum = std::accumulate(v.begin(), v.end(), 0.0L);
    s.meanUs = static_cast<double>(sum / static_cast<long double>(v.size()) / 1000.0L);
    return s;
}

void fillLatency(Row& row, const Summary& s)
{
    row.p50Us = s.p50Us;
    row.p99Us = s.p99Us;
    row.meanUs = s.meanUs;
    row.n = s.n;
}

TempDir::TempDir(const std::string& prefix)
{
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + ".XXXXXX";
    if (!::mkdtemp(tmpl.data()))
        throw std::runtime_error("mkdtemp " + tmpl + " failed");
    m_path = tmpl;
    m_owner = ::getpid();
}

TempDir::~TempDir()
{
    if (m_owner == ::getpid()) {
        std::error_code ec;
        std::filesystem::remove_all(m_path, ec);
    }
}

void* sharedAlloc(std::size_t bytes)
{
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        throw std::runtime_error("mmap shared failed");
    return p;
}

void sharedFree(void* p, std::size_t bytes)
{
    if (p)
        ::munmap(p, bytes);
}

int readByte(int fd, std::int64_t deadlineNs, char& out)
{
    for (;;) {
        const std::int64_t left = deadlineNs - monoNs();
        if (left <= 0)
            return -1;
        struct pollfd p { fd, POLLIN, 0 };
        const int rc = ::poll(&p, 1, static_cast<int>(left / 1000000 + 1));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return -1;
        const ssize_t n = ::read(fd, &out, 1);
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -1 : static_cast<int>(n);
    }
}

void sleepUs(std::int64_t us)
{
    struct timespec ts { static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000 };
    while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

namespace {

void killAll(const std::vector<pid_t>& pids)
{
    for (pid_t p : pids)
        ::kill(p, SIGKILL);
    for (pid_t p : pids)
        ::waitpid(p, nullptr, 0);
}

} // namespace

std::optional<std::int64_t> runWorkers(int count, const Workers& w, int timeoutMs, std::string& error)
{
    int ready[2];
    int go[2];
    if (::pipe(ready) != 0 || ::pipe(go) != 0) {
        error = "pipe failed";
        return std::nullopt;
    }
    std::fflush(nullptr); // a child must not inherit (and later flush) buffered output
    std::vector<pid_t> pids;
    for (int i = 0; i < count; ++i) {
        const pid_t pid = ::fork();
        if (pid < 0) {
            error = "fork failed";
            killAll(pids);
            return std::nullopt;
        }
        if (pid == 0) {
            ::close(ready[0]);
            ::close(go[1]);
            int code = 3;
            try {
                const bool ok = w.setup(i);
                const char c = ok ? '1' : '0';
                if (::write(ready[1], &c, 1) != 1 || !ok)
                    ::_exit(2);
                char g;
                // The parent closes its end of `go`: every worker sees EOF at the same time.
                if (::read(go[0], &g, 1) != 0)
                    ::_exit(2);
                code = w.run(i);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "bench worker %d: %s\n", i, e.what());
            }
            ::_exit(code);
        }
        pids.push_back(pid);
    }
    ::close(ready[1]);
    ::close(go[0]);
    const std::int64_t deadline = monoNs() + static_cast<std::int64_t>(timeoutMs) * 1000000;
    bool ok = true;
    for (int i = 0; i < count; ++i) {
        char c = 0;
        if (readByte(ready[0], deadline, c) != 1 || c != '1') {
            ok = false;
            break;
        }
    }
    ::close(ready[0]);
    if (!ok) {
        error = "a worker failed to set up";
        ::close(go[1]);
        killAll(pids);
        return std::nullopt;
    }
    const std::int64_t start = monoNs();
    ::close(go[1]);
    std::size_t done = 0;
    std::vector<bool> reaped(pids.size(), false);
    while (done < pids.size()) {
        for (std::size_t i = 0; i < pids.size(); ++i) {
            if (reaped[i])
                continue;
            int status = 0;
            const pid_t r = ::waitpid(pids[i], &status, WNOHANG);
            if (r == pids[i]) {
                reaped[i] = true;
                ++done;
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                    ok = false;
                    error = "worker " + std::to_string(i) + " failed (status " + std::to_string(status) + ")";
                }
            }
        }
        if (done == pids.size())
            break;
        if (monoNs() > deadline) {
            error = "workers did not finish within " + std::to_string(timeoutMs) + " ms; killed";
            for (std::size_t i = 0; i < pids.size(); ++i) {
                if (!reaped[i]) {
                    ::kill(pids[i], SIGKILL);
                    ::waitpid(pids[i], nullptr, 0);
                }
            }
            return std::nullopt;
        }
        ::usleep(1000);
    }
    if (!ok)
        return std::nullopt;
    return start;
}

std::string fmtNumber(double v, int decimals)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

std::string fmtThousands(double v)
{
    const long long n = std::llround(v);
    const std::string digits = std::to_string(n < 0 ? -n : n);
    std::string out = n < 0 ? "-" : "";
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0)
            out.push_back(',');
        out.push_back(digits[i]);
    }
    return out;
}

} // namespace bench
