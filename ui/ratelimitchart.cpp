#include "ratelimitchart.h"

#include "niceaxis.h"

#include <QDateTime>
#include <QtCharts/QAreaSeries>
#include <QtCharts/QCategoryAxis>
#include <QtCharts/QChart>
#include <QtCharts/QLineSeries>
#include <QtCharts/QScatterSeries>
#include <QtCharts/QValueAxis>
#include <algorithm>
#include <cmath>

namespace tollgate::ui {

namespace {

constexpr int MAX_TIP_LINES = 8;

QScatterSeries* markerSeries(
    QChart* chart, const QString& name, const QColor& color, QScatterSeries::MarkerShape shape)
{
    auto* s = new QScatterSeries(chart);
    s->setName(name);
    s->setColor(color);
    s->setBorderColor(color.darker(140));
    s->setMarkerShape(shape);
    s->setMarkerSize(11);
    chart->addSeries(s);
    return s;
}

QString hhmmss(qint64 ms)
{
    return QDateTime::fromMSecsSinceEpoch(ms).toString(QStringLiteral("HH:mm:ss"));
}

} // namespace

RateLimitChart::RateLimitChart(QWidget* parent)
    : TimeChartView(tr("429s"), parent)
{
    QChart* chart = this->chart();
    m_line = new QLineSeries(chart);
    m_area = new QAreaSeries(m_line);
    m_area->setName(tr("429s"));
    chart->addSeries(m_area);
    m_pauses
        = markerSeries(chart, tr("pause"), QColor(0x2d, 0x6c, 0xd0), QScatterSeries::MarkerShapeRectangle);
    m_resumes
        = markerSeries(chart, tr("resume"), QColor(0x2e, 0x9d, 0x4f), QScatterSeries::MarkerShapeCircle);
    m_limits = markerSeries(
        chart, tr("limits, resets"), QColor(0x8e, 0x5b, 0xc9), QScatterSeries::MarkerShapeTriangle);
    for (QAbstractSeries* s : chart->series()) {
        s->attachAxis(m_x);
        s->attachAxis(m_y);
    }
    for (QScatterSeries* s : { m_pauses, m_resumes, m_limits }) {
        connect(s, &QScatterSeries::hovered, this, &RateLimitChart::onMarkerHovered);
        connect(s, &QScatterSeries::clicked, this, [this](const QPointF& p) {
            onMarkerHovered(p, true);
            pinTip();
        });
    }
    connect(m_area, &QAreaSeries::hovered, this, &RateLimitChart::onBarHovered);
    connect(m_area, &QAreaSeries::clicked, this, [this](const QPointF& p) {
        onBarHovered(p, true);
        pinTip();
    });
    themeChanged();
}

void RateLimitChart::themeChanged()
{
    if (!m_area)
        return;
    const bool dark = isDark();
    m_area->setColor(dark ? QColor(0xff, 0x6b, 0x6b, 0xb0) : QColor(0xd0, 0x2b, 0x2b, 0xc0));
    // A one-bucket spike in a wide chart is narrow; the border keeps it visible.
    QPen border(dark ? QColor(0xff, 0x9d, 0x9d) : QColor(0xa0, 0x10, 0x10));
    border.setWidthF(1.5);
    m_area->setPen(border);
}

void RateLimitChart::update(const UsageHistory& usage, qint64 nowMs)
{
    m_usage = &usage;
    const ChartSpan::Buckets& b = frame(nowMs, usage.oldestMs());
    m_counts = usage.rateLimits(b);
    QList<QPointF> points;
    points.reserve(b.count * 2 + 1);
    int top = 0;
    m_total = 0;
    // Exact steps: each bucket is drawn from its start to its end at its count, and a change
    // between buckets is a vertical edge, so a spike's height is its count.
    for (int m = 0; m < b.count; ++m) {
        const int v = m_counts[m];
        const double start = static_cast<double>(b.startOf(m));
        if (points.isEmpty() || points.last().y() != v) {
            points.append(QPointF(start, points.isEmpty() ? v : points.last().y()));
            points.append(QPointF(start, v));
        }
        top = std::max(top, v);
        m_total += v;
    }
    points.append(QPointF(static_cast<double>(b.endMs()), points.isEmpty() ? 0.0 : points.last().y()));
    m_line->replace(points);
    NiceAxis::apply(m_y, top * 1.15, 5, yIntervalsThatFit());
    const double yTop = m_y->max();
    setHeading(tr("429s per %1, last %2")
                   .arg(ChartSpan::bucketLabel(b.widthMs), ChartSpan::spanLabel(effectiveSpan())),
        tr("429s / %1").arg(ChartSpan::bucketLabel(b.widthMs)));

    // One mark per kind and bucket: a storm of pauses is one mark that says how many.
    m_groups.clear();
    for (const UsageHistory::Marker& m : usage.markers(nowMs)) {
        const int bucket = b.indexOf(m.timeMs);
        if (bucket < 0)
            continue;
        const int kind = m.type == QLatin1String("pause") ? 0 : m.type == QLatin1String("resume") ? 1 : 2;
        auto it = std::find_if(m_groups.begin(), m_groups.end(),
            [&](const Group& g) { return g.kind == kind && g.bucket == bucket; });
        if (it == m_groups.end()) {
            m_groups.append(Group { kind, bucket, {} });
            it = m_groups.end() - 1;
        }
        it->markers.append(m);
    }
    QList<QPointF> pauses, resumes, limits;
    // Each kind on its own row, so a pause and a resume in one bucket do not hide each other.
    for (const Group& g : m_groups) {
        const double markY = yTop * (0.93 - 0.09 * g.kind);
        const QPointF p(static_cast<double>(b.startOf(g.bucket) + b.widthMs / 2), markY);
        (g.kind == 0 ? pauses : g.kind == 1 ? resumes : limits).append(p);
    }
    m_pauses->replace(pauses);
    m_resumes->replace(resumes);
    m_limits->replace(limits);
    alignPlotAreas();
}

int RateLimitChart::markersShown() const
{
    return static_cast<int>(m_pauses->count() + m_resumes->count() + m_limits->count());
}

int RateLimitChart::markerEvents() const
{
    int n = 0;
    for (const Group& g : m_groups)
        n += static_cast<int>(g.markers.size());
    return n;
}

QString RateLimitChart::markerTipAt(qint64 timeMs) const
{
    const ChartSpan::Buckets& b = buckets();
    const int bucket = b.indexOf(timeMs);
    QStringList lines;
    for (const Group& g : m_groups) {
        if (g.bucket != bucket)
            continue;
        const QString kind = g.markers.first().type;
        if (g.markers.size() > 1)
            lines.append(tr("%1 × %2, %3–%4")
                             .arg(g.markers.size())
                             .arg(kind, hhmmss(g.markers.first().timeMs), hhmmss(g.markers.last().timeMs)));
        for (const auto& m : g.markers) {
            if (lines.size() >= MAX_TIP_LINES) {
                lines.append(QStringLiteral("…"));
                break;
            }
            const QString what = m.provider.isEmpty() ? tr("all providers") : m.provider;
            lines.append(tr("%1 %2 (%3) %4").arg(hhmmss(m.timeMs), m.type, what, m.text).trimmed());
        }
    }
    return lines.join(QLatin1Char('\n'));
}

QString RateLimitChart::barTipAt(qint64 timeMs) const
{
    const ChartSpan::Buckets& b = buckets();
    const int bucket = b.indexOf(timeMs);
    if (bucket < 0 || bucket >= m_counts.size() || m_counts[bucket] == 0 || !m_usage)
        return {};
    const qint64 from = b.startOf(bucket);
    QStringList lines {
        tr("%1 × 429, %2–%3").arg(m_counts[bucket]).arg(hhmmss(from), hhmmss(from + b.widthMs))
    };
    for (const auto& r : m_usage->rateLimitedBetween(from, from + b.widthMs)) {
        if (lines.size() > MAX_TIP_LINES) {
            lines.append(QStringLiteral("…"));
            break;
        }
        lines.append(tr("%1 · %2: %3")
                         .arg(r.provider, r.caller.isEmpty() ? tr("(no caller)") : r.caller)
                         .arg(r.count));
    }
    return lines.join(QLatin1Char('\n'));
}

void RateLimitChart::onMarkerHovered(const QPointF& point, bool state)
{
    if (!state) {
        hideTip();
        return;
    }
    const QString text = markerTipAt(static_cast<qint64>(point.x()));
    if (!text.isEmpty())
        showTip(point, text);
}

void RateLimitChart::onBarHovered(const QPointF& point, bool state)
{
    if (!state) {
        hideTip();
        return;
    }
    const QString text = barTipAt(static_cast<qint64>(point.x()));
    if (text.isEmpty())
        hideTip();
    else
        showTip(point, text);
}

} // namespace tollgate::ui
