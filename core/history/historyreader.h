#pragma once

// HistoryReader: reads the history incrementally — each call returns only the lines appended
// since the previous call, following a rotation (history.jsonl renamed to history.1.jsonl)
// by inode so that nothing is skipped or read twice. Never re-reads the whole file.
// Files are reached relative to the home's descriptor and must be regular files of ours
// (HomeDir::openFile): a FIFO planted at history.jsonl is refused, never waited on. Reading
// never creates anything.

#include "history/historyevent.h"
#include "system/fd.h"

#include <optional>
#include <sys/types.h>
#include <vector>

namespace tollgate {

class HistoryReader
{
public:
    static constexpr std::size_t MAX_LINE = 64 * 1024;
    // More unread history than Tollgate ever keeps (two 32 MiB generations) means a hostile
    // or foreign file: only its last MAX_UNREAD bytes are read, the rest is skipped and counted.
    static constexpr off_t MAX_UNREAD = 64 * 1024 * 1024;

    explicit HistoryReader(std::string homeDir)
        : m_dir(std::move(homeDir))
    {
    }

    using Batch = HistoryBatch;
    // Returns what was appended since the last call (the first call reads both generations).
    // Opens the home by its path (HomeDir::open, never creating it; a missing home has no
    // history): use poll(home) where the home is already open.
    [[nodiscard]] Result<Batch> poll();
    [[nodiscard]] Result<Batch> poll(const Fd& home);
    // Parses complete lines of `text`; a trailing partial line is left for next time.
    static void parseLines(std::string_view text, Batch& out, std::size_t& consumed);

private:
    struct Generation
    {
        Fd fd;
        ino_t ino;
        off_t size;
    };
    [[nodiscard]] static Result<std::optional<Generation>> openGeneration(const Fd& home, const char* name);
    // Reads the complete lines from `offset` on (advancing it) of an open generation.
    [[nodiscard]] static Result<void> readFrom(const Fd& fd, off_t size, off_t& offset, Batch& out);

    std::string m_dir;
    ino_t m_ino = 0; // the generation followed (history.jsonl when last read); 0: none yet
    off_t m_offset = 0;
    ino_t m_finishedIno = 0; // the last generation read to its end (history.1.jsonl)
};

} // namespace tollgate
