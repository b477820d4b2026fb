#pragma once

// RetryAfterFile: the file `run`'s command may write a Retry-After to
// ($TOLLGATE_RETRY_AFTER_FILE). In $TMPDIR when that is an absolute path, else /tmp, named by
// its runner ("tollgate-retry-after-NS-PID-XXXXXX": pid namespace and pid). Made before the
// keeper, which removes it if the runner is killed; removed by the destructor otherwise.
// Files of runs whose runner and keeper were killed at once (kill -9 of the process group:
// nobody was left to remove them) are removed by the next run of the same user: only regular
// files of ours, named by a runner of our pid namespace that is gone.

#include <cstdint>
#include <string>

namespace tollgate::cli {

class RetryAfterFile
{
public:
    explicit RetryAfterFile(std::uint64_t pidNamespace);
    ~RetryAfterFile();
    RetryAfterFile(const RetryAfterFile&) = delete;
    RetryAfterFile& operator=(const RetryAfterFile&) = delete;

    // Empty: none could be made.
    [[nodiscard]] const std::string& path() const { return m_path; }

private:
    static void removeOrphans(const std::string& dir, const std::string& ours);

    std::string m_path;
};

} // namespace tollgate::cli
