#pragma once

// TimeChart: the frame shared by the dashboard's per-minute charts — a chart with a HH:mm
// time axis at the bottom, a whole-number count axis at the left and the legend at the right.

#include <QString>

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QDateTimeAxis;
class QValueAxis;
QT_END_NAMESPACE

namespace tollgate::ui {

class TimeChart
{
public:
    // Builds the chart and its two axes (owned by the chart); the caller adds the series.
    [[nodiscard]] static QChart* create(const QString& title, QDateTimeAxis*& x, QValueAxis*& y);
    // Hands the finished chart to the view (which takes ownership) with the common look.
    static void install(QChartView* view, QChart* chart);
};

} // namespace tollgate::ui
