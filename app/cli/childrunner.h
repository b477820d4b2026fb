#pragma once

// ChildRunner: runs a command for `tollgate run` and `tollgate lock run`, passing on
// SIGINT/SIGTERM/SIGHUP/SIGQUIT to it, and returns its exit code the way a shell does
// (128+N for a signal N, 127 when not found, 126 when not runnable). While no child runs,
// those signals instead set interrupted(), so a wait can stop cleanly (no SA_RESTART: a
// blocking wait returns EINTR and looks at the flag).

#include <atomic>
#include <string>
#include <utility>
#include <vector>

namespace tollgate::cli {

class ChildRunner {
public:
    static void installSignalHandlers();
    [[nodiscard]] static const std::atomic<bool>& interrupted();
    [[nodiscard]] static int interruptSignal();
    [[nodiscard]] static int run(const std::vector<std::string>& argv,
        const std::vector<std::pair<std::string, std::string>>& extraEnv);
};

} // namespace tollgate::cli
