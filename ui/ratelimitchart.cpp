#include "ratelimitchart.h"

#include "niceaxis.h"
#include "timechart.h"

#include <QDateTime>
#include <QToolTip>
#include <QtCharts/QAreaSeries>
#include <QtCharts/QChart>
#include <QtCharts/QDateTimeAxis>
#include <QtCharts/QLineSeries>
#include <QtCharts/QScatterSeries>
#include <QtCharts/QValueAxis>
#include <algorithm>
#include <cmath>

namespace tollgate::ui {

namespace {

QScatterSeries* markerSeries(
    QChart* chart, const QString& name, const QColor& color, QScatterSeries::MarkerShape shape)
{
    auto* s = new QScatterSeries(chart);
    s->setName(name);
    s->setColor(color);
    s->setBorderColor(color.darker(140));
    s->setMarkerShape(shape);
    s->setMarkerSize(9);
    chart->addSeries(s);
    return s;
}

} // namespace

RateLimitChart::RateLimitChart(QWidget* parent)
    : QChartView(parent)
{
    QChart* chart = TimeChart::create(tr("429s per minute, last 24 hours"), m_x, m_y);
    m_line = new QLineSeries(chart);
    m_area = new QAreaSeries(m_line);
    m_area->setName(tr("429s"));
    m_area->setColor(QColor(0xd0, 0x2b, 0x2b, 0xc0));
    // A one-minute spike in a day-wide chart is narrower than a pixel; the border keeps it visible.
    QPen border(QColor(0xa0, 0x10, 0x10));
    border.setWidthF(1.5);
    m_area->setPen(border);
    chart->addSeries(m_area);
    m_pauses
        = markerSeries(chart, tr("pause"), QColor(0x2d, 0x6c, 0xd0), QScatterSeries::MarkerShapeRectangle);
    m_resumes
        = markerSeries(chart, tr("resume"), QColor(0x2e, 0x9d, 0x4f), QScatterSeries::MarkerShapeCircle);
    m_limits = markerSeries(
        chart, tr("limits, resets"), QColor(0x8e, 0x5b, 0xc9), QScatterSeries::MarkerShapeCircle);
    for (QAbstractSeries* s : chart->series()) {
        s->attachAxis(m_x);
        s->attachAxis(m_y);
    }
    for (QScatterSeries* s : { m_pauses, m_resumes, m_limits })
        connect(s, &QScatterSeries::hovered, this, &RateLimitChart::showMarkerTip);
    TimeChart::install(this, chart);
    setSpanHours(24);
}

void RateLimitChart::setSpanHours(int hours)
{
    m_spanHours = std::clamp(hours, 1, UsageHistory::RATE_LIMIT_MINUTES / 60);
    chart()->setTitle(m_spanHours == 1 ? tr("429s per minute, last hour")
                                       : tr("429s per minute, last %1 hours").arg(m_spanHours));
    m_x->setFormat(m_spanHours > 6 ? QStringLiteral("ddd HH:mm") : QStringLiteral("HH:mm"));
}

void RateLimitChart::update(const UsageHistory& usage, qint64 nowMs)
{
    const QVector<int> day = usage.rateLimitsPerMinute(nowMs);
    const int minutes = m_spanHours * 60;
    const int skip = static_cast<int>(day.size()) - minutes;
    const qint64 firstMinute = UsageHistory::minuteOf(nowMs) - minutes + 1;
    QList<QPointF> points;
    points.reserve(minutes * 2);
    int top = 0;
    m_total = 0;
    // Exact steps: each minute is drawn from its start to its end at its count, and a change
    // between minutes is a vertical edge, so a spike's height is its count.
    for (int m = 0; m < minutes; ++m) {
        const int v = day[skip + m];
        const double start = static_cast<double>((firstMinute + m) * UsageHistory::MINUTE_MS);
        if (points.isEmpty() || points.last().y() != v) {
            points.append(QPointF(start, points.isEmpty() ? v : points.last().y()));
            points.append(QPointF(start, v));
        }
        top = std::max(top, v);
        m_total += v;
    }
    points.append(
        QPointF(static_cast<double>((firstMinute + minutes) * UsageHistory::MINUTE_MS), points.last().y()));
    m_line->replace(points);
    NiceAxis::apply(m_y, top * 1.15);
    const double yTop = m_y->max();
    m_x->setRange(QDateTime::fromMSecsSinceEpoch(firstMinute * UsageHistory::MINUTE_MS),
        QDateTime::fromMSecsSinceEpoch((firstMinute + minutes) * UsageHistory::MINUTE_MS));

    m_markerData = usage.markers(nowMs);
    const qint64 shownFrom = firstMinute * UsageHistory::MINUTE_MS;
    m_markerData.erase(std::remove_if(m_markerData.begin(), m_markerData.end(),
                           [shownFrom](const UsageHistory::Marker& m) { return m.timeMs < shownFrom; }),
        m_markerData.end());
    QList<QPointF> pauses, resumes, limits;
    const double markY = yTop * 0.93;
    for (const auto& m : m_markerData) {
        const QPointF p(static_cast<double>(m.timeMs), markY);
        if (m.type == QLatin1String("pause"))
            pauses.append(p);
        else if (m.type == QLatin1String("resume"))
            resumes.append(p);
        else
            limits.append(p);
    }
    m_pauses->replace(pauses);
    m_resumes->replace(resumes);
    m_limits->replace(limits);
}

int RateLimitChart::markersShown() const
{
    return static_cast<int>(m_pauses->count() + m_resumes->count() + m_limits->count());
}

void RateLimitChart::showMarkerTip(const QPointF& point, bool state)
{
    if (!state) {
        QToolTip::hideText();
        return;
    }
    const UsageHistory::Marker* best = nullptr;
    for (const auto& m : m_markerData) {
        if (!best
            || std::abs(static_cast<double>(m.timeMs) - point.x())
                < std::abs(static_cast<double>(best->timeMs) - point.x()))
            best = &m;
    }
    if (!best)
        return;
    const QString when = QDateTime::fromMSecsSinceEpoch(best->timeMs).toString(QStringLiteral("HH:mm:ss"));
    const QString what = best->provider.isEmpty() ? tr("all providers") : best->provider;
    QToolTip::showText(QCursor::pos(), tr("%1 %2 (%3) %4").arg(when, best->type, what, best->text), this);
}

} // namespace tollgate::ui
