#include "stormdetector.h"

namespace tollgate::ui {

void StormDetector::setThreshold(int count, qint64 windowMs)
{
    m_threshold = std::max(1, count);
    m_windowMs = std::max<qint64>(1000, windowMs);
}

QVector<StormDetector::Storm> StormDetector::add(const std::vector<HistoryEvent>& events, qint64 nowMs)
{
    QVector<Storm> started;
    for (const HistoryEvent& e : events) {
        if (e.type != EventType::RateLimited)
            continue;
        const QString provider = QString::fromStdString(e.provider);
        const QString caller = QString::fromStdString(e.caller);
        Track& t = m_tracks[provider];
        if (t.inStorm && e.timeMs - t.storm.lastMs > m_windowMs)
            t.inStorm = false; // a quiet window passed inside this batch: that storm is over
        while (!t.recent.empty() && t.recent.front().first < e.timeMs - m_windowMs)
            t.recent.pop_front();
        t.recent.emplace_back(e.timeMs, caller);
        if (t.inStorm) {
            ++t.storm.count;
            t.storm.lastMs = std::max<qint64>(t.storm.lastMs, e.timeMs);
            if (!t.storm.callers.contains(caller))
                t.storm.callers.append(caller);
            continue;
        }
        if (static_cast<int>(t.recent.size()) < m_threshold)
            continue;
        t.inStorm = true;
        t.storm = Storm {};
        t.storm.provider = provider;
        t.storm.count = static_cast<int>(t.recent.size());
        t.storm.startMs = t.recent.front().first;
        t.storm.lastMs = e.timeMs;
        for (const auto& [time, who] : t.recent) {
            if (!t.storm.callers.contains(who))
                t.storm.callers.append(who);
        }
        if (e.timeMs >= nowMs - m_windowMs)
            started.append(t.storm);
    }
    // A storm whose latest 429 made it into a later batch is still one storm: report the
    // final caller list by refreshing the entries of those just started.
    for (Storm& s : started)
        s = m_tracks.value(s.provider).storm;
    return started;
}

QStringList StormDetector::tick(qint64 nowMs)
{
    QStringList ended;
    for (auto it = m_tracks.begin(); it != m_tracks.end(); ++it) {
        if (it->inStorm && nowMs - it->storm.lastMs > m_windowMs) {
            it->inStorm = false;
            ended.append(it.key());
        }
    }
    return ended;
}

bool StormDetector::anyActive() const
{
    for (const Track& t : m_tracks) {
        if (t.inStorm)
            return true;
    }
    return false;
}

const StormDetector::Storm* StormDetector::active(const QString& provider) const
{
    auto it = m_tracks.constFind(provider);
    return it != m_tracks.constEnd() && it->inStorm ? &it->storm : nullptr;
}

} // namespace tollgate::ui
