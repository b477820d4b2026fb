#pragma once

// `tollgate lock COMMAND PATH [options]`: the sema/semats-compatible single lock.

#include <string>
#include <vector>

namespace tollgate::cli {

class LockCommand {
public:
    // args: everything after "lock". Returns the process exit code.
    [[nodiscard]] static int run(const std::vector<std::string>& args);
    [[nodiscard]] static const char* usage();
};

} // namespace tollgate::cli
