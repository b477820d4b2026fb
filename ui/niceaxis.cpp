#include "niceaxis.h"

#include <QtCharts/QValueAxis>
#include <cmath>

namespace tollgate::ui {

void NiceAxis::apply(QValueAxis* axis, double top, double minTop, int maxIntervals)
{
    const int intervals = std::max(1, maxIntervals);
    top = std::max(top * 1.1, minTop);
    double step = 1;
    for (double magnitude = 1;; magnitude *= 10) {
        bool found = false;
        for (double m : { 1.0, 2.0, 5.0 }) {
            step = m * magnitude;
            if (std::ceil(top / step) <= intervals) {
                found = true;
                break;
            }
        }
        if (found)
            break;
    }
    const double rounded = std::ceil(top / step) * step;
    axis->setRange(0, rounded);
    axis->setTickCount(static_cast<int>(std::lround(rounded / step)) + 1);
}

} // namespace tollgate::ui
