#pragma once

// RateLimitChart: 429s per bucket over the chosen span, with pauses, resumes and limit changes
// marked along the top. Marks that fall into one bucket are one mark ("12 × pause"); hovering
// a mark or a bar shows what it was and a click pins that tip. Updated with replace().

#include "timechart.h"
#include "usagehistory.h"

QT_BEGIN_NAMESPACE
class QAreaSeries;
class QLineSeries;
class QScatterSeries;
QT_END_NAMESPACE

namespace tollgate::ui {

class RateLimitChart final : public TimeChartView
{
    Q_OBJECT
public:
    explicit RateLimitChart(QWidget* parent = nullptr);

    void update(const UsageHistory& usage, qint64 nowMs);

    [[nodiscard]] int totalShown() const { return m_total; } // 429s in the chart (for tests)
    [[nodiscard]] int markersShown() const; // grouped marks drawn
    [[nodiscard]] int markerEvents() const; // the events behind them
    // The tip text for a mark or bar at this time (what hovering there shows; for tests).
    [[nodiscard]] QString markerTipAt(qint64 timeMs) const;
    [[nodiscard]] QString barTipAt(qint64 timeMs) const;

private:
    struct Group
    {
        int kind = 0; // 0 pause, 1 resume, 2 limits and resets
        int bucket = 0;
        QVector<UsageHistory::Marker> markers;
    };
    void onMarkerHovered(const QPointF& point, bool state);
    void onBarHovered(const QPointF& point, bool state);
    void themeChanged() override;

    QLineSeries* m_line = nullptr; // owned by the chart
    QAreaSeries* m_area = nullptr; // owned by the chart
    QScatterSeries* m_pauses = nullptr; // owned by the chart
    QScatterSeries* m_resumes = nullptr; // owned by the chart
    QScatterSeries* m_limits = nullptr; // owned by the chart
    QVector<Group> m_groups;
    QVector<int> m_counts; // per bucket
    QVector<UsageHistory::RateLimited> m_barDetail; // of the hovered bar
    const UsageHistory* m_usage = nullptr; // the last one drawn; owned by the controller
    int m_total = 0;
};

} // namespace tollgate::ui
