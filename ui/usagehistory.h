#pragma once

// UsageHistory: what the charts and the per-caller tables show, aggregated incrementally from
// history events as they arrive: admissions per minute per caller for the last hour, every
// 429 of the last day (with provider and caller), and the pauses and limit changes that the
// 429 chart marks. Memory is bounded by time (old minutes are pruned), never by traffic
// beyond one hour of per-minute buckets and one day of 429s and markers.

#include "historyevent.h"

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

    struct CallerSeries
    {
        QString caller; // "others" gathers the callers beyond the largest ones
        QVector<double> perMinute; // USAGE_MINUTES values, oldest first, the current minute last
        double total = 0;
    };
    struct CallerTotals
    {
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

    void add(const std::vector<HistoryEvent>& events);
    void clear();
    void prune(qint64 nowMs);

    [[nodiscard]] static qint64 minuteOf(qint64 ms)
    {
        return ms >= 0 ? ms / MINUTE_MS : (ms - MINUTE_MS + 1) / MINUTE_MS;
    }
    // Largest callers first (by total over the hour); beyond maxCallers they are summed as "others".
    [[nodiscard]] QVector<CallerSeries> callerSeries(qint64 nowMs, bool tokens, int maxCallers) const;
    [[nodiscard]] QVector<CallerTotals> callerTotals(qint64 nowMs) const; // by requests, largest first
    [[nodiscard]] QVector<int> rateLimitsPerMinute(
        qint64 nowMs) const; // RATE_LIMIT_MINUTES values, oldest first
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

    std::map<qint64, QHash<QString, Usage>> m_usage; // minute -> caller -> admissions
    std::deque<Hit> m_hits; // 429s, in arrival order
    std::deque<Marker> m_markers;
};

} // namespace tollgate::ui
