#pragma once

// Doorbell: wakes waiting callers in other processes the moment capacity may have appeared.
// A 4 KiB file in the home directory is mapped shared by every process; its first word is a
// generation counter used as a futex (futex(2) works across processes on a shared file
// mapping). A waiter reads the generation *before* its transaction and sleeps only while it
// is unchanged, so a ring between the transaction and the sleep is never lost. The second
// word counts sleepers so that ring() skips the wake syscall when nobody waits. Two more
// words are change counters that let every process notice, without a system call, that
// the limits were saved, the state file was set aside, or the history was rotated.
// Words 16..19 record history events that could not be written (see HistoryGap), so that
// whichever process appends next writes the gap marker.
//
// Every word here is a hint, never the exclusion (that is the flock on state.lock), so a
// doorbell that stops being shared costs wake-ups, not correctness. That is what a user's
// truncation (`: > HOME/doorbell`) does: the mapping is a SharedMapping, so the fault that
// would have killed the process (SIGBUS) is answered with private zero pages, the words read
// as zero from then on, and broken() says so; the owner (FileQuotaStore) then opens the
// doorbell again before its next operation, which grows the file back to 4 KiB, and
// cross-process wake-ups resume. Meanwhile every wait is bounded by its own timeout, as
// always, and a futex call on the truncated page (EFAULT) is a short pause (see futex.h).

#include "base/result.h"
#include "system/fd.h"
#include "system/sharedmapping.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace tollgate {

class Doorbell
{
public:
    // Opens (creating it if needed) the file `doorbell` of the home (see HomeDir::openFile),
    // growing it to its size if it is shorter.
    static Result<Doorbell> open(const Fd& home);

    // The file was truncated under us and our mapping is private now (see above): open the
    // doorbell again to share it again. Set only by a fault: a waiter asleep on the futex
    // notices when it wakes and next touches a word.
    [[nodiscard]] bool broken() const { return m_mapping.broken(); }

    enum class Counter { Config = 2, History = 3 };

    [[nodiscard]] std::uint32_t generation() const;
    [[nodiscard]] std::uint32_t counter(Counter c) const;
    void bump(Counter c);
    void ring();

    // Events lost because the history could not be written. Appends run after state.lock
    // is released, several at once, so the count moves only by atomic read-modify-writes:
    // the appender that takes a gap (to write its marker) owns it, and gives it back with
    // its own loss if that append fails too. The errno and time are those of whoever found
    // the count at zero (each word is atomic, the group is not: a description, not a count).
    struct HistoryGap
    {
        std::uint32_t lost = 0; // events not written since sinceMs; 0: no gap
        std::int64_t sinceMs = 0; // unix ms of the first lost event
        int sysErrno = 0; // why the first one was lost (0: not a system error)
    };
    [[nodiscard]] HistoryGap historyGap() const;
    // Takes the whole gap (leaving none) for the caller to write as a marker.
    [[nodiscard]] HistoryGap takeHistoryGap();
    void addHistoryGap(std::uint32_t lost, std::int64_t timeMs, int sysErrno);
    // The history counter itself, which HistoryLog moves when it rotates the log.
    [[nodiscard]] std::atomic<std::uint32_t>* counterWord(Counter c) const;
    // Returns when the generation differs from `seen`, a ring arrives, or the timeout passes.
    void wait(std::uint32_t seen, std::chrono::nanoseconds timeout) const;

    // The hand-over of state.lock (see LockQueue, which works on this mapping's words).
    // Whoever unlocks the flock moves the turn word and wakes ONE sleeper on it (no syscall
    // when nobody sleeps). The flock stays the only exclusion.
    void lockReleased();
    // The mapped words (null when not mapped), for LockQueue.
    [[nodiscard]] std::atomic<std::uint32_t>* mapped() const { return words(); }

private:
    [[nodiscard]] std::atomic<std::uint32_t>* words() const
    {
        return static_cast<std::atomic<std::uint32_t>*>(m_mapping.data());
    }

    // [0] generation, [1] sleepers, [2] config, [3] history rotations, [4] state.lock turn,
    // [5] processes sleeping for the turn, [6] [7] LockQueue's next and serving tickets,
    // [8] when its head got its turn, [9] [10] its spin leases,
    // [16] lost history events, [17] their errno, [18] [19] unix ms of the first (low, high),
    // [32..127] LockQueue's per-ticket words
    SharedMapping m_mapping;
};

} // namespace tollgate
