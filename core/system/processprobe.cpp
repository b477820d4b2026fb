#include "system/processprobe.h"

#include "system/fd.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <limits>
#include <memory>
#include <string>
#include <unistd.h>

namespace tollgate {

namespace {

constexpr std::int64_t START_TIME_SLACK = ProcessProbe::START_TIME_SLACK;

std::optional<std::string> readSmallFile(const std::string& path)
{
    auto fd = Fd::open(path, O_RDONLY);
    if (!fd)
        return std::nullopt;
    std::string buf(4096, '\0');
    auto n = fd->preadSome(buf.data(), buf.size(), 0);
    if (!n)
        return std::nullopt;
    buf.resize(*n);
    return buf;
}

std::optional<std::int64_t> bootTime()
{
    static const std::optional<std::int64_t> cached = []() -> std::optional<std::int64_t> {
        auto fd = Fd::open("/proc/stat", O_RDONLY);
        if (!fd)
            return std::nullopt;
        auto text = fd->readAll(1 << 20);
        if (!text)
            return std::nullopt;
        const auto pos = text->find("\nbtime ");
        if (pos == std::string::npos)
            return std::nullopt;
        return std::strtoll(text->c_str() + pos + 7, nullptr, 10);
    }();
    return cached;
}

struct StatFields
{
    char state = '?';
    std::int64_t parent = 0; // field 4 (ppid)
    unsigned long long startTicks = 0;
};

std::optional<StatFields> readStat(std::int64_t pid)
{
    auto text = readSmallFile("/proc/" + std::to_string(pid) + "/stat");
    if (!text)
        return std::nullopt;
    // Field 2 (comm) is in parentheses and may itself contain spaces and ')'.
    const auto close = text->rfind(')');
    if (close == std::string::npos || close + 2 >= text->size())
        return std::nullopt;
    StatFields out;
    out.state = (*text)[close + 2];
    out.parent = std::strtoll(text->c_str() + close + 4, nullptr, 10);
    // Fields after comm: 3 (state) is index 0, so field 22 (starttime) is index 19.
    std::size_t pos = close + 2;
    for (int field = 0; field < 19; ++field) {
        pos = text->find(' ', pos);
        if (pos == std::string::npos)
            return std::nullopt;
        ++pos;
    }
    out.startTicks = std::strtoull(text->c_str() + pos, nullptr, 10);
    return out;
}

// The boottime offset of our time namespace, in clock ticks (0 outside one, or on a kernel
// without them). The kernel adds the *reader's* offset to every start time in /proc/PID/stat,
// so two processes in different time namespaces (a container restored by CRIU, `unshare
// --time`) see different start times for one process: each takes its own offset off, and
// what is recorded and compared is the start time of the initial time namespace. A process's
// own time namespace never changes (setns and unshare only move its children), so once.
std::int64_t ownBoottimeOffsetTicks()
{
    static const std::int64_t ticks = [] {
        auto text = readSmallFile("/proc/self/timens_offsets");
        const long perSecond = ::sysconf(_SC_CLK_TCK);
        if (!text || perSecond <= 0)
            return std::int64_t(0);
        const auto pos = text->find("boottime");
        if (pos == std::string::npos)
            return std::int64_t(0);
        char* end = nullptr;
        const long long seconds = std::strtoll(text->c_str() + pos + 8, &end, 10);
        const long long nanos = std::strtoll(end, nullptr, 10);
        // The kernel adds the offset in nanoseconds before it divides into ticks: rounded the
        // same way for the offsets unshare and CRIU set (whole ticks).
        const long long tickNs = 1000000000LL / perSecond;
        return static_cast<std::int64_t>(seconds * perSecond + nanos / tickNs);
    }();
    return ticks;
}

// Whether /proc is the procfs of our own pid namespace: /proc/self then names our own pid.
// In a namespace that kept its parent's /proc (unshare --pid without --mount-proc) the
// numbers under /proc are the parent namespace's, and reading /proc/PID would be about
// another process.
bool procIsOurs()
{
    static const bool ours = [] {
        char buf[32] = {};
        const ssize_t n = ::readlink("/proc/self", buf, sizeof buf - 1);
        return n > 0 && std::strtoll(buf, nullptr, 10) == static_cast<long long>(::getpid());
    }();
    return ours;
}

} // namespace

std::uint64_t ProcessProbe::pidNamespace() const
{
    // The namespace cannot change under a running process (setns/unshare of CLONE_NEWPID
    // only affect its children), so once is enough. stat follows the magic link to nsfs.
    static const std::uint64_t ns = [] {
        struct stat st
        {
        };
        return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino)
                                                     : std::uint64_t(0);
    }();
    return ns;
}

std::optional<std::uint64_t> ProcessProbe::startTicks(std::int64_t pid) const
{
    if (pid <= 0 || pid > INT32_MAX || !procIsOurs())
        return std::nullopt;
    // Every acquire records its own start time: read /proc/self/stat once per process, not
    // once per call (it cost as much as the whole transaction). Keyed by pid, so a forked
    // child reads its own.
    static thread_local std::int64_t cachedPid = 0;
    static thread_local std::uint64_t selfTicks = 0;
    const bool self = pid == selfPid();
    if (self && cachedPid == pid)
        return selfTicks;
    const auto st = readStat(pid);
    if (!st || st->startTicks == 0)
        return std::nullopt;
    // In the initial time namespace's terms (see ownBoottimeOffsetTicks).
    const auto ticks = static_cast<std::uint64_t>(static_cast<std::int64_t>(st->startTicks) - ownBoottimeOffsetTicks());
    if (self) {
        cachedPid = pid;
        selfTicks = ticks;
    }
    return ticks;
}

Liveness ProcessProbe::holderLiveness(std::int64_t pid, std::uint64_t recordedTicks) const
{
    if (liveness(pid, std::nullopt) == Liveness::Dead)
        return Liveness::Dead;
    if (recordedTicks != 0) {
        if (auto now = startTicks(pid); now && *now != recordedTicks)
            return Liveness::Dead; // the number now names another process
    }
    return Liveness::Alive;
}

Liveness ProcessProbe::liveness(std::int64_t pid, std::optional<std::int64_t> heldSince) const
{
    if (pid <= 0 || pid > INT32_MAX)
        return Liveness::Dead;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
        return Liveness::Dead;
    if (auto st = procIsOurs() ? readStat(pid) : std::nullopt; st && (st->state == 'Z' || st->state == 'X'))
        return Liveness::Dead;
    if (heldSince) {
        // heldSince comes from a file anyone may have forged: compare without overflowing.
        if (auto started = startTime(pid);
            started && *heldSince<INT64_MAX - START_TIME_SLACK&& * started> * heldSince + START_TIME_SLACK)
            return Liveness::Dead; // the number was reused by a younger process
    }
    return Liveness::Alive;
}

bool ProcessProbe::exists(std::int64_t pid) const
{
    if (pid <= 0 || pid > INT32_MAX)
        return false;
    if (pid == selfPid())
        return true; // this process is running: the slots of a busy proxy are its own
    return !(::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH);
}

std::optional<std::int64_t> ProcessProbe::startTime(std::int64_t pid) const
{
    if (!procIsOurs())
        return std::nullopt;
    const auto boot = bootTime();
    const auto st = readStat(pid);
    const long ticks = ::sysconf(_SC_CLK_TCK);
    if (!boot || !st || ticks <= 0)
        return std::nullopt;
    return *boot + static_cast<std::int64_t>(st->startTicks / static_cast<unsigned long long>(ticks));
}

std::string ProcessProbe::commandLine(std::int64_t pid) const
{
    auto text = readSmallFile("/proc/" + std::to_string(pid) + "/cmdline");
    if (!text)
        return {};
    while (!text->empty() && text->back() == '\0')
        text->pop_back();
    for (char& c : *text) {
        if (c == '\0')
            c = ' ';
    }
    return *text;
}

std::optional<std::int64_t> ProcessProbe::userOf(std::int64_t pid) const
{
    // The real uid from /proc/PID/status, not the owner of /proc/PID: a process that dropped
    // privileges without exec is not dumpable and its /proc directory belongs to root.
    if (pid <= 0 || pid > INT32_MAX || !procIsOurs())
        return std::nullopt;
    auto text = readSmallFile("/proc/" + std::to_string(pid) + "/status");
    if (!text)
        return std::nullopt;
    const auto at = text->find("\nUid:");
    if (at == std::string::npos)
        return std::nullopt;
    const char* p = text->c_str() + at + 5;
    char* end = nullptr;
    errno = 0;
    const long long uid = std::strtoll(p, &end, 10);
    if (end == p || errno != 0 || uid < 0)
        return std::nullopt;
    return static_cast<std::int64_t>(uid);
}

std::int64_t ProcessProbe::selfPid()
{
    // getpid() is a real system call and every acquire asks several times; cache it, and
    // forget it in a forked child.
    static std::atomic<pid_t> cached { 0 };
    static const bool registered = [] {
        ::pthread_atfork(nullptr, nullptr, [] { cached.store(0); });
        return true;
    }();
    (void)registered;
    pid_t pid = cached.load(std::memory_order_relaxed);
    if (pid == 0) {
        pid = ::getpid();
        cached.store(pid, std::memory_order_relaxed);
    }
    return pid;
}

std::int64_t ProcessProbe::parentPid()
{
    return ::getppid();
}

namespace {

std::string procText(const std::string& path, std::size_t max)
{
    auto fd = Fd::open(path, O_RDONLY);
    if (!fd)
        return {};
    auto text = fd->readAll(max);
    return text ? std::move(*text) : std::string();
}

std::string procLink(const std::string& path)
{
    char buf[256];
    const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    return n > 0 && static_cast<std::size_t>(n) < sizeof buf ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// The parent of `pid` (0 when /proc does not tell).
pid_t procParent(pid_t pid)
{
    const auto stat = readStat(pid);
    return stat && stat->parent > 0 && stat->parent <= std::numeric_limits<pid_t>::max()
        ? static_cast<pid_t>(stat->parent)
        : 0;
}

// Does `pid` hold the read end of the pipe `link` ("pipe:[N]", as readlink shows it)? A
// command substitution's shell reads what its subshell writes; a shell whose own output merely
// goes to the same pipe (`script | tee`, an inherited stdout) holds the write end only.
bool readsPipe(pid_t pid, const std::string& link)
{
    const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    const int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirFd < 0)
        return false;
    std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(dirFd), &::closedir);
    if (!d) {
        ::close(dirFd);
        return false;
    }
    int seen = 0;
    while (const dirent* e = ::readdir(d.get())) {
        if (e->d_name[0] == '.')
            continue;
        if (++seen > 4096) // a shell holds a handful; bounded either way
            return false;
        if (procLink(dir + "/" + e->d_name) != link)
            continue;
        // "flags:\t0100000\n" (octal) in /proc/PID/fdinfo/N.
        const auto info = readSmallFile("/proc/" + std::to_string(pid) + "/fdinfo/" + e->d_name);
        const auto at = info ? info->find("flags:") : std::string::npos;
        if (at == std::string::npos)
            continue;
        const long flags = std::strtol(info->c_str() + at + 6, nullptr, 8);
        if ((flags & O_ACCMODE) == O_RDONLY)
            return true;
    }
    return false;
}

} // namespace

std::int64_t ProcessProbe::callerPid()
{
    pid_t holder = ::getppid();
    for (int depth = 0; depth < 16 && holder > 1; ++depth) {
        const std::string self = "/proc/" + std::to_string(holder);
        const pid_t above = procParent(holder);
        if (above <= 1)
            break;
        const std::string up = "/proc/" + std::to_string(above);
        const std::string out = procLink(self + "/fd/1");
        if (!out.starts_with("pipe:"))
            break;
        const std::string exe = procLink(self + "/exe");
        if (exe.empty() || exe != procLink(up + "/exe"))
            break;
        const std::string cmdline = procText(self + "/cmdline", 65536);
        if (cmdline.empty() || cmdline != procText(up + "/cmdline", 65536))
            break;
        if (!readsPipe(above, out))
            break;
        // Still the parent of what we looked at: not a reused pid met half-way.
        if (procParent(holder) != above)
            break;
        holder = above;
    }
    return holder;
}

} // namespace tollgate
