#pragma once

// FileQuotaStore: the shared quota on one machine, in a home directory:
//
//   state.lock       empty; flock(LOCK_EX) on it guards every read-modify-write of the files
//                    below but the history. It is never replaced or removed, so every
//                    process locks the same inode (locking a file that is then replaced lets
//                    two processes both win).
//   state.bin        the hot state (StateFile: two CRC-checked slots, rewritten in place).
//   limits.json      the user's limits; written to a temp file and synced outside the lock,
//                    then renamed into place under it. Never written by anything but a limit
//                    change, so a corrupt or deleted state loses no limit.
//   limits.json.bak, limits.json.bak.1, limits.json.bak.2
//                    the last three limits Tollgate wrote, newest first (each written as
//                    temp + rename, rotated under the lock with the limits change).
//   history.jsonl    append-only events (HistoryLog), rotated to history.1.jsonl; appended
//                    after state.lock is released, under a flock of its own (see HistoryLog).
//   doorbell         the futex word that wakes waiters (Doorbell), mapped shared by every
//                    process. Only hints live there, so it is no lock and no state: a user
//                    who truncates it costs wake-ups, never a process (its fault is answered
//                    with private pages, see SharedMapping) nor a guarantee. A store whose
//                    doorbell broke so opens it again (growing the file back) at the start of
//                    its next operation, and drops what it cached on the doorbell's counters.
//
// The home is opened once and every file is reached relative to that descriptor (HomeDir);
// every file must be a regular file of ours, and none is opened in a way that could block.
// A state.bin that does not parse is moved aside to state.bin.corrupt-<time> (never
// overwritten, never trusted), the transaction fails naming both files, and the next one
// starts from a conservative state: windows full, slots taken by placeholders. A state.bin
// that is missing while limits exist (deleted) is treated the same way. A limits.json that is
// missing while a backup exists, or while the state still tracks providers, is lost limits,
// not "no limits": every transaction fails naming the backup to restore, and nothing
// (least of all a backup) is overwritten.
// The history is written after the commit and the unlock, best effort: when it fails the
// transaction still succeeds (the failure is in takeWarnings()), and the next append that
// works first writes a "gap" event counting the lost events (the count is kept in the
// doorbell, for every process).
// What a SIGKILL leaves at any instant: the previous or the new state slot (both valid), a
// complete or partial last history line (a partial line is skipped by readers), and
// limits.json old or new (rename is atomic). Killed between its unlock and its append, a
// process loses its own history lines, not the change they describe.

#include "base/clock.h"
#include "history/historylog.h"
#include "store/doorbell.h"
#include "store/quotastore.h"
#include "store/statefile.h"
#include "system/fd.h"
#include "system/flockguard.h"
#include "system/homedir.h"

#include <memory>
#include <optional>
#include <sys/stat.h>

namespace tollgate {

class FileQuotaStore final : public QuotaStore
{
public:
    // The largest limits.json read; a bigger one is refused by name, never half-read.
    static constexpr std::size_t MAX_LIMITS_BYTES = 4 * 1024 * 1024;
    // How long a transaction waits for state.lock before giving up (holders keep it for
    // microseconds; this only fires if a holder is stopped or the disk hangs).
    static constexpr std::chrono::seconds LOCK_TIMEOUT { 10 };
    // The least a caller's own deadline (StoreWait) leaves for state.lock: a try (`acquire
    // --timeout 0`) still waits out a transaction in progress, or a queue of them, and
    // only gives up on a lock that stays held (a stopped holder). The same floor the Redis
    // home gives each operation for --timeout.
    static constexpr std::chrono::milliseconds MIN_LOCK_WAIT { 500 };

    static constexpr int LIMITS_BACKUPS = 3;

    // `create`: what of a missing home may be created (see HomeDir::Create).
    static Result<std::unique_ptr<FileQuotaStore>> open(const std::string& homeDir, const Clock& clock,
        HomeDir::Create create = HomeDir::Create::WithParents);

    using QuotaStore::transact;
    // Waits for state.lock until min(now + LOCK_TIMEOUT, max(wait.deadline, now +
    // MIN_LOCK_WAIT)), or until wait.cancel is set.
    [[nodiscard]] Result<void> transact(const StoreWait& wait, const TxFunction& fn) override;
    [[nodiscard]] Result<void> updateLimits(const LimitsFunction& fn) override;
    [[nodiscard]] std::uint32_t changeMark() const override { return m_doorbell.generation(); }
    void waitForChange(std::uint32_t mark, std::chrono::nanoseconds timeout) const override;
    [[nodiscard]] std::string describe() const override { return m_dir; }
    [[nodiscard]] std::vector<Error> takeWarnings() override;

    [[nodiscard]] const std::string& dir() const { return m_dir; }
    [[nodiscard]] std::string statePath() const { return m_dir + "/state.bin"; }
    [[nodiscard]] std::string limitsPath() const { return m_dir + "/limits.json"; }
    // The open, verified home (see HomeDir): read its other files relative to this.
    [[nodiscard]] const Fd& home() const { return m_home; }

    // "limits.json.bak", "limits.json.bak.1", ...
    [[nodiscard]] static std::string backupName(int generation);
    // limits.json is missing: were limits lost? An error (ErrorKind::Corrupt, naming
    // limits.json and what to restore it from) when a backup exists or `state` still tracks
    // providers; nullopt for a home that never had limits. Reads only.
    [[nodiscard]] static std::optional<Error> lostLimits(const Fd& home, const QuotaState* state);

private:
    FileQuotaStore(Fd home, const Clock& clock, Fd lockFd, Doorbell doorbell)
        : m_dir(home.path())
        , m_home(std::move(home))
        , m_clock(&clock)
        , m_lockFd(std::move(lockFd))
        , m_doorbell(std::move(doorbell))
        , m_history(m_home)
    {
    }

    struct PreparedLimits
    {
        QuotaLimits base; // the limits the edit started from
        QuotaLimits edited;
        // The edited limits, written and synced, as limits.json and as its newest backup
        // (names in the home); empty when unchanged.
        std::string tmpName;
        std::string backupTmpName;
    };
    // At the start of each operation: a doorbell truncated under us is opened again.
    void reopenBrokenDoorbell();
    Result<void> run(const LimitsFunction* limitsFn, const TxFunction* fn, const PreparedLimits* prepared,
        const StoreWait& wait);
    // flock(state.lock) within `wait` (bounded as transact() says), sleeping on the doorbell's
    // lock turn between tries.
    Result<FlockGuard> lockState(const StoreWait& wait);
    Result<void> loadLimits();
    Result<void> writeTemp(const std::string& name, const std::string& content) const;
    Result<void> commitLimits(const PreparedLimits& prepared);
    Result<void> openState();
    Result<QuotaState> readState(std::vector<HistoryEvent>& events, bool& changed);
    Error moveAside(const Error& why);
    void appendHistory(std::vector<HistoryEvent> events);

    std::string m_dir;
    Fd m_home; // the verified home: every file is reached relative to it
    const Clock* m_clock; // not owned
    Fd m_lockFd;
    Doorbell m_doorbell;
    HistoryLog m_history; // refers to m_home
    std::vector<Error> m_warnings;
    // Cheap change detection, so a transaction needs no lookup by path: the shared config
    // counter moves when any process saves limits or sets the state aside; an fstat of our
    // descriptors shows a file edited in place or unlinked/replaced by hand (st_nlink == 0).
    std::optional<StateFile> m_state;
    std::uint32_t m_configSeen = 0;
    QuotaLimits m_limits;
    Fd m_limitsFd;
    struct stat m_limitsStat
    {
    };
    bool m_limitsLoaded = false;
    bool m_limitsMissing = false; // no limits.json when last loaded
    bool m_doorbellWarned = false; // a doorbell that could not be opened again was reported
};

} // namespace tollgate
