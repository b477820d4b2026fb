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
#include <optional>
#include <vector>

namespace tollgate::ui {

enum class HomeStatus {
    Missing, // the directory does not exist (yet)
    Empty, // it exists but no provider has limits or state: no callers yet
    Ready,
    Unusable, // exists but is refused (owner, mode, symlink) or unreadable
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
    LockIdentity lock;

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
    QStringList lockDirProblems;
};

} // namespace tollgate::ui

Q_DECLARE_METATYPE(tollgate::ui::DashboardSnapshot)
Q_DECLARE_METATYPE(std::vector<tollgate::HistoryEvent>)
Q_DECLARE_METATYPE(tollgate::ProviderLimits)
