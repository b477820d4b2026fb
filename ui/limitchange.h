#pragma once

// LimitChange: one edit of a provider's limits as the window asked for it — the limits it
// showed (before) and the ones wanted (after). The worker applies it only if the limits are
// still `before` (compare-and-set under state.lock), so an edit made on a stale view never
// overwrites someone else's change. warnings() names the parts that deserve a question first:
// a limit removed, or changed by more than half.

#include "quota/quotalimits.h"

#include <QMetaType>
#include <QString>
#include <QStringList>

namespace tollgate::ui {

struct LimitChange
{
    QString provider;
    ProviderLimits before;
    ProviderLimits after;
    bool undo = false; // this change undoes the window's previous one
    // The history's description when it must be exact words ("adopted the provider's limits:
    // requests 50 -> 40", as `tollgate limits adopt` writes it); empty: summary().
    QString description;

    // "requests per window: 50 → none (removes the limit)"; empty when nothing is drastic.
    [[nodiscard]] QStringList warnings() const;
    // "requests per window 50 → 40, parallel 4 → 2"; every limit that differs.
    [[nodiscard]] QString summary() const;
    [[nodiscard]] LimitChange reversed() const;
};

} // namespace tollgate::ui

Q_DECLARE_METATYPE(tollgate::ui::LimitChange)
