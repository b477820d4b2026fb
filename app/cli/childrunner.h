#pragma once

// ChildRunner: runs a command for `tollgate run` and `tollgate lock run`, passing on
// SIGINT/SIGTERM/SIGHUP/SIGQUIT to it, and returns its exit code the way a shell does
// (128+N for a signal N, 127 when not found, 126 when not runnable). While no child runs,
// those signals instead set interrupted(), so a wait can stop cleanly (no SA_RESTART: a
// blocking wait returns EINTR and looks at the flag).
//
// The command dies with its runner: it is started with PR_SET_PDEATHSIG = SIGKILL, so a
// runner killed by SIGKILL (which it cannot catch) takes the command along instead of leaving
// it running without the slot the runner held. Limits: the kernel clears that setting when
// the command execs a set-user-ID, set-group-ID or file-capability program (sudo, ping), and
// it covers the command's process only — a background grandchild that outlives the command
// was never covered by the slot.

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
    [[nodiscard]] static Resolution resolve(const std::string& command);

    static void installSignalHandlers();
    [[nodiscard]] static const std::atomic<bool>& interrupted();
    [[nodiscard]] static int interruptSignal();
    // Runs argv (argv[0] resolved as by resolve()) with extraEnv added to the environment and
    // waits for it; while it runs, calls `every` once per `period` (e.g. to renew a lease).
    [[nodiscard]] static int run(const std::vector<std::string>& argv,
        const std::vector<std::pair<std::string, std::string>>& extraEnv,
        const std::function<void()>& every = {},
        std::chrono::milliseconds period = std::chrono::milliseconds(0));

    // The lease `tollgate run` takes and renews: `standard`, unless TOLLGATE_TEST_LEASE_MS
    // (for tests only: 100 ms up to `standard`) asks for a shorter one.
    [[nodiscard]] static std::chrono::milliseconds lease(std::chrono::milliseconds standard);
};

} // namespace tollgate::cli
