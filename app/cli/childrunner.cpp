#include "childrunner.h"

#include "console.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unordered_map>
#include <utility>

extern char** environ;

namespace tollgate::cli {

namespace {

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_signal = 0;
std::atomic<bool> g_interrupted { false };

constexpr int FORWARDED[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

// While a child runs, a signal is passed on to it — unless the terminal sent it (SI_KERNEL: a
// Ctrl-C goes to the whole foreground group, the command included, which must not get it
// twice). Either way the signal is remembered: a child about to be started is then not.
void onRunnerSignal(int sig, siginfo_t* info, void*)
{
    g_signal = sig;
    g_interrupted.store(true);
    if (g_child > 0 && !(info && info->si_code == SI_KERNEL))
        ::kill(static_cast<pid_t>(g_child), sig);
}

struct sigaction g_pipeBefore; // SIGPIPE as tollgate found it: what the command gets

// errno of what is wrong with running `path` (0: it is an executable regular file).
int runnable(const std::string& path)
{
    struct stat st
    {
    };
    if (::stat(path.c_str(), &st) != 0)
        return errno;
    if (!S_ISREG(st.st_mode))
        return EACCES; // what execve says of a directory or a device
    return ::access(path.c_str(), X_OK) == 0 ? 0 : errno;
}

int codeFor(int err)
{
    return err == ENOENT || err == ENOTDIR || err == ENAMETOOLONG || err == ELOOP ? 127 : 126;
}

// The interpreter a script's "#!" line names ("" when the file has none or cannot be read:
// then execve decides). Read without blocking: `path` was found to be a regular file, but
// it may have been swapped since.
std::string interpreterOf(const std::string& path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return {};
    struct stat st
    {
    };
    char head[256] = {};
    ssize_t n = -1;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        do
            n = ::read(fd, head, sizeof head - 1);
        while (n < 0 && errno == EINTR);
    }
    ::close(fd);
    if (n < 2 || head[0] != '#' || head[1] != '!')
        return {};
    // As the kernel reads it: blanks, then the interpreter up to a blank or the line's end.
    std::size_t at = 2;
    while (at < static_cast<std::size_t>(n) && (head[at] == ' ' || head[at] == '\t'))
        ++at;
    std::size_t end = at;
    while (end < static_cast<std::size_t>(n) && head[end] != ' ' && head[end] != '\t' && head[end] != '\n'
        && head[end] != '\0')
        ++end;
    return std::string(head + at, end - at);
}

// The child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void execChild(const char* path, char* const* args, char* const* shArgs, char* const* envp,
    pid_t parent, const sigset_t& mask, int reportFd)
{
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The runner may have died before the line above took effect: then nobody holds a slot
    // for this command, and it must not start.
    if (::getppid() != parent)
        ::_exit(127);
    struct sigaction dfl
    {
    };
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : FORWARDED)
        ::sigaction(sig, &dfl, nullptr);
    ::sigaction(SIGCHLD, &dfl, nullptr);
    ::sigaction(SIGPIPE, &g_pipeBefore, nullptr); // the keeper ignores it; the command must not
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    ::execve(path, args, envp);
    int err = errno;
    if (err == ENOEXEC) {
        // As execvp does: a file without a #! line is a shell script.
        ::execve("/bin/sh", shArgs, envp);
        err = errno;
    }
    (void)!::write(reportFd, &err, sizeof err);
    ::_exit(127);
}

// What the keeper tells the runner about the command (one message, then it exits).
struct Outcome
{
    int kind = 0; // EXEC_FAILED: value is errno; ENDED: value is the wait status
    int value = 0;
};
constexpr int EXEC_FAILED = 1;
constexpr int ENDED = 2;

volatile sig_atomic_t g_command = 0; // in the keeper: the command's pid
volatile sig_atomic_t g_forwarded = 0; // in the keeper: a signal was passed on to the command
volatile sig_atomic_t g_pending = 0; // in the keeper: a signal that came before the command

// The keeper passes on what the runner (or anyone) sends it; a signal the terminal sent to the
// whole foreground group (SI_KERNEL) reached the command already. One that comes before the
// command exists is kept: the command is then not started.
void keeperOnSignal(int sig, siginfo_t* info, void*)
{
    if (info && info->si_code == SI_KERNEL)
        return;
    g_forwarded = 1;
    if (g_command > 0)
        ::kill(static_cast<pid_t>(g_command), sig);
    else
        g_pending = sig;
}

void onChild(int) { } // only wakes the keeper's ppoll

// All of n bytes through a pipe, retrying EINTR and short transfers; false at its end or on
// an error.
bool transferAll(int fd, char* p, std::size_t n, bool reading)
{
    while (n > 0) {
        const ssize_t done = reading ? ::read(fd, p, n) : ::write(fd, p, n);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return false;
        p += done;
        n -= static_cast<std::size_t>(done);
    }
    return true;
}

bool readAll(int fd, void* to, std::size_t n)
{
    return transferAll(fd, static_cast<char*>(to), n, true);
}

bool writeAllRetrying(int fd, const void* from, std::size_t n)
{
    return transferAll(fd, const_cast<char*>(static_cast<const char*>(from)), n, false);
}

// The parent of `pid` from /proc/PID/stat (after the last ')': the name may hold anything);
// 0 when it cannot be read (gone meanwhile). `zombie`: it has ended and waits to be reaped.
pid_t parentOf(pid_t pid, bool& zombie)
{
    char path[40];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    char buf[1024];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char* close = std::strrchr(buf, ')');
    if (!close)
        return 0;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(close + 1, " %c %d", &state, &ppid) != 2)
        return 0;
    zombie = state == 'Z' || state == 'X';
    return static_cast<pid_t>(ppid);
}

// SIGKILLs every live process descended from `root` (this keeper); how many it could kill
// (a descendant it may not signal, a set-user-ID program's, is not counted: the sweep does
// not spin on it).
int killDescendants(pid_t root)
{
    std::unordered_map<pid_t, pid_t> parent;
    std::vector<pid_t> live;
    const int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return 0;
    alignas(8) char buf[16384];
    for (;;) {
        const long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
        if (n <= 0)
            break;
        for (long at = 0; at < n;) {
            struct Entry
            {
                std::uint64_t ino;
                std::int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[1];
            };
            const auto* e = reinterpret_cast<const Entry*>(buf + at);
            at += e->reclen;
            char* end = nullptr;
            const long pid = std::strtol(e->name, &end, 10);
            if (pid <= 0 || *end != '\0' || pid == root)
                continue;
            bool zombie = false;
            const pid_t up = parentOf(static_cast<pid_t>(pid), zombie);
            if (up == 0)
                continue;
            parent[static_cast<pid_t>(pid)] = up;
            if (!zombie)
                live.push_back(static_cast<pid_t>(pid));
        }
    }
    ::close(dir);
    // Descends from root: its parent chain reaches root (each chain walked once, remembered).
    std::unordered_map<pid_t, bool> mine;
    const auto descends = [&](pid_t pid) {
        std::vector<pid_t> chain;
        bool answer = false;
        for (pid_t at = pid;;) {
            if (auto known = mine.find(at); known != mine.end()) {
                answer = known->second;
                break;
            }
            chain.push_back(at);
            const auto up = parent.find(at);
            if (up == parent.end() || up->second <= 1 || chain.size() > parent.size()) {
                answer = up != parent.end() && up->second == root;
                break;
            }
            if (up->second == root) {
                answer = true;
                break;
            }
            at = up->second;
        }
        for (pid_t p : chain)
            mine[p] = answer;
        return answer;
    };
    int killed = 0;
    for (pid_t pid : live) {
        if (descends(pid) && ::kill(pid, SIGKILL) == 0)
            ++killed;
    }
    return killed;
}

// Kills the whole tree under this keeper, again until none is left (a process forking while
// it is being killed), reaping what comes to it as a subreaper. Bounded: at most ~5 s.
void killTree()
{
    const pid_t self = ::getpid();
    for (int round = 0; round < 1000; ++round) {
        const int killed = killDescendants(self);
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {
        }
        if (killed == 0)
            return;
        ::poll(nullptr, 0, 5);
    }
}

struct KeeperPlan
{
    std::string path; // resolved
    std::vector<char*> args;
    std::vector<char*> shArgs;
    std::vector<std::string> environment; // the runner's, as at prepare()
    std::function<void()> onRunnerGone; // called when the runner died, after the tree is gone
};

// Tells the runner how the command ended (or that it did not start), then exits.
[[noreturn]] void keeperReport(int report, int kind, int value)
{
    const Outcome o { kind, value };
    (void)writeAllRetrying(report, &o, sizeof o);
    ::_exit(0);
}

// The runner is gone (it never writes again and holds the pipe until the command is done):
// nothing holds the slot for the command once this keeper exits, so nothing of it may run on.
[[noreturn]] void keeperOrphaned(const std::function<void()>& onRunnerGone)
{
    killTree();
    if (onRunnerGone) {
        try {
            onRunnerGone();
        } catch (...) {
            // Nothing to tell anyone: the runner is gone. What was not undone ages out (stale).
        }
    }
    ::_exit(0);
}

bool runnerGone(int go)
{
    pollfd p { go, POLLIN, 0 };
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

// The keeper: waits for the runner's go (the extra environment), starts the command, and
// tells the runner how it ended; kills the command's tree when the runner dies first, or when
// the command ended by a signal. Reaps every orphan that comes to it meanwhile.
[[noreturn]] void keeperLife(const KeeperPlan& plan, int go, int report, const sigset_t& mask)
{
    struct sigaction sa
    {
    };
    sa.sa_sigaction = keeperOnSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO; // no SA_RESTART: the waits below re-check
    for (int sig : FORWARDED)
        ::sigaction(sig, &sa, nullptr);
    struct sigaction chld
    {
    };
    chld.sa_handler = onChild;
    sigemptyset(&chld.sa_mask);
    ::sigaction(SIGCHLD, &chld, nullptr);
    struct sigaction ign
    {
    };
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &g_pipeBefore); // a report to a runner that died is not fatal
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    ::prctl(PR_SET_NAME, "tollgate-keep"); // not taken for its runner by pgrep/ps
    // SIGCHLD stays blocked but in ppoll (no wake-up lost between a reap and the wait).
    sigset_t waiting = mask;
    sigdelset(&waiting, SIGCHLD);
    sigset_t running = mask;
    sigaddset(&running, SIGCHLD);
    ::sigprocmask(SIG_SETMASK, &running, nullptr);

    std::uint32_t length = 0;
    if (!readAll(go, &length, sizeof length) || length > (64u << 20))
        ::_exit(0); // the runner gave up (not admitted) or died
    std::string block(length, '\0');
    if (!readAll(go, block.data(), length))
        ::_exit(0);
    std::vector<std::string> extra;
    for (std::size_t at = 0; at < block.size();) {
        const std::size_t end = block.find('\0', at);
        extra.emplace_back(block.substr(at, end - at));
        at = end == std::string::npos ? block.size() : end + 1;
    }
    std::vector<std::string> env;
    for (const auto& entry : plan.environment) {
        bool replaced = false;
        for (const auto& e : extra)
            replaced = replaced || entry.compare(0, e.find('=') + 1, e, 0, e.find('=') + 1) == 0;
        if (!replaced)
            env.push_back(entry);
    }
    env.insert(env.end(), extra.begin(), extra.end());
    std::vector<char*> envp;
    for (auto& e : env)
        envp.push_back(e.data());
    envp.push_back(nullptr);

    int execReport[2];
    if (::pipe2(execReport, O_CLOEXEC) != 0)
        keeperReport(report, EXEC_FAILED, errno);
    // Forwarded signals are blocked from here to g_command being set: one that came before is
    // pending (the command is not started), one that comes after is passed on.
    sigset_t forwarded = running;
    for (int sig : FORWARDED)
        sigaddset(&forwarded, sig);
    ::sigprocmask(SIG_SETMASK, &forwarded, nullptr);
    if (runnerGone(go))
        keeperOrphaned(plan.onRunnerGone);
    if (g_pending != 0)
        keeperReport(report, ENDED, g_pending); // a wait status "killed by signal N", unstarted
    const pid_t keeper = ::getpid();
    const pid_t command = ::fork();
    if (command == 0) {
        ::close(execReport[0]);
        execChild(plan.path.c_str(), plan.args.data(), plan.shArgs.data(), envp.data(), keeper, mask, execReport[1]);
    }
    if (command > 0)
        g_command = command;
    ::sigprocmask(SIG_SETMASK, &running, nullptr);
    ::close(execReport[1]);
    if (command < 0)
        keeperReport(report, EXEC_FAILED, errno);
    int execErr = 0;
    if (readAll(execReport[0], &execErr, sizeof execErr)) {
        while (::waitpid(command, nullptr, 0) < 0 && errno == EINTR) {
        }
        keeperReport(report, EXEC_FAILED, execErr);
    }
    ::close(execReport[0]);

    for (;;) {
        // Reap everything that ended: the command, and orphans of its tree that came here.
        int status = 0;
        for (pid_t w; (w = ::waitpid(-1, &status, WNOHANG)) > 0;) {
            if (w != command)
                continue;
            // Ended by a signal (Ctrl-C, a forwarded SIGTERM): its children do not run on.
            if (WIFSIGNALED(status) || g_forwarded)
                killTree();
            keeperReport(report, ENDED, status);
        }
        pollfd p { go, POLLIN, 0 };
        const int n = ::ppoll(&p, 1, nullptr, &waiting);
        if (n > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)))
            keeperOrphaned(plan.onRunnerGone);
    }
}

[[noreturn]] void keeperMain(const KeeperPlan& plan, int go, int report, const sigset_t& mask)
{
    try {
        keeperLife(plan, go, report, mask);
    } catch (...) {
        // Never unwind into the runner's code in this copy of its process.
        ::_exit(126);
    }
}

} // namespace

ChildRunner::Resolution ChildRunner::resolve(const std::string& command)
{
    Resolution r = find(command);
    if (r.exitCode != 0)
        return r;
    // A script whose interpreter is missing would fail in execve, after the quota was spent:
    // it is found out here, as a shell reports it.
    const std::string interpreter = interpreterOf(r.path);
    if (!interpreter.empty()) {
        if (const int err = runnable(interpreter); err != 0) {
            Resolution bad;
            bad.exitCode = codeFor(err);
            bad.problem = "cannot run " + command + ": its interpreter " + interpreter + ": " + std::strerror(err);
            return bad;
        }
    }
    return r;
}

ChildRunner::Resolution ChildRunner::find(const std::string& command)
{
    Resolution r;
    if (command.empty()) {
        r.exitCode = 127;
        r.problem = "cannot run an empty command name";
        return r;
    }
    if (command.find('/') != std::string::npos) {
        if (const int err = runnable(command); err != 0) {
            r.exitCode = codeFor(err);
            r.problem = "cannot run " + command + ": " + std::strerror(err);
            return r;
        }
        r.path = command;
        return r;
    }
    // As execvp: every PATH entry in order ("" is the current directory); a file found but not
    // executable is remembered, and reported when nothing runnable comes later.
    const char* env = std::getenv("PATH");
    const std::string path = env ? env : "/bin:/usr/bin";
    int firstProblem = 0;
    std::size_t start = 0;
    for (;;) {
        const std::size_t end = path.find(':', start);
        std::string dir = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
        const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + command;
        const int err = runnable(candidate);
        if (err == 0) {
            r.path = candidate;
            return r;
        }
        if (codeFor(err) == 126 && err != ENOTDIR && firstProblem == 0)
            firstProblem = err;
        if (end == std::string::npos)
            break;
        start = end + 1;
    }
    if (firstProblem != 0) {
        r.exitCode = 126;
        r.problem = "cannot run " + command + ": " + std::strerror(firstProblem);
    } else {
        r.exitCode = 127;
        r.problem = "cannot run " + command + ": command not found in PATH";
    }
    return r;
}

void ChildRunner::installSignalHandlers()
{
    struct sigaction sa
    {
    };
    sa.sa_sigaction = onRunnerSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO; // no SA_RESTART: waits return EINTR and re-check interrupted()
    for (int sig : FORWARDED)
        ::sigaction(sig, &sa, nullptr);
}

const std::atomic<bool>& ChildRunner::interrupted()
{
    return g_interrupted;
}

int ChildRunner::interruptSignal()
{
    return g_signal;
}

std::chrono::milliseconds ChildRunner::lease(std::chrono::milliseconds standard)
{
    if (const char* v = std::getenv("TOLLGATE_TEST_LEASE_MS"); v && *v) {
        char* end = nullptr;
        const long long ms = std::strtoll(v, &end, 10);
        if (*end == '\0' && ms >= 100 && ms < standard.count())
            return std::chrono::milliseconds(ms);
    }
    return standard;
}

ChildRunner::Keeper::~Keeper()
{
    if (m_go >= 0)
        ::close(m_go); // a keeper never started sees the pipe end and exits
    if (m_report >= 0)
        ::close(m_report);
    if (m_pid > 0) {
        while (::waitpid(m_pid, nullptr, 0) < 0 && errno == EINTR) {
        }
    }
}

ChildRunner::Keeper::Keeper(Keeper&& other) noexcept
    : m_pid(std::exchange(other.m_pid, -1))
    , m_go(std::exchange(other.m_go, -1))
    , m_report(std::exchange(other.m_report, -1))
    , m_name(std::move(other.m_name))
    , m_problem(std::move(other.m_problem))
{
}

ChildRunner::Keeper ChildRunner::prepare(const std::vector<std::string>& argv, std::function<void()> onRunnerGone)
{
    Keeper k;
    k.m_name = argv.empty() ? std::string() : argv[0];
    const Resolution found = resolve(k.m_name);
    if (found.exitCode != 0) {
        k.m_problem = found.problem;
        k.m_exitCode = found.exitCode;
        return k;
    }
    KeeperPlan plan;
    plan.path = found.path;
    plan.onRunnerGone = std::move(onRunnerGone);
    for (char** e = environ; e && *e; ++e)
        plan.environment.emplace_back(*e);
    for (const auto& a : argv)
        plan.args.push_back(const_cast<char*>(a.c_str()));
    plan.args.push_back(nullptr);
    plan.shArgs = { const_cast<char*>("sh"), const_cast<char*>(plan.path.c_str()) };
    plan.shArgs.insert(plan.shArgs.end(), plan.args.begin() + 1, plan.args.end());

    int go[2];
    int report[2];
    if (::pipe2(go, O_CLOEXEC) != 0) {
        k.m_problem = std::string("cannot run ") + argv[0] + ": " + std::strerror(errno);
        return k;
    }
    if (::pipe2(report, O_CLOEXEC) != 0) {
        k.m_problem = std::string("cannot run ") + argv[0] + ": " + std::strerror(errno);
        ::close(go[0]);
        ::close(go[1]);
        return k;
    }
    // Block the forwarded signals around fork: the keeper installs its own handlers first.
    sigset_t block, old;
    sigemptyset(&block);
    for (int sig : FORWARDED)
        sigaddset(&block, sig);
    ::sigprocmask(SIG_BLOCK, &block, &old);
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(go[1]);
        ::close(report[0]);
        keeperMain(plan, go[0], report[1], old);
    }
    const int forkErr = errno;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    ::close(go[0]);
    ::close(report[1]);
    if (child < 0) {
        ::close(go[1]);
        ::close(report[0]);
        k.m_problem = std::string("cannot run ") + argv[0] + ": " + std::strerror(forkErr);
        return k;
    }
    k.m_pid = child;
    k.m_go = go[1];
    k.m_report = report[0];
    return k;
}

int ChildRunner::start(Keeper& keeper, const std::vector<std::pair<std::string, std::string>>& extraEnv,
    const std::function<void()>& every, std::chrono::milliseconds period)
{
    if (!keeper.ok()) {
        std::cerr << "tollgate: " << Console::printable(keeper.problem()) << '\n';
        return keeper.exitCode();
    }
    std::string block;
    for (const auto& [k, v] : extraEnv) {
        block += k + "=" + v;
        block += '\0';
    }
    const auto length = static_cast<std::uint32_t>(block.size());
    g_child = keeper.m_pid; // signals from now on go to the keeper, which passes them on
    if (g_interrupted.load()) {
        // Interrupted between the admission and now: the command is not started.
        g_child = 0;
        return 128 + g_signal;
    }
    if (!writeAllRetrying(keeper.m_go, &length, sizeof length)
        || !writeAllRetrying(keeper.m_go, block.data(), block.size())) {
        g_child = 0;
        std::cerr << "tollgate: cannot run " << Console::printable(keeper.m_name)
                  << ": its keeper process is gone\n";
        return 126;
    }
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, keeper.m_pid, 0));
    using Clock = std::chrono::steady_clock;
    const bool periodic = every && period.count() > 0;
    auto next = Clock::now() + period;
    int status = 0;
    pid_t w = 0;
    for (;;) {
        w = ::waitpid(keeper.m_pid, &status, periodic ? WNOHANG : 0);
        if (w == keeper.m_pid || (w < 0 && errno != EINTR))
            break;
        if (!periodic)
            continue; // EINTR: a forwarded signal
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
        if (left <= 0) {
            every();
            next = Clock::now() + period;
            continue;
        }
        if (pidfd >= 0) {
            pollfd p { pidfd, POLLIN, 0 };
            ::poll(&p, 1, static_cast<int>(left));
        } else {
            ::poll(nullptr, 0, static_cast<int>(std::min<long long>(left, 100))); // no pidfd (Linux < 5.3)
        }
    }
    g_child = 0;
    if (pidfd >= 0)
        ::close(pidfd);
    const int keeperPid = keeper.m_pid;
    keeper.m_pid = -1; // reaped
    Outcome o;
    const bool told = readAll(keeper.m_report, &o, sizeof o);
    if (w != keeperPid)
        return 3;
    if (!told) // the keeper itself was killed (by hand): the command died with it
        return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 3;
    if (o.kind == EXEC_FAILED) {
        std::cerr << "tollgate: cannot run " << Console::printable(keeper.m_name) << ": "
                  << std::strerror(o.value) << '\n';
        return codeFor(o.value);
    }
    if (WIFEXITED(o.value))
        return WEXITSTATUS(o.value);
    return 128 + WTERMSIG(o.value);
}

int ChildRunner::run(const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& extraEnv, const std::function<void()>& every,
    std::chrono::milliseconds period)
{
    Keeper keeper = prepare(argv);
    return start(keeper, extraEnv, every, period);
}

} // namespace tollgate::cli
