#include "childrunner.h"

#include "console.h"

#include <cerrno>
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

extern char** environ;

namespace tollgate::cli {

namespace {

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_signal = 0;
std::atomic<bool> g_interrupted { false };

constexpr int FORWARDED[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

void onSignal(int sig)
{
    if (g_child > 0) {
        ::kill(static_cast<pid_t>(g_child), sig);
        return;
    }
    g_signal = sig;
    g_interrupted.store(true);
}

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

} // namespace

ChildRunner::Resolution ChildRunner::resolve(const std::string& command)
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
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; // no SA_RESTART: waits return EINTR and re-check interrupted()
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

int ChildRunner::run(const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& extraEnv, const std::function<void()>& every,
    std::chrono::milliseconds period)
{
    const Resolution found = resolve(argv.empty() ? std::string() : argv[0]);
    if (found.exitCode != 0) {
        std::cerr << "tollgate: " << Console::printable(found.problem) << '\n';
        return found.exitCode;
    }
    std::vector<std::string> envStore;
    for (char** e = environ; e && *e; ++e) {
        const std::string_view entry(*e);
        bool replaced = false;
        for (const auto& [k, v] : extraEnv)
            replaced = replaced || entry.substr(0, k.size() + 1) == k + "=";
        if (!replaced)
            envStore.emplace_back(entry);
    }
    for (const auto& [k, v] : extraEnv)
        envStore.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : envStore)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<char*> shArgs { const_cast<char*>("sh"), const_cast<char*>(found.path.c_str()) };
    shArgs.insert(shArgs.end(), args.begin() + 1, args.end());

    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) {
        std::cerr << "tollgate: cannot run " << Console::printable(argv[0]) << ": " << std::strerror(errno)
                  << '\n';
        return 126;
    }
    // Block the forwarded signals around fork so one cannot slip between fork and g_child.
    sigset_t block, old;
    sigemptyset(&block);
    for (int sig : FORWARDED)
        sigaddset(&block, sig);
    ::sigprocmask(SIG_BLOCK, &block, &old);
    const pid_t parent = ::getpid();
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(report[0]);
        execChild(found.path.c_str(), args.data(), shArgs.data(), envp.data(), parent, old, report[1]);
    }
    const int forkErr = errno;
    if (child > 0)
        g_child = child;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    ::close(report[1]);
    if (child < 0) {
        ::close(report[0]);
        std::cerr << "tollgate: cannot run " << Console::printable(argv[0]) << ": " << std::strerror(forkErr)
                  << '\n';
        return 126;
    }
    // The report pipe closes on a successful exec; an errno arrives when exec failed.
    int execErr = 0;
    ssize_t n;
    do {
        n = ::read(report[0], &execErr, sizeof execErr);
    } while (n < 0 && errno == EINTR);
    ::close(report[0]);

    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
    using Clock = std::chrono::steady_clock;
    const bool periodic = every && period.count() > 0 && n != static_cast<ssize_t>(sizeof execErr);
    auto next = Clock::now() + period;
    int status = 0;
    pid_t w = 0;
    for (;;) {
        w = ::waitpid(child, &status, periodic ? WNOHANG : 0);
        if (w == child || (w < 0 && errno != EINTR))
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
    if (w < 0)
        return 3;
    if (n == static_cast<ssize_t>(sizeof execErr)) {
        std::cerr << "tollgate: cannot run " << Console::printable(argv[0]) << ": " << std::strerror(execErr)
                  << '\n';
        return codeFor(execErr);
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

} // namespace tollgate::cli
