#pragma once

// ActionResult: how a user action (pause, limit edit, release...) ended in the worker.
// A force-release of a holder that is still alive is not done; instead the result asks the
// window to confirm, naming the pid and command line, and the window asks again with consent,
// naming the same holder (which the worker re-checks: a changed holder is refused).

#include "dashboardsnapshot.h"
#include "limitchange.h"

#include <QMetaType>
#include <QString>

namespace tollgate::ui {

struct ActionResult
{
    QString action; // short name, e.g. "pause", "release"
    bool ok = false;
    QString message; // what happened, or why not
    bool needsConfirmation = false;
    QString holderKey; // for the confirmation round trip
    qint64 pid = 0;
    QString commandLine;
    HolderInfo holder; // release: the holder acted on (or to confirm), as the worker found it
    bool hasLimitChange = false;
    LimitChange limitChange; // limits: the change asked for (ok: the one made)
};

} // namespace tollgate::ui

Q_DECLARE_METATYPE(tollgate::ui::ActionResult)
