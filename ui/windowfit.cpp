#include "windowfit.h"

#include <algorithm>

namespace tollgate::ui {

QRect WindowFit::fit(const QRect& wanted, const QRect& available, const QMargins& frame)
{
    if (!available.isValid() || !wanted.isValid())
        return wanted;
    const QRect outer = wanted.marginsAdded(frame);
    if (available.contains(outer))
        return wanted;
    const QSize room = available.size().shrunkBy(frame);
    QSize size = wanted.size().boundedTo(room);
    QRect r(QPoint(0, 0), size);
    if (size != wanted.size()) {
        // Shrunk: centred, where a smaller window is expected.
        r.moveCenter(available.center());
        r.translate((frame.left() - frame.right()) / 2, (frame.top() - frame.bottom()) / 2);
    } else {
        // Only off-position: moved the least way in.
        const int minX = available.left() + frame.left();
        const int minY = available.top() + frame.top();
        const int maxX = available.right() - frame.right() - size.width() + 1;
        const int maxY = available.bottom() - frame.bottom() - size.height() + 1;
        r.moveTopLeft(QPoint(std::clamp(wanted.left(), minX, std::max(minX, maxX)),
            std::clamp(wanted.top(), minY, std::max(minY, maxY))));
    }
    return r;
}

QRect WindowFit::initial(const QSize& preferred, const QRect& available, const QMargins& frame)
{
    if (!available.isValid())
        return QRect(QPoint(0, 0), preferred);
    // A small screen (up to 1600×900) is given whole: at 1280×720 every pixel goes to the
    // panels (90 % of it, 1152×618, made the tables scroll sideways); a larger one keeps a
    // margin around the window.
    const bool small = available.width() <= 1600 || available.height() <= 900;
    const QSize room = (small ? available.size() : available.size() * 0.9).shrunkBy(frame);
    QRect r(QPoint(0, 0), preferred.boundedTo(room));
    r.moveCenter(available.center());
    return fit(r, available, frame);
}

} // namespace tollgate::ui
