#pragma once

// DashboardSnapshot: everything the window shows about the home and the lock directories at
// one instant, as a value. The worker thread builds it from files (read-only) and sends a copy
// to the GUI thread by a queued signal; the GUI never touches a file itself.
// holders is a QList so that handing 10,000 of them over (a queued signal, a copy in each
// model) shares them instead of copying each; holdersRevision says whether they changed.

#include "history/historyevent.h"
#include "lock/lockfile.h"
#include "quota/quotalimits.h"
#include "quota/quotastate.h"

#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <memory>
#include <optional>
#include <vector>

namespace tollgate::ui {

enum class HomeStatus {
    Missing, // the directory does not exist (yet)
    Empty, // it exists but no provider has limits or state: no callers yet
    Ready,
    Unusable, // exists but is refused (owner, mode, symlink) or unreadable
};

// A lock file's identity (its bytes included), shared by the copies of a holder: a list of
// 10,000 holders that is detached copies each, and a deep copy of every file's bytes made
// that cost a core's percent for a lock rewritten 10 times a second. Immutable once made.
class SharedLockIdentity
{
public:
    SharedLockIdentity() = default;
    SharedLockIdentity(LockIdentity identity) // NOLINT: implicit, it stands in for the value
        : m_identity(std::make_shared<const LockIdentity>(std::move(identity)))
    {
    }
    [[nodiscard]] const LockIdentity& get() const
    {
        static const LockIdentity none;
        return m_identity ? *m_identity : none;
    }
    operator const LockIdentity&() const { return get(); } // NOLINT
    bool operator==(const SharedLockIdentity& o) const
    {
        return m_identity == o.m_identity || get() == o.get();
    }

private:
    std::shared_ptr<const LockIdentity> m_identity;
};

enum class HolderKind { Slot, LockFile };
enum class HolderHealth { Alive, Dead, Stale, Overdue, Corrupt };

struct HolderInfo
{
    HolderKind kind = HolderKind::Slot;
    QString key; // stable identity: "slot:PROVIDER:FENCE" or "lock:PATH"
    QString provider; // slots
    quint64 fence = 0; // slots
    QString path; // lock files
    qint64 pid = 0;
    // Slots of a Redis home held from another host: that host's id (machine-pidns), shortened;
    // empty for this host and for directory homes.
    QString host;
    QString who; // the caller (slots) or tag (lock files)
    QString model;
    qint64 sinceMs = 0; // when it was taken (unix ms)
    HolderHealth health = HolderHealth::Alive;
    QString commandLine; // of the holder, when alive and /proc tells
    QString problem; // corrupt lock: why
    // Lock files: the exact file that was looked at. An action on this row acts only on this
    // file (see LockFile::releaseIfSame); a lock released and taken again is another item.
    SharedLockIdentity lock;

    bool operator==(const HolderInfo&) const = default;
};

struct DashboardSnapshot
{
    QString home;
    HomeStatus status = HomeStatus::Missing;
    QString problem; // Unusable: why
    // A file that does not parse: the banner names it. Nothing is rewritten or moved.
    QString corruptFile;
    QString corruptReason;
    bool limitsCorrupt = false; // what does not parse is the limits (never moved aside), else the state
    bool hasState = false; // state.bin was read (false: missing, empty or corrupt)
    QuotaState state;
    // The state as the next acquire will judge it (Capacity::discountGone: slots of holders
    // gone, ghost queue heads taken out), made where pids may be probed; capacity (tiles, the
    // providers' figures) comes from it, so the window says what `status` says. Unset (a
    // snapshot not made by the observer): `state`.
    std::optional<QuotaState> liveState;
    QuotaLimits limits;
    qint64 nowMs = 0; // wall clock when the snapshot was taken
    QList<HolderInfo> holders;
    // Moves whenever holders changed since the observer's previous snapshot; 0: unknown (a
    // snapshot not made by the observer), compare the holders themselves.
    quint64 holdersRevision = 0;
    // When not 0: holders are those of revision holdersBase except at the indices in
    // holdersChanged (the same keys in the same order, new values), so a model that shows
    // holdersBase updates those rows without diffing the rest.
    quint64 holdersBase = 0;
    QList<int> holdersChanged;
    QStringList lockDirProblems;
};

// Lock files rewritten in place while nothing else changed: holder revision `revision` is
// revision `base` with rows[i] at index changed[i] (the same key there, the same order). Sent
// instead of a whole snapshot, so neither the home's state (10,000 slots) nor the list of
// 20,000 holders is copied for a change of one row.
struct HoldersPatch
{
    quint64 revision = 0;
    quint64 base = 0;
    QList<int> changed;
    QList<HolderInfo> rows;
};

} // namespace tollgate::ui

Q_DECLARE_METATYPE(tollgate::ui::DashboardSnapshot)
Q_DECLARE_METATYPE(tollgate::ui::HoldersPatch)
Q_DECLARE_METATYPE(std::vector<tollgate::HistoryEvent>)
Q_DECLARE_METATYPE(tollgate::ProviderLimits)
