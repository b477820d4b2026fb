#include "chartspan.h"

#include <QObject>

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

qint64 ChartSpan::bucketWidth(qint64 spanMs)
{
    if (spanMs <= 5 * MINUTE_MS)
        return 10 * SECOND_MS;
    if (spanMs <= 15 * MINUTE_MS)
        return 30 * SECOND_MS;
    if (spanMs <= HOUR_MS)
        return MINUTE_MS;
    if (spanMs <= 6 * HOUR_MS)
        return 5 * MINUTE_MS;
    return 15 * MINUTE_MS;
}

ChartSpan::Buckets ChartSpan::buckets(qint64 nowMs, qint64 spanMs)
{
    spanMs = sanitize(spanMs);
    if (spanMs == AUTO)
        spanMs = spans().first();
    Buckets b;
    b.widthMs = bucketWidth(spanMs);
    b.count = static_cast<int>(spanMs / b.widthMs);
    b.firstMs = (floorDiv(nowMs, b.widthMs) - b.count + 1) * b.widthMs;
    return b;
}

qint64 ChartSpan::autoSpan(qint64 oldestMs, qint64 nowMs)
{
    const QVector<qint64> all = spans();
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
