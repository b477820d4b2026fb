#include "usagechart.h"

#include "niceaxis.h"

#include <QDateTime>
#include <QLocale>
#include <QtCharts/QAreaSeries>
#include <QtCharts/QCategoryAxis>
#include <QtCharts/QChart>
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
    : TimeChartView(QString(), parent)
{
    QChart* c = chart();
    QLineSeries* below = nullptr;
    for (int i = 0; i < MAX_BANDS; ++i) {
        auto* upper = new QLineSeries(c);
        auto* area = new QAreaSeries(upper, below);
        c->addSeries(area);
        area->attachAxis(m_x);
        area->attachAxis(m_y);
        area->setVisible(false);
        m_uppers.append(upper);
        m_areas.append(area);
        below = upper;
        connect(area, &QAreaSeries::hovered, this, &UsageChart::onBandHovered);
        connect(area, &QAreaSeries::clicked, this, [this](const QPointF& p) {
            onBandHovered(p, true);
            pinTip();
        });
    }
    m_limit = new QLineSeries(c);
    m_limit->setName(tr("limit"));
    c->addSeries(m_limit);
    m_limit->attachAxis(m_x);
    m_limit->attachAxis(m_y);
    m_limit->setVisible(false);
    themeChanged();
    updateTitle();
}

void UsageChart::setShowTokens(bool tokens)
{
    m_tokens = tokens;
    updateTitle();
}

void UsageChart::setLimitRates(double requestsPerSecond, double tokensPerSecond)
{
    m_requestRate = requestsPerSecond;
    m_tokenRate = tokensPerSecond;
}

void UsageChart::updateTitle()
{
    const QString per
        = ChartSpan::bucketLabel(buckets().count > 0 ? buckets().widthMs : ChartSpan::MINUTE_MS);
    const QString span = ChartSpan::spanLabel(effectiveSpan() > 0 ? effectiveSpan() : ChartSpan::HOUR_MS);
    setHeading(m_tokens ? tr("Tokens per %1 by caller, last %2").arg(per, span)
                        : tr("Requests per %1 by caller, last %2").arg(per, span),
        m_tokens ? tr("tokens / %1").arg(per) : tr("requests / %1").arg(per));
}

void UsageChart::themeChanged()
{
    if (!m_limit)
        return;
    QPen pen(isDark() ? QColor(0xff, 0x8a, 0x80) : QColor(0xb0, 0x10, 0x10));
    pen.setWidthF(2);
    pen.setStyle(Qt::DashLine);
    m_limit->setPen(pen);
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
    const ChartSpan::Buckets& b = frame(nowMs, usage.oldestMs());
    // As many bands as the legend can name (one row is the limit's); the rest are "others".
    const int bands = std::clamp(legendRowsThatFit() - 1, 3, static_cast<int>(MAX_BANDS));
    const QVector<UsageHistory::CallerSeries> series = usage.callerSeries(b, m_tokens, bands);
    m_series = series;
    QVector<double> base(b.count, 0.0);
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
        points.reserve(b.count * 2 + 1);
        // Each bucket is a flat step from its start to its end, as the data is. Every band
        // has the same x values, so the band above can use this one as its lower edge.
        for (int m = 0; m < b.count; ++m) {
            const double below = points.isEmpty() ? base[m] + s.perBucket[m] : points.last().y();
            base[m] += s.perBucket[m];
            top = std::max(top, base[m]);
            const double start = static_cast<double>(b.startOf(m));
            points.append(QPointF(start, below));
            points.append(QPointF(start, base[m]));
        }
        points.append(QPointF(static_cast<double>(b.endMs()), points.last().y()));
        m_uppers[band]->replace(points);
        area->setName(s.caller);
        const QColor c = colorFor(s.caller);
        if (area->color() != c) {
            area->setColor(c);
            area->setBorderColor(c.darker(130));
        }
        area->setVisible(true);
    }
    const double rate = m_tokens ? m_tokenRate : m_requestRate;
    const double limit = rate > 0 ? rate * static_cast<double>(b.widthMs) / 1000.0 : 0.0;
    m_limitPerBucket = limit;
    if (limit > 0) {
        m_limit->replace({ QPointF(static_cast<double>(b.firstMs), limit),
            QPointF(static_cast<double>(b.endMs()), limit) });
        m_limit->setName(
            tr("limit (%1 per %2)").arg(std::round(limit * 10) / 10).arg(ChartSpan::bucketLabel(b.widthMs)));
        m_limit->setVisible(true);
    } else {
        m_limit->clear();
        m_limit->setVisible(false);
    }
    // A limit far above the traffic would flatten it: the line is drawn only up to 4× the top.
    NiceAxis::apply(m_y, (limit > 0 && limit <= std::max(top, 1.0) * 4) ? std::max(top, limit) : top, 5,
        yIntervalsThatFit());
    for (int band = 0; band < MAX_BANDS; ++band) {
        const auto markers = chart()->legend()->markers(m_areas[band]);
        for (QLegendMarker* marker : markers)
            marker->setVisible(band < series.size());
    }
    for (QLegendMarker* marker : chart()->legend()->markers(m_limit))
        marker->setVisible(limit > 0);
    updateTitle();
    alignPlotAreas();
}

QString UsageChart::tipAt(qint64 timeMs) const
{
    const ChartSpan::Buckets& b = buckets();
    const int bucket = b.indexOf(timeMs);
    if (bucket < 0)
        return {};
    const qint64 from = b.startOf(bucket);
    auto hhmmss
        = [](qint64 ms) { return QDateTime::fromMSecsSinceEpoch(ms).toString(QStringLiteral("HH:mm:ss")); };
    const QString unit = m_tokens ? tr("tokens") : tr("requests");
    QStringList lines { tr("%1–%2").arg(hhmmss(from), hhmmss(from + b.widthMs)) };
    double total = 0;
    for (const auto& s : m_series) {
        const double v = bucket < s.perBucket.size() ? s.perBucket[bucket] : 0.0;
        total += v;
        if (v > 0)
            lines.append(tr("%1: %2").arg(s.caller, QLocale().toString(v, 'f', 0)));
    }
    lines.append(tr("total: %1 %2").arg(QLocale().toString(total, 'f', 0), unit));
    if (m_limitPerBucket > 0)
        lines.append(tr("limit: %1 per %2")
                         .arg(QLocale().toString(m_limitPerBucket, 'f', m_limitPerBucket < 10 ? 1 : 0),
                             ChartSpan::bucketLabel(b.widthMs)));
    return lines.join(QLatin1Char('\n'));
}

void UsageChart::onBandHovered(const QPointF& point, bool state)
{
    if (!state) {
        hideTip();
        return;
    }
    const QString text = tipAt(static_cast<qint64>(point.x()));
    if (text.isEmpty())
        hideTip();
    else
        showTip(point, text);
}

QList<TimeChartView::Scope> UsageChart::scopes() const
{
    QList<Scope> out;
    const QString others = UsageHistory::othersName();
    for (QAreaSeries* area : m_areas) {
        if (area->isVisible() && area->name() != others)
            out.append(Scope { QString(), area->name() });
    }
    return out;
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

double UsageChart::limitLineValue() const
{
    return m_limit->isVisible() && m_limit->count() > 0 ? m_limit->at(0).y() : 0.0;
}

QList<QPointF> UsageChart::bandPoints(int band) const
{
    return band >= 0 && band < m_uppers.size() ? m_uppers[band]->points() : QList<QPointF>();
}

} // namespace tollgate::ui
