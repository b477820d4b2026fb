#pragma once

// HistoryLog: the append-only, bounded history. Lines are appended to history.jsonl AFTER
// the transaction that made them has unlocked state.lock, so that a second CPU can run the
// next transaction meanwhile (admissions per second with 8 processes on 2 CPUs went from
// 0.8x to over 1.3x the single-process rate). Appends of several processes therefore run
// concurrently; what keeps the file sound:
// - One append is one write(2) on an O_APPEND descriptor: whole lines, never interleaved
//   with another writer's (the kernel serialises appends to one inode). Lines of different
//   processes land in the order they reach the file, which is commit order except when a
//   process is descheduled between its commit and its append (the `fence` and `t` keys
//   still say the commit order).
// - An appender holds a SHARED flock on the file it appends to; rotation (past MAX_BYTES:
//   rename to history.1.jsonl, replacing the previous generation, and bump the shared
//   generation counter) needs the EXCLUSIVE flock of that same file. So no line is ever
//   written to a file after it was rotated away, and an appender that finds the generation
//   moved once it holds its shared lock reopens history.jsonl first. Two would-be rotators
//   cannot both rename: the second finds the generation moved under its exclusive lock.
// - A writer that failed mid-line (a full disk) leaves a partial line: the next append
//   starts with a newline, so only that line is lost. Two appenders may both add that
//   newline; readers skip the empty line.
// - A crash loses at most the lines not yet written; the state is already committed.
// Both files are reached relative to the home's descriptor (see HomeDir).

#include "history/historyevent.h"
#include "system/fd.h"

#include <atomic>
#include <cstdint>
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
    // Needs no other lock. `generation` is the counter every appender of this home shares
    // (the doorbell's history word): any rotation moves it, so an unchanged one means our
    // descriptor still names history.jsonl; null when this object is the only writer.
    // Returns true when this call rotated the log. A failed write may leave a partial line;
    // the next append starts on a new line, so it costs only the lines that failed.
    [[nodiscard]] Result<bool> append(
        const std::vector<HistoryEvent>& events, std::atomic<std::uint32_t>* generation = nullptr);

    [[nodiscard]] std::string currentPath() const { return m_home->path() + "/" + CURRENT; }
    [[nodiscard]] std::string previousPath() const { return m_home->path() + "/" + PREVIOUS; }

private:
    Result<void> openCurrent();
    [[nodiscard]] Result<bool> endsInPartialLine(off_t size) const;
    // Renames history.jsonl (still our descriptor's file) away under its exclusive flock.
    [[nodiscard]] Result<bool> rotate(std::atomic<std::uint32_t>* generation);

    const Fd* m_home; // not owned
    off_t m_maxBytes;
    Fd m_fd;
    std::uint32_t m_generation = 0;
    off_t m_cleanEnd = -1; // size of the file right after our last complete append; -1: unknown
};

} // namespace tollgate
