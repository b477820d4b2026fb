#pragma once

// StateIcon: the tray and window icon, drawn rather than loaded so that its look always
// matches the four states: normal (green, a check), backoff (amber, an hourglass), paused
// (blue, two bars) and storm (red, a lightning bolt). Ordered by urgency.

#include <QIcon>
#include <QString>

namespace tollgate::ui {

enum class TrayState { Normal, Backoff, Paused, Storm };

class StateIcon
{
public:
    [[nodiscard]] static QIcon icon(TrayState state);
    [[nodiscard]] static QString name(TrayState state);
};

} // namespace tollgate::ui
