#pragma once

// UsageHistory: what the charts and the per-caller tables show, aggregated incrementally from
// history events as they arrive: admissions per caller in 10-second buckets for the last hour
// and per minute for the last day, every 429 of the last day (with provider and caller), and
// the pauses and limit changes that the 429 chart marks. Memory is bounded by time (old
// buckets are pruned), never by traffic: 360 fine buckets, 1440 minutes, one day of 429s.
// Queries take the buckets to fill (ChartSpan), so every chart span reads the same data.

#include "chartspan.h"
#include "history/historyevent.h"

#include <QHash>
#include <QString>
#include <QVector>
#include <deque>
#include <map>
#include <vector>

namespace tollgate::ui {

class UsageHistory
{
public:
    static constexpr qint64 MINUTE_MS = 60000;
    static constexpr int USAGE_MINUTES = 60;
    static constexpr int RATE_LIMIT_MINUTES = 24 * 60;
    static constexpr qint64 FINE_MS = 10'000; // the finest bucket, kept for USAGE_MINUTES

    struct CallerSeries
    {
        QString caller; // "others" gathers the callers beyond the largest ones
        QVector<double> perBucket; // one value per bucket asked for, oldest first
        double total = 0;
    };
    // Per provider and caller: the same caller name at two providers is two rows (they spend
    // two quotas; summed, the row belonged to neither).
    struct CallerTotals
    {
        QString provider;
        QString caller;
        qint64 requestsLastMinute = 0;
        qint64 requests = 0; // last 60 minutes
        qint64 tokens = 0; // last 60 minutes
        double share = 0; // of all requests in the last 60 minutes
    };
    struct RateLimited
    {
        QString provider;
        QString caller;
        int count = 0; // last 24 h
        qint64 lastMs = 0;
    };
    struct Marker
    {
        qint64 timeMs = 0;
        QString type; // pause, resume, limits, backoff-reset
        QString provider; // empty: all
        QString text;
    };

    // The name of the band that sums the callers beyond the largest ones.
    [[nodiscard]] static QString othersName();

    // The provider view: every query below answers for this provider only (its callers, its
    // 429s, its markers and those of every provider); empty: all providers. Kept events are
    // not dropped, so the scope can change back.
    void setProviderScope(const QString& provider);
    [[nodiscard]] QString providerScope() const { return m_scope; }

    void add(const std::vector<HistoryEvent>& events);
    void clear();
    void prune(qint64 nowMs);

    [[nodiscard]] static qint64 minuteOf(qint64 ms)
    {
        return ms >= 0 ? ms / MINUTE_MS : (ms - MINUTE_MS + 1) / MINUTE_MS;
    }
    // Largest callers first (by total over the buckets); beyond maxCallers they are summed as
    // "others". Buckets narrower than a minute reach back one hour at most (older are empty).
    [[nodiscard]] QVector<CallerSeries> callerSeries(
        const ChartSpan::Buckets& buckets, bool tokens, int maxCallers) const;
    [[nodiscard]] QVector<CallerTotals> callerTotals(qint64 nowMs) const; // by requests, largest first
    [[nodiscard]] QVector<int> rateLimits(const ChartSpan::Buckets& buckets) const; // per bucket
    // The 429s in [fromMs, toMs), by provider and caller, most first (for a chart's tooltip).
    [[nodiscard]] QVector<RateLimited> rateLimitedBetween(qint64 fromMs, qint64 toMs) const;
    // The oldest admission, 429 or marker still kept (0: none), for the automatic span.
    [[nodiscard]] qint64 oldestMs() const;
    [[nodiscard]] QVector<RateLimited> rateLimitedCallers(qint64 nowMs) const; // most 429s first
    [[nodiscard]] QVector<Marker> markers(qint64 nowMs) const;

private:
    struct Usage
    {
        qint64 requests = 0;
        qint64 tokens = 0;
    };
    struct Hit
    {
        qint64 timeMs = 0;
        QString provider;
        QString caller;
    };

    [[nodiscard]] bool inScope(const QString& provider) const;

    QString m_scope;
    // Keyed by usageKey(provider, caller).
    std::map<qint64, QHash<QString, Usage>> m_usage; // minute -> caller -> admissions (a day)
    std::map<qint64, QHash<QString, Usage>> m_fine; // FINE_MS bucket -> caller (an hour)
    std::deque<Hit> m_hits; // 429s, in arrival order
    std::deque<Marker> m_markers;
};

} // namespace tollgate::ui
