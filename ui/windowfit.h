#pragma once

// WindowFit: where a window goes so that all of it, title bar and status bar included, is on
// the available part of a screen. A saved geometry is kept as it is when it fits; one that is
// partly off-screen is moved in; one larger than the screen is shrunk to it and centred.

#include <QMargins>
#include <QRect>

namespace tollgate::ui {

class WindowFit
{
public:
    // wanted: the client area; frame: what the window manager adds around it (title bar);
    // returns the client area to use.
    [[nodiscard]] static QRect fit(const QRect& wanted, const QRect& available, const QMargins& frame = {});
    // The first-run size: preferred, but at most the screen when it is small (up to 1600×900),
    // else at most 90 % of it; centred.
    [[nodiscard]] static QRect initial(
        const QSize& preferred, const QRect& available, const QMargins& frame = {});
};

} // namespace tollgate::ui
