#pragma once

// The shared-quota commands: limits, acquire, run, report-429, report-ok, pause, resume,
// status, history, release-stale, release, reset-backoff.

#include <string>
#include <vector>

namespace tollgate::cli {

class QuotaCommand {
public:
    [[nodiscard]] static bool handles(const std::string& command);
    // args: everything after the command word. Returns the exit code.
    [[nodiscard]] static int run(const std::string& command, const std::vector<std::string>& args);
    [[nodiscard]] static const char* usage();
};

} // namespace tollgate::cli
