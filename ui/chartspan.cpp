#include "chartspan.h"

#include <QDateTime>
#include <QObject>
#include <algorithm>

namespace tollgate::ui {

int ChartSpan::Buckets::indexOf(qint64 t) const
{
    if (t < firstMs || t >= endMs())
        return -1;
    return static_cast<int>((t - firstMs) / widthMs);
}

QVector<qint64> ChartSpan::spans()
{
    return { 5 * MINUTE_MS, 15 * MINUTE_MS, HOUR_MS, 6 * HOUR_MS, 24 * HOUR_MS };
}

QVector<qint64> ChartSpan::autoSpans()
{
    return { 5 * MINUTE_MS, 10 * MINUTE_MS, 15 * MINUTE_MS, 20 * MINUTE_MS, 30 * MINUTE_MS, HOUR_MS,
        2 * HOUR_MS, 3 * HOUR_MS, 6 * HOUR_MS, 12 * HOUR_MS, 24 * HOUR_MS };
}

qint64 ChartSpan::bucketWidth(qint64 spanMs)
{
    // 30 to 96 bars for every span of either list.
    if (spanMs <= 10 * MINUTE_MS)
        return 10 * SECOND_MS;
    if (spanMs <= 30 * MINUTE_MS)
        return 30 * SECOND_MS;
    if (spanMs <= HOUR_MS)
        return MINUTE_MS;
    if (spanMs <= 3 * HOUR_MS)
        return 2 * MINUTE_MS;
    if (spanMs <= 6 * HOUR_MS)
        return 5 * MINUTE_MS;
    return 15 * MINUTE_MS;
}

qint64 ChartSpan::tickStep(qint64 rangeMs, int maxTicks)
{
    static const qint64 STEPS[] = { SECOND_MS, 2 * SECOND_MS, 5 * SECOND_MS, 10 * SECOND_MS, 15 * SECOND_MS,
        30 * SECOND_MS, MINUTE_MS, 2 * MINUTE_MS, 5 * MINUTE_MS, 10 * MINUTE_MS, 15 * MINUTE_MS,
        30 * MINUTE_MS, HOUR_MS, 2 * HOUR_MS, 3 * HOUR_MS, 6 * HOUR_MS, 12 * HOUR_MS };
    const qint64 intervals = std::max(1, maxTicks);
    for (qint64 step : STEPS) {
        if (rangeMs / step <= intervals)
            return step;
    }
    return 24 * HOUR_MS;
}

QVector<qint64> ChartSpan::ticks(qint64 fromMs, qint64 toMs, qint64 stepMs)
{
    QVector<qint64> out;
    if (stepMs <= 0 || toMs < fromMs)
        return out;
    // Multiples on the local clock: shift by the zone's offset, round, shift back (a step of
    // an hour or more starts at a local hour, not at a UTC one).
    const qint64 offset = static_cast<qint64>(QDateTime::fromMSecsSinceEpoch(fromMs).offsetFromUtc()) * 1000;
    for (qint64 t = (floorDiv(fromMs + offset - 1, stepMs) + 1) * stepMs - offset; t <= toMs; t += stepMs)
        out.append(t);
    return out;
}

ChartSpan::Buckets ChartSpan::buckets(qint64 nowMs, qint64 spanMs)
{
    if (!spans().contains(spanMs) && !autoSpans().contains(spanMs))
        spanMs = spans().first();
    Buckets b;
    b.widthMs = bucketWidth(spanMs);
    b.count = static_cast<int>(spanMs / b.widthMs);
    b.firstMs = (floorDiv(nowMs, b.widthMs) - b.count + 1) * b.widthMs;
    return b;
}

qint64 ChartSpan::autoSpan(qint64 oldestMs, qint64 nowMs)
{
    const QVector<qint64> all = autoSpans();
    if (oldestMs <= 0 || oldestMs >= nowMs)
        return all.first();
    for (qint64 span : all) {
        if (buckets(nowMs, span).firstMs <= oldestMs)
            return span;
    }
    return all.last();
}

qint64 ChartSpan::sanitize(qint64 spanMs)
{
    return spans().contains(spanMs) ? spanMs : AUTO;
}

QString ChartSpan::spanLabel(qint64 spanMs)
{
    if (spanMs == AUTO)
        return QObject::tr("Auto");
    if (spanMs < HOUR_MS)
        return QObject::tr("%1 min").arg(spanMs / MINUTE_MS);
    return QObject::tr("%1 h").arg(spanMs / HOUR_MS);
}

QString ChartSpan::bucketLabel(qint64 widthMs)
{
    if (widthMs < MINUTE_MS)
        return QObject::tr("%1 s").arg(widthMs / SECOND_MS);
    if (widthMs == MINUTE_MS)
        return QObject::tr("minute");
    return QObject::tr("%1 min").arg(widthMs / MINUTE_MS);
}

} // namespace tollgate::ui
