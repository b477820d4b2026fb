#include "childrunner.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace tollgate::cli {

namespace {

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_signal = 0;
std::atomic<bool> g_interrupted { false };

void onSignal(int sig)
{
    if (g_child > 0) {
        ::kill(static_cast<pid_t>(g_child), sig);
        return;
    }
    g_signal = sig;
    g_interrupted.store(true);
}

} // namespace

void ChildRunner::installSignalHandlers()
{
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; // no SA_RESTART: waits return EINTR and re-check interrupted()
    for (int sig : { SIGINT, SIGTERM, SIGHUP, SIGQUIT })
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

int ChildRunner::run(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& extraEnv)
{
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

    // Block the forwarded signals around spawn so one cannot slip between spawn and g_child.
    sigset_t block, old;
    sigemptyset(&block);
    for (int sig : { SIGINT, SIGTERM, SIGHUP, SIGQUIT })
        sigaddset(&block, sig);
    ::sigprocmask(SIG_BLOCK, &block, &old);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &old);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int sig : { SIGINT, SIGTERM, SIGHUP, SIGQUIT })
        sigaddset(&defaults, sig);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t child = 0;
    const int err = ::posix_spawnp(&child, args[0], nullptr, &attr, args.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    if (err == 0)
        g_child = child;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    if (err != 0) {
        std::cerr << "tollgate: cannot run " << argv[0] << ": " << std::strerror(err) << '\n';
        return err == ENOENT ? 127 : 126;
    }
    int status = 0;
    pid_t w;
    do {
        w = ::waitpid(child, &status, 0);
    } while (w < 0 && errno == EINTR);
    g_child = 0;
    if (w < 0)
        return 3;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

} // namespace tollgate::cli
