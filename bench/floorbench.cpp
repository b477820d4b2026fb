// Row 2: the floor — the file system calls of a state transaction with no logic at all.
#include "benches.h"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <stdexcept>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace bench {

namespace {

void check(bool ok, const char* what)
{
    if (!ok)
        throw std::runtime_error(std::string(what) + " failed: errno " + std::to_string(errno));
}

} // namespace

void benchFloor(const Config& c, std::vector<Row>& rows, Figures& f)
{
    const std::size_t n = f.stateBytes ? f.stateBytes : 4096;
    std::fprintf(stderr, "bench: 2. floor: open+flock+pread+pwrite+unlock(+close) of %zu bytes\n", n);
    TempDir dir("tollgate-bench-floor");
    const std::string path = dir.path() + "/floor.bin";
    std::string buf(n, 'x');
    {
        const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        check(fd >= 0, "open");
        check(::pwrite(fd, buf.data(), n, 0) == static_cast<ssize_t>(n), "pwrite");
        ::close(fd);
    }
    auto txn = [&](int fd) {
        check(::flock(fd, LOCK_EX) == 0, "flock");
        check(::pread(fd, buf.data(), n, 0) == static_cast<ssize_t>(n), "pread");
        buf[0] = static_cast<char>(buf[0] + 1);
        check(::pwrite(fd, buf.data(), n, 0) == static_cast<ssize_t>(n), "pwrite");
        check(::flock(fd, LOCK_UN) == 0, "unlock");
    };
    auto run = [&](auto&& once) {
        std::vector<std::int64_t> samples;
        samples.reserve(static_cast<std::size_t>(c.calls));
        for (int i = 0; i < c.warmup + c.calls; ++i) {
            const std::int64_t t0 = monoNs();
            once();
            const std::int64_t t1 = monoNs();
            if (i >= c.warmup)
                samples.push_back(t1 - t0);
        }
        return summarize(std::move(samples));
    };

    const Summary a = run([&] {
        const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        check(fd >= 0, "open");
        txn(fd);
        check(::close(fd) == 0, "close");
    });
    Row ra { "2a", "floor: open + flock + pread + pwrite + unlock + close", {}, {}, {}, {}, 0,
        std::to_string(n) + " B read and written, no logic" };
    fillLatency(ra, a);
    ra.opsPerSec = 1e6 / a.meanUs;
    rows.push_back(ra);
    f.floorOpenCloseP50Us = a.p50Us;

    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    check(fd >= 0, "open");
    const Summary b = run([&] { txn(fd); });
    ::close(fd);
    Row rb { "2b", "floor, fd kept open: flock + pread + pwrite + unlock", {}, {}, {}, {}, 0,
        std::to_string(n) + " B; the store keeps its fds open too" };
    fillLatency(rb, b);
    rb.opsPerSec = 1e6 / b.meanUs;
    rows.push_back(rb);
    f.floorKeptOpenP50Us = b.p50Us;

    // 2c: the exact system calls one acquire transaction makes (strace of row 1): flock,
    // fstat limits.json, fstat state.bin, pread 1 KiB from each state slot, pwrite the new
    // slot, fstat history.jsonl, append one history line, unlock, getpid — still no logic.
    const std::string lockPath = dir.path() + "/state.lock";
    const std::string statePath = dir.path() + "/state.bin";
    const std::string limitsPath = dir.path() + "/limits.json";
    const std::string historyPath = dir.path() + "/history.jsonl";
    constexpr off_t SLOT = 1 << 20;
    const int lockFd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    const int stateFd = ::open(statePath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    const int limitsFd = ::open(limitsPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    
    const int historyFd = ::open(historyPath.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    check(lockFd >= 0 && stateFd >= 0 && limitsFd >= 0 && historyFd >= 0, "open");
    check(::pwrite(limitsFd, "{}", 2, 0) == 2, "pwrite");
    check(::pwrite(stateFd, buf.data(), n, 0) == static_cast<ssize_t>(n), "pwrite");
    check(::pwrite(stateFd, buf.data(), n, SLOT) == static_cast<ssize_t>(n), "pwrite");
    std::string page(1024, '\0');
    const std::string line(107, 'h'); // the size of one "admit" history line in row 1
    std::uint64_t seq = 0;
    const Summary s = run([&] {
        struct stat st {};
        check(::flock(lockFd, LOCK_EX | LOCK_NB) == 0, "flock");
        check(::fstat(limitsFd, &st) == 0, "fstat");
        check(::fstat(stateFd, &st) == 0, "fstat");
        check(::pread(stateFd, page.data(), page.size(), 0) > 0, "pread");
        check(::pread(stateFd, page.data(), page.size(), SLOT) > 0, "pread");
        ++seq;
        check(::pwrite(stateFd, buf.data(), n, static_cast<off_t>(seq % 2) * SLOT) == static_cast<ssize_t>(n), "pwrite");
        check(::fstat(historyFd, &st) == 0, "fstat");
        check(::write(historyFd, line.data(), line.size()) == static_cast<ssize_t>(line.size()), "write");
        check(::flock(lockFd, LOCK_UN) == 0, "unlock");
        (void)::getpid();
    });
    ::close(lockFd);
    ::close(stateFd);
    ::close(limitsFd);
    ::close(historyFd);
    Row rc { "2c", "the store's own syscalls per acquire, no logic", {}, {}, {}, {}, 0,
        "flock, 3× fstat, 2× pread 1 KiB, pwrite " + std::to_string(n) + " B, append 107 B, unlock, getpid" };
    fillLatency(rc, s);
    rc.opsPerSec = 1e6 / s.meanUs;
    rows.push_back(rc);
}

} // namespace bench
