#pragma once

// RateLimitChart: 429s per minute over the last 24 hours, with pauses, resumes and limit
// changes marked along the top (hover a mark for what it was). Updated with replace().

#include "usagehistory.h"

#include <QtCharts/QChartView>

QT_BEGIN_NAMESPACE
class QAreaSeries;
class QDateTimeAxis;
class QLineSeries;
class QScatterSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace tollgate::ui {

class RateLimitChart final : public QChartView
{
    Q_OBJECT
public:
    explicit RateLimitChart(QWidget* parent = nullptr);

    void update(const UsageHistory& usage, qint64 nowMs);
    // How much of the day to show, in hours (1 to 24); 24 by default.
    void setSpanHours(int hours);
    [[nodiscard]] int spanHours() const { return m_spanHours; }

    [[nodiscard]] int totalShown() const { return m_total; } // 429s in the chart (for tests)
    [[nodiscard]] int markersShown() const;

private:
    void showMarkerTip(const QPointF& point, bool state);

    QLineSeries* m_line = nullptr; // owned by the chart
    QAreaSeries* m_area = nullptr; // owned by the chart
    QScatterSeries* m_pauses = nullptr; // owned by the chart
    QScatterSeries* m_resumes = nullptr; // owned by the chart
    QScatterSeries* m_limits = nullptr; // owned by the chart
    QDateTimeAxis* m_x = nullptr; // owned by the chart
    QValueAxis* m_y = nullptr; // owned by the chart
    QVector<UsageHistory::Marker> m_markerData;
    int m_total = 0;
    int m_spanHours = 24;
};

} // namespace tollgate::ui
