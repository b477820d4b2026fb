#pragma once

// FileQuotaStore: the shared quota on one machine, in a home directory:
//
//   state.lock       empty; flock(LOCK_EX) on it guards every read-modify-write of the files
//                    below. It is never replaced or removed, so every process locks the same
//                    inode (locking a file that is then replaced lets two processes both win).
//   state.bin        the hot state (StateFile: two CRC-checked slots, rewritten in place).
//   limits.json      the user's limits; written to a temp file and synced outside the lock,
//                    then renamed into place under it; a copy kept as limits.json.bak. Never written by
//                    anything but a limit change, so a corrupt or deleted state loses no limit.
//   history.jsonl    append-only events (HistoryLog), rotated to history.1.jsonl.
//   doorbell         the futex word that wakes waiters (Doorbell).
//
// A state.bin that does not parse is moved aside to state.bin.corrupt-<time> (never
// overwritten, never trusted), the transaction fails naming both files, and the next one
// starts from a conservative state: windows full, slots taken by placeholders. A state.bin
// that is missing while limits exist (deleted) is treated the same way.
// What a SIGKILL leaves at any instant: the previous or the new state slot (both valid), a
// complete or partial last history line (a partial line is skipped by readers), and
// limits.json old or new (rename is atomic).

#include "clock.h"
#include "doorbell.h"
#include "fd.h"
#include "historylog.h"
#include "quotastore.h"
#include "statefile.h"

#include <memory>
#include <optional>
#include <sys/stat.h>

namespace tollgate {

class FileQuotaStore final : public QuotaStore {
public:
    // How long a transaction waits for state.lock before giving up (holders keep it for
    // microseconds; this only fires if a holder is stopped or the disk hangs).
    static constexpr std::chrono::seconds LOCK_TIMEOUT { 10 };

    static Result<std::unique_ptr<FileQuotaStore>> open(const std::string& homeDir, const Clock& clock);

    [[nodiscard]] Result<void> transact(const TxFunction& fn) override;
    [[nodiscard]] Result<void> updateLimits(const LimitsFunction& fn) override;
    [[nodiscard]] std::uint32_t changeMark() const override { return m_doorbell.generation(); }
    void waitForChange(std::uint32_t mark, std::chrono::nanoseconds timeout) const override;
    [[nodiscard]] std::string describe() const override { return m_dir; }

    [[nodiscard]] const std::string& dir() const { return m_dir; }
    [[nodiscard]] std::string statePath() const { return m_dir + "/state.bin"; }
    [[nodiscard]] std::string limitsPath() const { return m_dir + "/limits.json"; }

private:
    FileQuotaStore(std::string dir, const Clock& clock, Fd lockFd, Doorbell doorbell)
        : m_dir(std::move(dir))
        , m_clock(&clock)
        , m_lockFd(std::move(lockFd))
        , m_doorbell(std::move(doorbell))
        , m_history(m_dir)
    {
    }

    struct PreparedLimits {
        QuotaLimits base; // the limits the edit started from
        QuotaLimits edited;
        std::string tmpPath; // the edited limits, written and synced; empty when unchanged
    };
    Result<void> run(const LimitsFunction* limitsFn, const TxFunction* fn, const PreparedLimits* prepared);
    Result<void> loadLimits();
    Result<std::string> prepareLimitsFile(const QuotaLimits& limits) const;
    Result<void> openState();
    Result<QuotaState> readState(std::vector<HistoryEvent>& events, bool& changed);
    Error moveAside(const Error& why);

    std::string m_dir;
    const Clock* m_clock; // not owned
    Fd m_lockFd;
    Doorbell m_doorbell;
    HistoryLog m_history;
    // Cheap change detection, so a transaction needs no lookup by path: the shared config
    // counter moves when any process saves limits or sets the state aside; an fstat of our
    // descriptors shows a file edited in place or unlinked/replaced by hand (st_nlink == 0).
    std::optional<StateFile> m_state;
    std::uint32_t m_configSeen = 0;
    QuotaLimits m_limits;
    Fd m_limitsFd;
    struct stat m_limitsStat {};
    bool m_limitsLoaded = false;
};

} // namespace tollgate
