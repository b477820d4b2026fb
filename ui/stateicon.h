#pragma once

// StateIcon: the tray and window icons, Tollgate's own SVGs from resources/icons.qrc
// (":/icons/state-*.svg", rendered by Qt's SVG icon engine, so every size is sharp).
//
// One set serves light and dark palettes: every colour in the set other than white is chosen
// with at least 3:1 contrast against both white and #2d2d2d (WCAG's non-text contrast), and
// white appears only inside a coloured shape. tst_icons checks that rule on every file, so no
// "-dark" variants and no palette switch are needed. A new icon must keep to it.

#include <QIcon>
#include <QString>

namespace tollgate::ui {

// Ordered by urgency. The set also has ":/icons/state-near.svg" (a provider close to its
// limit), which the capacity views use; the tray has no such state yet.
enum class TrayState { Normal, Backoff, Paused, Storm };

class StateIcon
{
public:
    [[nodiscard]] static QIcon icon(TrayState state);
    // The short state name ("normal", "backoff", "paused", "storm").
    [[nodiscard]] static QString name(TrayState state);
    // Normal -> state-ok, Backoff -> state-blocked (the boom is down), Paused -> state-paused,
    // Storm -> state-error: ":/icons/state-ok.svg" and so on.
    [[nodiscard]] static QString resourcePath(TrayState state);
    // The application icon (":/icons/tollgate.svg"), a boom barrier.
    [[nodiscard]] static QIcon appIcon();
    // One of the toolbar icons by name ("pause", "resume", "refresh", "release", "clean",
    // "settings", "undo", "filter"): QIcon(":/icons/<name>.svg").
    [[nodiscard]] static QIcon toolbarIcon(const QString& name);
};

} // namespace tollgate::ui
