#include "usagechart.h"

#include "niceaxis.h"
#include "timechart.h"

#include <QDateTime>
#include <QtCharts/QAreaSeries>
#include <QtCharts/QChart>
#include <QtCharts/QDateTimeAxis>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QLineSeries>
#include <QtCharts/QValueAxis>
#include <cmath>

namespace tollgate::ui {

namespace {

const QColor PALETTE[] = { QColor(0xd6, 0x4f, 0x3c), QColor(0x3b, 0x7d, 0xd8), QColor(0x2f, 0xa3, 0x6b),
    QColor(0xe8, 0xa2, 0x1b), QColor(0x8e, 0x5b, 0xc9), QColor(0x1f, 0xa8, 0xb5), QColor(0xc2, 0x5a, 0x9c),
    QColor(0x7a, 0x8a, 0x32) };

} // namespace

UsageChart::UsageChart(QWidget* parent)
    : QChartView(parent)
{
    QChart* chart = TimeChart::create(tr("Requests per minute by caller, last 60 minutes"), m_x, m_y);
    QLineSeries* below = nullptr;
    for (int i = 0; i < MAX_BANDS; ++i) {
        auto* upper = new QLineSeries(chart);
        auto* area = new QAreaSeries(upper, below);
        chart->addSeries(area);
        area->attachAxis(m_x);
        area->attachAxis(m_y);
        area->setVisible(false);
        m_uppers.append(upper);
        m_areas.append(area);
        below = upper;
    }
    TimeChart::install(this, chart);
}

void UsageChart::setShowTokens(bool tokens)
{
    m_tokens = tokens;
    chart()->setTitle(tokens ? tr("Tokens per minute by caller, last 60 minutes")
                             : tr("Requests per minute by caller, last 60 minutes"));
}

QColor UsageChart::colorFor(const QString& caller)
{
    auto it = m_colors.constFind(caller);
    if (it != m_colors.constEnd())
        return *it;
    const QColor c = PALETTE[m_colors.size() % static_cast<int>(std::size(PALETTE))];
    m_colors.insert(caller, c);
    return c;
}

void UsageChart::update(const UsageHistory& usage, qint64 nowMs)
{
    const QVector<UsageHistory::CallerSeries> series = usage.callerSeries(nowMs, m_tokens, MAX_BANDS);
    const qint64 firstMinute = UsageHistory::minuteOf(nowMs) - UsageHistory::USAGE_MINUTES + 1;
    QVector<double> base(UsageHistory::USAGE_MINUTES, 0.0);
    double top = 0;
    for (int band = 0; band < MAX_BANDS; ++band) {
        QAreaSeries* area = m_areas[band];
        if (band >= series.size()) {
            m_uppers[band]->clear();
            area->setVisible(false);
            continue;
        }
        const auto& s = series[band];
        QList<QPointF> points;
        points.reserve(UsageHistory::USAGE_MINUTES * 2 + 1);
        // Each minute is a flat step from its start to its end, as the data is. Every band
        // has the same x values, so the band above can use this one as its lower edge.
        for (int m = 0; m < UsageHistory::USAGE_MINUTES; ++m) {
            const double below = points.isEmpty() ? base[m] + s.perMinute[m] : points.last().y();
            base[m] += s.perMinute[m];
            top = std::max(top, base[m]);
            const double start = static_cast<double>((firstMinute + m) * UsageHistory::MINUTE_MS);
            points.append(QPointF(start, below));
            points.append(QPointF(start, base[m]));
        }
        points.append(QPointF(
            static_cast<double>((firstMinute + UsageHistory::USAGE_MINUTES) * UsageHistory::MINUTE_MS),
            points.last().y()));
        m_uppers[band]->replace(points);
        area->setName(s.caller);
        const QColor c = colorFor(s.caller);
        if (area->color() != c) {
            area->setColor(c);
            area->setBorderColor(c.darker(130));
        }
        area->setVisible(true);
    }
    // Bands below the largest: the lower series must be the band below, which it is by
    // construction; hidden bands keep no points.
    m_x->setRange(QDateTime::fromMSecsSinceEpoch(firstMinute * UsageHistory::MINUTE_MS),
        QDateTime::fromMSecsSinceEpoch(
            (firstMinute + UsageHistory::USAGE_MINUTES) * UsageHistory::MINUTE_MS));
    NiceAxis::apply(m_y, top);
    for (int band = 0; band < MAX_BANDS; ++band) {
        const auto markers = chart()->legend()->markers(m_areas[band]);
        for (QLegendMarker* marker : markers)
            marker->setVisible(band < series.size());
    }
}

QStringList UsageChart::bandNames() const
{
    QStringList out;
    for (QAreaSeries* area : m_areas) {
        if (area->isVisible())
            out.append(area->name());
    }
    return out;
}

} // namespace tollgate::ui
