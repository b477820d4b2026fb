#pragma once

// UsageChart: requests (or tokens) per minute per caller over the last hour, stacked, so the
// caller eating the quota is the biggest band. The series are created once and updated with
// replace(); a caller keeps its colour for as long as the dashboard runs.

#include "usagehistory.h"

#include <QHash>
#include <QtCharts/QChartView>

QT_BEGIN_NAMESPACE
class QAreaSeries;
class QDateTimeAxis;
class QLineSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace tollgate::ui {

class UsageChart final : public QChartView
{
    Q_OBJECT
public:
    static constexpr int MAX_BANDS = 7; // the six largest callers and "others"

    explicit UsageChart(QWidget* parent = nullptr);

    void setShowTokens(bool tokens);
    [[nodiscard]] bool showsTokens() const { return m_tokens; }
    void update(const UsageHistory& usage, qint64 nowMs);

    [[nodiscard]] QStringList bandNames() const; // visible bands, largest first (for tests)

private:
    [[nodiscard]] QColor colorFor(const QString& caller);

    bool m_tokens = false;
    QVector<QLineSeries*> m_uppers; // owned by the chart via the area series
    QVector<QAreaSeries*> m_areas; // owned by the chart
    QDateTimeAxis* m_x = nullptr; // owned by the chart
    QValueAxis* m_y = nullptr; // owned by the chart
    QHash<QString, QColor> m_colors;
};

} // namespace tollgate::ui
