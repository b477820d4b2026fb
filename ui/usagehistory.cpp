#include "usagehistory.h"

#include <QObject>
#include <algorithm>
#include <tuple>

namespace tollgate::ui {

QString UsageHistory::othersName()
{
    return QObject::tr("others");
}

namespace {

QString qs(std::string_view s)
{
    return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

// A usage entry's key: provider, a unit separator (no provider or caller name holds one:
// both are sanitised of control characters), caller.
constexpr QChar SEPARATOR(0x1f);
QString usageKey(const QString& provider, const QString& caller)
{
    return provider + SEPARATOR + caller;
}
QString providerOf(const QString& key)
{
    return key.left(key.indexOf(SEPARATOR));
}
QString callerOf(const QString& key)
{
    return key.mid(key.indexOf(SEPARATOR) + 1);
}

} // namespace

void UsageHistory::add(const std::vector<HistoryEvent>& events)
{
    for (const HistoryEvent& e : events) {
        if (e.type == EventType::Admit) {
            const QString caller = usageKey(qs(e.provider), qs(e.caller));
            Usage& u = m_usage[minuteOf(e.timeMs)][caller];
            ++u.requests;
            u.tokens += e.tokens;
            Usage& f = m_fine[ChartSpan::floorDiv(e.timeMs, FINE_MS)][caller];
            ++f.requests;
            f.tokens += e.tokens;
        } else if (e.type == EventType::RateLimited) {
            m_hits.push_back({ e.timeMs, qs(e.provider), qs(e.caller) });
        } else if (e.type == EventType::Pause || e.type == EventType::Resume || e.type == EventType::Limits
            || e.type == EventType::BackoffReset) {
            m_markers.push_back({ e.timeMs, qs(e.typeName()), qs(e.provider), qs(e.reason) });
        }
    }
}

void UsageHistory::setProviderScope(const QString& provider)
{
    m_scope = provider;
}

bool UsageHistory::inScope(const QString& provider) const
{
    return m_scope.isEmpty() || provider == m_scope;
}

void UsageHistory::clear()
{
    m_usage.clear();
    m_fine.clear();
    m_hits.clear();
    m_markers.clear();
}

void UsageHistory::prune(qint64 nowMs)
{
    const qint64 firstMinute = minuteOf(nowMs) - RATE_LIMIT_MINUTES;
    m_usage.erase(m_usage.begin(), m_usage.lower_bound(firstMinute));
    const qint64 firstFine = ChartSpan::floorDiv(nowMs - qint64(USAGE_MINUTES) * MINUTE_MS, FINE_MS);
    m_fine.erase(m_fine.begin(), m_fine.lower_bound(firstFine));
    const qint64 dayAgo = nowMs - qint64(RATE_LIMIT_MINUTES) * MINUTE_MS;
    // Arrival order is time order except across clock steps; pruning from the front is enough.
    while (!m_hits.empty() && m_hits.front().timeMs < dayAgo)
        m_hits.pop_front();
    while (!m_markers.empty() && m_markers.front().timeMs < dayAgo)
        m_markers.pop_front();
}

QVector<UsageHistory::CallerSeries> UsageHistory::callerSeries(
    const ChartSpan::Buckets& buckets, bool tokens, int maxCallers) const
{
    if (buckets.count <= 0 || buckets.widthMs <= 0)
        return {};
    // Minute buckets for widths of whole minutes, the fine ones below that.
    const bool fine = buckets.widthMs % MINUTE_MS != 0;
    const auto& source = fine ? m_fine : m_usage;
    const qint64 unit = fine ? FINE_MS : MINUTE_MS;
    const qint64 first = ChartSpan::floorDiv(buckets.firstMs, unit);
    const qint64 last = ChartSpan::floorDiv(buckets.endMs() - 1, unit);
    QHash<QString, CallerSeries> byCaller;
    for (auto it = source.lower_bound(first); it != source.end() && it->first <= last; ++it) {
        const int slot = buckets.indexOf(it->first * unit);
        if (slot < 0)
            continue;
        for (auto c = it->second.constBegin(); c != it->second.constEnd(); ++c) {
            if (!inScope(providerOf(c.key())))
                continue;
            // The chart stacks a caller's admissions at every provider in one band.
            const QString caller = callerOf(c.key());
            CallerSeries& s = byCaller[caller];
            if (s.perBucket.isEmpty()) {
                s.caller = caller;
                s.perBucket.fill(0.0, buckets.count);
            }
            const double v = static_cast<double>(tokens ? c->tokens : c->requests);
            s.perBucket[slot] += v;
            s.total += v;
        }
    }
    QVector<CallerSeries> all = byCaller.values().toVector();
    std::sort(all.begin(), all.end(), [](const CallerSeries& a, const CallerSeries& b) {
        return a.total != b.total ? a.total > b.total : a.caller < b.caller;
    });
    all.erase(std::remove_if(all.begin(), all.end(), [](const CallerSeries& s) { return s.total <= 0; }),
        all.end());
    if (maxCallers > 0 && all.size() > maxCallers) {
        CallerSeries others;
        others.caller = othersName();
        others.perBucket.fill(0.0, buckets.count);
        for (int i = maxCallers - 1; i < all.size(); ++i) {
            for (int m = 0; m < buckets.count; ++m)
                others.perBucket[m] += all[i].perBucket[m];
            others.total += all[i].total;
        }
        all.resize(maxCallers - 1);
        all.append(others);
    }
    return all;
}

QVector<UsageHistory::CallerTotals> UsageHistory::callerTotals(qint64 nowMs) const
{
    const qint64 last = minuteOf(nowMs);
    const qint64 first = last - USAGE_MINUTES + 1;
    QHash<QString, CallerTotals> byCaller;
    qint64 all = 0;
    for (auto it = m_usage.lower_bound(first); it != m_usage.end() && it->first <= last; ++it) {
        for (auto c = it->second.constBegin(); c != it->second.constEnd(); ++c) {
            if (!inScope(providerOf(c.key())))
                continue;
            CallerTotals& t = byCaller[c.key()];
            t.provider = providerOf(c.key());
            t.caller = callerOf(c.key());
            t.requests += c->requests;
            t.tokens += c->tokens;
            if (it->first == last)
                t.requestsLastMinute += c->requests;
            all += c->requests;
        }
    }
    QVector<CallerTotals> out = byCaller.values().toVector();
    for (CallerTotals& t : out)
        t.share = all > 0 ? static_cast<double>(t.requests) / static_cast<double>(all) : 0.0;
    std::sort(out.begin(), out.end(), [](const CallerTotals& a, const CallerTotals& b) {
        return a.requests != b.requests ? a.requests > b.requests
                                        : std::tie(a.caller, a.provider) < std::tie(b.caller, b.provider);
    });
    return out;
}

QVector<int> UsageHistory::rateLimits(const ChartSpan::Buckets& buckets) const
{
    QVector<int> out(std::max(0, buckets.count), 0);
    for (const Hit& h : m_hits) {
        const int slot = buckets.indexOf(h.timeMs);
        if (slot >= 0 && inScope(h.provider))
            ++out[slot];
    }
    return out;
}

QVector<UsageHistory::RateLimited> UsageHistory::rateLimitedBetween(qint64 fromMs, qint64 toMs) const
{
    QHash<QString, RateLimited> byKey;
    for (const Hit& h : m_hits) {
        if (h.timeMs < fromMs || h.timeMs >= toMs || !inScope(h.provider))
            continue;
        RateLimited& r = byKey[h.provider + QChar(0) + h.caller];
        r.provider = h.provider;
        r.caller = h.caller;
        ++r.count;
        r.lastMs = std::max(r.lastMs, h.timeMs);
    }
    QVector<RateLimited> out = byKey.values().toVector();
    std::sort(out.begin(), out.end(), [](const RateLimited& a, const RateLimited& b) {
        if (a.count != b.count)
            return a.count > b.count;
        return a.provider != b.provider ? a.provider < b.provider : a.caller < b.caller;
    });
    return out;
}

qint64 UsageHistory::oldestMs() const
{
    qint64 oldest = 0;
    auto take = [&oldest](qint64 t) {
        if (t > 0 && (oldest == 0 || t < oldest))
            oldest = t;
    };
    if (!m_usage.empty()) {
        // The fine buckets say it to 10 s where they reach back as far as the minutes.
        const qint64 minuteStart = m_usage.begin()->first * MINUTE_MS;
        const qint64 fineStart = m_fine.empty() ? 0 : m_fine.begin()->first * FINE_MS;
        take(fineStart > 0 && minuteOf(fineStart) == m_usage.begin()->first ? fineStart : minuteStart);
    }
    // Arrival order is nearly time order; a full scan would cost a day of 429s per redraw.
    if (!m_hits.empty())
        take(m_hits.front().timeMs);
    if (!m_markers.empty())
        take(m_markers.front().timeMs);
    return oldest;
}

QVector<UsageHistory::RateLimited> UsageHistory::rateLimitedCallers(qint64 nowMs) const
{
    const qint64 dayAgo = nowMs - qint64(RATE_LIMIT_MINUTES) * MINUTE_MS;
    QHash<QString, RateLimited> byKey;
    for (const Hit& h : m_hits) {
        if (h.timeMs < dayAgo || !inScope(h.provider))
            continue;
        RateLimited& r = byKey[h.provider + QChar(0) + h.caller];
        r.provider = h.provider;
        r.caller = h.caller;
        ++r.count;
        r.lastMs = std::max(r.lastMs, h.timeMs);
    }
    QVector<RateLimited> out = byKey.values().toVector();
    std::sort(out.begin(), out.end(), [](const RateLimited& a, const RateLimited& b) {
        if (a.count != b.count)
            return a.count > b.count;
        return a.provider != b.provider ? a.provider < b.provider : a.caller < b.caller;
    });
    return out;
}

QVector<UsageHistory::Marker> UsageHistory::markers(qint64 nowMs) const
{
    const qint64 dayAgo = nowMs - qint64(RATE_LIMIT_MINUTES) * MINUTE_MS;
    QVector<Marker> out;
    for (const Marker& m : m_markers) {
        // A marker of every provider (pause all) is one of the scoped provider's too.
        if (m.timeMs >= dayAgo && (m.provider.isEmpty() || inScope(m.provider)))
            out.append(m);
    }
    return out;
}

} // namespace tollgate::ui
