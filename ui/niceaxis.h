#pragma once

// NiceAxis: a count axis whose ticks fall on whole, round numbers (1, 2, 5, 10, 20, 50...), so
// an integer label under "%d" is never a rounded 1.25 that puts a 2 next to the "1" line.

#include <QtGlobal>

QT_BEGIN_NAMESPACE
class QValueAxis;
QT_END_NAMESPACE

namespace tollgate::ui {

class NiceAxis
{
public:
    // Sets [0, top'] with top' ≥ top (and at least minTop) and ticks on a round step, at most
    // maxIntervals of them (a short chart has room for fewer labels).
    static void apply(QValueAxis* axis, double top, double minTop = 5, int maxIntervals = 6);
};

} // namespace tollgate::ui
