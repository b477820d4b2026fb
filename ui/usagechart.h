#pragma once

// UsageChart: requests (or tokens) per bucket per caller over the chosen span, stacked, so the
// caller eating the quota is the biggest band, with the limit drawn as a dashed line (the
// limit's sustained rate in the same bucket width). The series are created once and updated
// with replace(); a caller keeps its colour for as long as the dashboard runs. Hovering a band
// shows the bucket's time and every caller's value in it; a click pins that tip.

#include "timechart.h"
#include "usagehistory.h"

#include <QHash>

QT_BEGIN_NAMESPACE
class QAreaSeries;
class QLineSeries;
QT_END_NAMESPACE

namespace tollgate::ui {

class UsageChart final : public TimeChartView
{
    Q_OBJECT
public:
    static constexpr int MAX_BANDS = 7; // the six largest callers and "others"

    explicit UsageChart(QWidget* parent = nullptr);

    void setShowTokens(bool tokens);
    [[nodiscard]] bool showsTokens() const { return m_tokens; }
    // The limits as rates (per second; ≤ 0: no limit line). Drawn per bucket at the next update.
    void setLimitRates(double requestsPerSecond, double tokensPerSecond);
    void update(const UsageHistory& usage, qint64 nowMs);

    [[nodiscard]] QStringList bandNames() const; // visible bands, largest first (for tests)
    [[nodiscard]] double limitLineValue() const; // per bucket; 0 when not drawn (for tests)
    [[nodiscard]] QList<QPointF> bandPoints(int band) const; // the upper edge (for tests)
    // What hovering the bucket at this time shows: its time, each caller's value, the total
    // and the limit (also for tests).
    [[nodiscard]] QString tipAt(qint64 timeMs) const;

private:
    void onBandHovered(const QPointF& point, bool state);
    [[nodiscard]] QColor colorFor(const QString& caller);
    void updateTitle();
    void themeChanged() override;
    [[nodiscard]] QList<Scope> scopes() const override;

    bool m_tokens = false;
    double m_requestRate = 0;
    double m_tokenRate = 0;
    QVector<QLineSeries*> m_uppers; // owned by the chart via the area series
    QVector<QAreaSeries*> m_areas; // owned by the chart
    QLineSeries* m_limit = nullptr; // owned by the chart
    QHash<QString, QColor> m_colors;
    QVector<UsageHistory::CallerSeries> m_series; // of the last redraw, largest first
    double m_limitPerBucket = 0;
};

} // namespace tollgate::ui
