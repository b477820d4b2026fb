#pragma once

// HistoryLog: the append-only, bounded history. Lines are appended to history.jsonl under the
// home's state.lock; when the file passes MAX_BYTES it is renamed to history.1.jsonl
// (replacing the previous generation) and a new one is started, so the history never holds
// more than two generations. A reader follows the rename by inode (HistoryReader).

#include "fd.h"
#include "historyevent.h"

#include <vector>

namespace tollgate {

class HistoryLog {
public:
    static constexpr off_t MAX_BYTES = 32 * 1024 * 1024;

    explicit HistoryLog(std::string homeDir, off_t maxBytes = MAX_BYTES)
        : m_dir(std::move(homeDir))
        , m_maxBytes(maxBytes)
    {
    }
    // Caller holds state.lock. `generation` changes whenever any process rotated the log
    // (a shared counter), so an unchanged one means our descriptor still names history.jsonl.
    // Returns true when this call rotated it.
    [[nodiscard]] Result<bool> append(const std::vector<HistoryEvent>& events, std::uint32_t generation = 0);

    [[nodiscard]] std::string currentPath() const { return m_dir + "/history.jsonl"; }
    [[nodiscard]] std::string previousPath() const { return m_dir + "/history.1.jsonl"; }

private:
    std::string m_dir;
    off_t m_maxBytes;
    Fd m_fd;
    std::uint32_t m_generation = 0;
};

} // namespace tollgate
