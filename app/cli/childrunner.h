#pragma once

// ChildRunner: runs a command for `tollgate run` and `tollgate lock run`, passing on
// SIGINT/SIGTERM/SIGHUP/SIGQUIT to it, and returns its exit code the way a shell does
// (128+N for a signal N, 127 when not found, 126 when not runnable). While no child runs,
// those signals instead set interrupted(), so a wait can stop cleanly (no SA_RESTART: a
// blocking wait returns EINTR and looks at the flag).
//
// The command's whole process tree dies with its runner. Between the runner and the command
// stands a keeper: a forked copy of tollgate (no exec) that is a child subreaper (orphans of
// the command's tree become its children) and watches a pipe from the runner. When the runner
// dies — SIGKILL included, which it cannot catch — the pipe hangs up and the keeper kills every
// descendant it has (found through /proc, again until none is left), removes the run's
// retry-after file, and only then exits. `tollgate run` names the keeper as the slot's holder
// (it is forked before the admission), so the slot stays held until the last process of the
// command is gone: no second holder can start meanwhile. The same sweep follows a command that
// ended by a signal (a forwarded Ctrl-C or SIGTERM): its children do not run on. Limits: a
// command that exits normally leaves its background children alone (a daemon it started on
// purpose; the slot covered the command, not them); a keeper killed by hand takes the command
// along (PR_SET_PDEATHSIG, cleared by the kernel when the command execs a set-user-ID,
// set-group-ID or file-capability program) but not its children.

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tollgate::cli {

class ChildRunner
{
public:
    // What execvp would run for `command` (a PATH search unless it contains a '/'), found
    // before anything is spent on it. exitCode 0: found, in path; else 127 (not found) or
    // 126 (found but not an executable file), with the problem in words.
    struct Resolution
    {
        std::string path;
        int exitCode = 0;
        std::string problem;
    };
    // A script's "#!" interpreter is checked too.
    [[nodiscard]] static Resolution resolve(const std::string& command);

    static void installSignalHandlers();
    [[nodiscard]] static const std::atomic<bool>& interrupted();
    [[nodiscard]] static int interruptSignal();
    // The keeper of one command, forked before anything is spent on it (its pid is what holds
    // a slot); start() runs the command. A keeper never started exits when this goes.
    class Keeper
    {
    public:
        Keeper() = default;
        ~Keeper();
        Keeper(Keeper&& other) noexcept;
        Keeper& operator=(Keeper&&) = delete;
        Keeper(const Keeper&) = delete;
        Keeper& operator=(const Keeper&) = delete;
        [[nodiscard]] bool ok() const { return m_pid > 0; }
        [[nodiscard]] int pid() const { return m_pid; }
        // What went wrong when !ok(), and the exit code that says it (127: not found, 126: not
        // runnable, as a shell).
        [[nodiscard]] const std::string& problem() const { return m_problem; }
        [[nodiscard]] int exitCode() const { return m_exitCode; }

    private:
        friend class ChildRunner;
        int m_pid = -1;
        int m_go = -1; // write end: the environment, then held open as the runner's life line
        int m_report = -1; // read end: what became of the command
        std::string m_name; // the command, for messages
        std::string m_problem;
        int m_exitCode = 126;
    };
    // Resolves argv[0] (resolve()) and forks the keeper for it; nothing is forked for a command
    // that cannot run. If the runner dies, the keeper calls `onRunnerGone` in its own process
    // once the command's tree is gone (the run's retry-after file is removed; `lock run`'s lock,
    // which names the keeper, is released), so nothing of the run is left for the stale timeout.
    [[nodiscard]] static Keeper prepare(
        const std::vector<std::string>& argv, std::function<void()> onRunnerGone = {});
    // Has the keeper run argv with extraEnv added to the environment and waits for it; while it
    // runs, calls `every` once per `period` (e.g. to renew a lease).
    [[nodiscard]] static int start(Keeper& keeper, const std::vector<std::pair<std::string, std::string>>& extraEnv,
        const std::function<void()>& every = {}, std::chrono::milliseconds period = std::chrono::milliseconds(0));
    // prepare() and start() in one.
    [[nodiscard]] static int run(const std::vector<std::string>& argv,
        const std::vector<std::pair<std::string, std::string>>& extraEnv,
        const std::function<void()>& every = {},
        std::chrono::milliseconds period = std::chrono::milliseconds(0));

    // The lease `tollgate run` takes and renews: `standard`, unless TOLLGATE_TEST_LEASE_MS
    // (for tests only: 100 ms up to `standard`) asks for a shorter one.
    [[nodiscard]] static std::chrono::milliseconds lease(std::chrono::milliseconds standard);

private:
    // The PATH search alone (as execvp).
    [[nodiscard]] static Resolution find(const std::string& command);
};

} // namespace tollgate::cli
