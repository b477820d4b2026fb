#pragma once

// LockTarget: the dashboard's hand on one lock file, for actions the user chose on a row.
//
// The hazard: between the moment the window showed "deploy.lock, pid 4242" and the moment the
// user confirms, the lock can be released and taken again by someone else. Removing "whatever
// is at the path now" would then break a lock nobody looked at. So an action names the lock
// by what was seen — device, inode and the exact bytes — and remove() proceeds only when,
// under an exclusive flock on that very inode (the lock protocol's removal rule, see
// core/lockfile.h), the path still names that inode and the bytes are still those. Anything
// else is reported as Changed, with what is there now, and nothing is done.

#include "lockinfo.h"
#include "result.h"

#include <QByteArray>
#include <QString>
#include <functional>
#include <optional>

namespace tollgate::ui {

struct LockIdentity
{
    quint64 device = 0;
    quint64 inode = 0;
    QByteArray content; // the file's bytes, at most LockInfo::MAX_FILE_BYTES
    qint64 mtime = 0; // unix seconds, for a corrupt lock's age

    [[nodiscard]] bool valid() const { return inode != 0; }
    bool operator==(const LockIdentity& o) const
    {
        return device == o.device && inode == o.inode && content == o.content;
    }
};

class LockTarget
{
public:
    enum class Outcome {
        Removed,
        Gone, // nothing at the path any more
        Changed, // another file, or other bytes, than the ones expected
        Kept, // the same lock, but the decision said no (e.g. its holder is alive)
    };
    struct Look
    {
        bool exists = false;
        LockIdentity identity;
        std::optional<LockInfo> info; // nullopt: corrupt
    };

    // Reads the lock as it is now (no lock taken): identity and parsed content.
    [[nodiscard]] static Result<Look> look(const QString& path);
    // Under the inode's exclusive flock: removes the file if it is still `expected` and
    // `decide` (given what is there) agrees. `found` gets what was there.
    [[nodiscard]] static Result<Outcome> removeIfSame(const QString& path, const LockIdentity& expected,
        const std::function<bool(const Look&)>& decide, Look& found);
};

} // namespace tollgate::ui
