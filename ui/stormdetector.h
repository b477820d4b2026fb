#pragma once

// StormDetector: turns a stream of 429s into storms, one per burst, so the user gets one alert
// per storm rather than one per 429.
//
// A storm of a provider starts when `threshold` 429s fall within `window` of each other, and
// ends once a whole `window` passes without a 429 of that provider (hysteresis: a burst that
// hovers around the threshold stays one storm). Time is the events' own time, plus now for
// ending storms and for telling live storms from ones that only show up in old history
// (those are tracked, so their tail raises nothing, but never announced).

#include "history/historyevent.h"

#include <QHash>
#include <QString>
#include <QStringList>
#include <QVector>
#include <deque>

namespace tollgate::ui {

class StormDetector
{
public:
    static constexpr int DEFAULT_THRESHOLD = 3;
    static constexpr qint64 DEFAULT_WINDOW_MS = 60000;

    struct Storm
    {
        QString provider;
        QStringList callers; // distinct, in order of first 429
        int count = 0; // 429s so far
        qint64 startMs = 0; // the first 429 of the burst
        qint64 lastMs = 0;
    };

    void setThreshold(int count, qint64 windowMs);
    [[nodiscard]] int threshold() const { return m_threshold; }
    [[nodiscard]] qint64 windowMs() const { return m_windowMs; }

    // Returns the storms that this batch started and that are live (to alert on).
    QVector<Storm> add(const std::vector<HistoryEvent>& events, qint64 nowMs);
    // Ends storms quiet for a whole window; returns the providers whose storm ended.
    QStringList tick(qint64 nowMs);

    [[nodiscard]] bool anyActive() const;
    [[nodiscard]] const Storm* active(const QString& provider) const;

private:
    struct Track
    {
        std::deque<std::pair<qint64, QString>> recent; // 429 times and callers within the window
        bool inStorm = false;
        Storm storm;
    };

    int m_threshold = DEFAULT_THRESHOLD;
    qint64 m_windowMs = DEFAULT_WINDOW_MS;
    QHash<QString, Track> m_tracks;
};

} // namespace tollgate::ui
