#pragma once

// ChartSpan: the time spans the charts offer (5 min to 24 h), the bucket width that goes with
// each (so every span draws 30–96 bars, never a 1-pixel storm or a 15 % strip of data), and the
// automatic choice: the shortest span of a finer ladder (5, 10, 15, 20, 30 min, 1, 2, 3, 6, 12,
// 24 h) that still shows the oldest data there is — 16 minutes of data fill 4/5 of a 20-minute
// chart (issue 28: the choice among the offered spans showed them in a quarter of an hour's).
//
// Buckets are aligned to multiples of their width since the epoch, so a bucket's contents do
// not change as time moves on; the last bucket is the one that holds "now".

#include <QString>
#include <QVector>
#include <QtGlobal>

namespace tollgate::ui {

class ChartSpan
{
public:
    static constexpr qint64 SECOND_MS = 1000;
    static constexpr qint64 MINUTE_MS = 60 * SECOND_MS;
    static constexpr qint64 HOUR_MS = 60 * MINUTE_MS;
    static constexpr qint64 AUTO = 0; // the span value that means "choose for me"

    struct Buckets
    {
        qint64 firstMs = 0; // start of the oldest bucket
        qint64 widthMs = MINUTE_MS;
        int count = 0;
        [[nodiscard]] qint64 endMs() const { return firstMs + widthMs * count; }
        [[nodiscard]] qint64 startOf(int i) const { return firstMs + widthMs * i; }
        // -1 when t is outside
        [[nodiscard]] int indexOf(qint64 t) const;
    };

    [[nodiscard]] static QVector<qint64> spans(); // 5 min, 15 min, 1 h, 6 h, 24 h
    [[nodiscard]] static QVector<qint64> autoSpans(); // the ladder Auto chooses from
    [[nodiscard]] static qint64 bucketWidth(qint64 spanMs);
    [[nodiscard]] static Buckets buckets(qint64 nowMs, qint64 spanMs);
    // The shortest span of autoSpans() reaching back to oldestMs (≤ 0: no data, the shortest).
    [[nodiscard]] static qint64 autoSpan(qint64 oldestMs, qint64 nowMs);
    // A stored or offered value made valid: AUTO or one of spans(); anything else is AUTO.
    [[nodiscard]] static qint64 sanitize(qint64 spanMs);
    [[nodiscard]] static QString spanLabel(qint64 spanMs); // "5 min", "1 h"
    // A round step for time ticks (1, 2, 5, 10, 15, 30 s; 1, 2, 5, 10, 15, 30 min; 1, 2, 3, 6,
    // 12 h): the smallest that puts at most maxTicks intervals into rangeMs.
    [[nodiscard]] static qint64 tickStep(qint64 rangeMs, int maxTicks);
    // The ticks of that step within [fromMs, toMs], at multiples of it on the local wall clock
    // (18:55, 19:00, 19:05), so both charts and every redraw put them at the same times.
    [[nodiscard]] static QVector<qint64> ticks(qint64 fromMs, qint64 toMs, qint64 stepMs);
    [[nodiscard]] static QString bucketLabel(qint64 widthMs); // "10 s", "minute", "5 min"

    [[nodiscard]] static qint64 floorDiv(qint64 a, qint64 b) { return a >= 0 ? a / b : (a - b + 1) / b; }
};

} // namespace tollgate::ui
