#pragma once

// HistoryLog: the append-only, bounded history. Lines are appended to history.jsonl under the
// home's state.lock; when the file passes MAX_BYTES it is renamed to history.1.jsonl
// (replacing the previous generation) and a new one is started, so the history never holds
// more than two generations. A reader follows the rename by inode (HistoryReader).
// Both files are reached relative to the home's descriptor (see HomeDir).

#include "history/historyevent.h"
#include "system/fd.h"

#include <vector>

namespace tollgate {

class HistoryLog
{
public:
    static constexpr off_t MAX_BYTES = 32 * 1024 * 1024;
    static constexpr const char* CURRENT = "history.jsonl";
    static constexpr const char* PREVIOUS = "history.1.jsonl";

    // `home` is the open home directory; it must outlive this object (not owned).
    explicit HistoryLog(const Fd& home, off_t maxBytes = MAX_BYTES)
        : m_home(&home)
        , m_maxBytes(maxBytes)
    {
    }
    // Caller holds state.lock. `generation` changes whenever any process rotated the log
    // (a shared counter), so an unchanged one means our descriptor still names history.jsonl.
    // Returns true when this call rotated it. A failed write may leave a partial line; the
    // next append starts on a new line, so it costs only the lines that failed.
    [[nodiscard]] Result<bool> append(const std::vector<HistoryEvent>& events, std::uint32_t generation = 0);

    [[nodiscard]] std::string currentPath() const { return m_home->path() + "/" + CURRENT; }
    [[nodiscard]] std::string previousPath() const { return m_home->path() + "/" + PREVIOUS; }

private:
    Result<void> openCurrent();
    [[nodiscard]] Result<bool> endsInPartialLine(off_t size) const;

    const Fd* m_home; // not owned
    off_t m_maxBytes;
    Fd m_fd;
    std::uint32_t m_generation = 0;
    off_t m_cleanEnd = -1; // size of the file right after our last complete append; -1: unknown
};

} // namespace tollgate
