// UsageHistory: the per-minute aggregates behind the charts and per-caller tables.

#include "testsupport.h"
#include "usagehistory.h"

#include <QTest>
#include <numeric>

using namespace tollgate;
using namespace tollgate::ui;

class TestUsageHistory final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void usageAggregatesPerMinute();
    void bucketsFollowTheSpan();
    void autoSpanShowsTheDataThereIs();
    void fineBucketsForShortSpans();
};

namespace {

constexpr qint64 T0 = 1'700'000'000'000;

HistoryEvent hit(qint64 t, const char* provider, const char* caller)
{
    return TestSupport::rateLimited(t, provider, caller);
}

} // namespace

void TestUsageHistory::usageAggregatesPerMinute()
{
    const qint64 minute = UsageHistory::minuteOf(T0) * UsageHistory::MINUTE_MS;
    UsageHistory u;
    std::vector<HistoryEvent> events;
    auto admit = [](qint64 t, const char* caller, std::int64_t tokens) {
        HistoryEvent e;
        e.timeMs = t;
        e.type = EventType::Admit;
        e.provider = "api";
        e.caller = caller;
        e.tokens = tokens;
        return e;
    };
    for (int i = 0; i < 10; ++i)
        events.push_back(admit(minute + i, "big", 10));
    events.push_back(admit(minute - UsageHistory::MINUTE_MS, "small", 1000));
    for (int c = 0; c < 8; ++c)
        events.push_back(admit(minute + 100 + c, qPrintable(QStringLiteral("c%1").arg(c)), 0));
    HistoryEvent pause;
    pause.timeMs = minute;
    pause.type = EventType::Pause;
    pause.reason = "why";
    events.push_back(pause);
    events.push_back(hit(minute + 5, "api", "big"));
    u.add(events);

    const auto hour = ChartSpan::buckets(minute + 30'000, ChartSpan::HOUR_MS);
    QCOMPARE(hour.widthMs, UsageHistory::MINUTE_MS);
    const auto requests = u.callerSeries(hour, false, 4);
    QCOMPARE(requests.size(), 4); // three largest and "others"
    QCOMPARE(requests[0].caller, QStringLiteral("big"));
    QCOMPARE(requests[0].perBucket.size(), UsageHistory::USAGE_MINUTES);
    QCOMPARE(requests[0].perBucket.last(), 10.0);
    QCOMPARE(requests[0].total, 10.0);
    QCOMPARE(requests.last().caller, QStringLiteral("others"));
    QCOMPARE(requests.last().total, 7.0); // 9 small callers of 1 request, minus the two shown

    const auto tokens = u.callerSeries(hour, true, 0);
    QCOMPARE(tokens[0].caller, QStringLiteral("small"));
    QCOMPARE(tokens[0].perBucket[UsageHistory::USAGE_MINUTES - 2], 1000.0);

    const auto day = ChartSpan::buckets(minute + 30'000, 24 * ChartSpan::HOUR_MS);
    const auto perBucket = u.rateLimits(day);
    QCOMPARE(perBucket.size(), day.count);
    QCOMPARE(perBucket.last(), 1);
    QCOMPARE(u.markers(minute).size(), 1);
    QCOMPARE(u.markers(minute).first().text, QStringLiteral("why"));

    // Pruning forgets what is out of every window.
    u.prune(minute + 2 * 86'400'000);
    QVERIFY(
        u.callerSeries(ChartSpan::buckets(minute + 2 * 86'400'000, ChartSpan::HOUR_MS), false, 0).isEmpty());
    QCOMPARE(u.oldestMs(), qint64(0));
    QVERIFY(u.markers(minute + 2 * 86'400'000).isEmpty());
    QVERIFY(u.rateLimitedCallers(minute + 2 * 86'400'000).isEmpty());
}

void TestUsageHistory::bucketsFollowTheSpan()
{
    // Each span has its bucket width; the buckets end with the one holding "now".
    const struct
    {
        qint64 span;
        qint64 width;
        int count;
    } expected[] = { { 5 * ChartSpan::MINUTE_MS, 10'000, 30 }, { 15 * ChartSpan::MINUTE_MS, 30'000, 30 },
        { ChartSpan::HOUR_MS, 60'000, 60 }, { 6 * ChartSpan::HOUR_MS, 300'000, 72 },
        { 24 * ChartSpan::HOUR_MS, 900'000, 96 } };
    for (const auto& e : expected) {
        const auto b = ChartSpan::buckets(T0, e.span);
        QCOMPARE(b.widthMs, e.width);
        QCOMPARE(b.count, e.count);
        QVERIFY(b.firstMs % e.width == 0);
        QVERIFY(b.endMs() > T0 && b.endMs() - e.width <= T0);
        QCOMPARE(b.endMs() - b.firstMs, e.span);
    }
    QCOMPARE(ChartSpan::buckets(T0, 12345).widthMs, 10'000); // not a span: the automatic (shortest)
    QCOMPARE(ChartSpan::sanitize(-5), ChartSpan::AUTO);
    QCOMPARE(ChartSpan::sanitize(ChartSpan::HOUR_MS), ChartSpan::HOUR_MS);
}

void TestUsageHistory::autoSpanShowsTheDataThereIs()
{
    QCOMPARE(ChartSpan::autoSpan(0, T0), 5 * ChartSpan::MINUTE_MS); // no data
    QCOMPARE(ChartSpan::autoSpan(T0 - 4 * ChartSpan::MINUTE_MS, T0), 5 * ChartSpan::MINUTE_MS);
    QCOMPARE(ChartSpan::autoSpan(T0 - 10 * ChartSpan::MINUTE_MS, T0), 15 * ChartSpan::MINUTE_MS);
    QCOMPARE(ChartSpan::autoSpan(T0 - 50 * ChartSpan::MINUTE_MS, T0), ChartSpan::HOUR_MS);
    QCOMPARE(ChartSpan::autoSpan(T0 - 3 * ChartSpan::HOUR_MS, T0), 6 * ChartSpan::HOUR_MS);
    QCOMPARE(ChartSpan::autoSpan(T0 - 20 * ChartSpan::HOUR_MS, T0), 24 * ChartSpan::HOUR_MS);
    QCOMPARE(ChartSpan::autoSpan(T0 - 30 * ChartSpan::HOUR_MS, T0), 24 * ChartSpan::HOUR_MS);
    QCOMPARE(ChartSpan::autoSpan(T0 + 5000, T0), 5 * ChartSpan::MINUTE_MS); // from the future

    // The oldest data kept decides it: a 4-minute demo gets the 5-minute span.
    UsageHistory u;
    HistoryEvent e;
    e.type = EventType::Admit;
    e.provider = "api";
    e.caller = "a";
    e.timeMs = T0 - 4 * ChartSpan::MINUTE_MS;
    u.add({ e });
    QVERIFY(u.oldestMs() <= e.timeMs && u.oldestMs() > e.timeMs - UsageHistory::FINE_MS);
    QCOMPARE(ChartSpan::autoSpan(u.oldestMs(), T0), 5 * ChartSpan::MINUTE_MS);
    u.add({ hit(T0 - 2 * ChartSpan::HOUR_MS, "api", "a") });
    QCOMPARE(ChartSpan::autoSpan(u.oldestMs(), T0), 3 * ChartSpan::HOUR_MS); // Auto's finer ladder
}

void TestUsageHistory::fineBucketsForShortSpans()
{
    UsageHistory u;
    std::vector<HistoryEvent> events;
    const qint64 now = (T0 / 10'000) * 10'000 + 5'000; // mid-bucket
    for (int i = 0; i < 3; ++i) {
        HistoryEvent e;
        e.type = EventType::Admit;
        e.provider = "api";
        e.caller = "a";
        e.tokens = 7;
        e.timeMs = now - 1'000; // this 10-second bucket
        events.push_back(e);
    }
    HistoryEvent older = events.front();
    older.timeMs = now - 25'000; // two buckets back (now is 5 s into its bucket)
    events.push_back(older);
    events.push_back(hit(now - 25'000, "api", "a"));
    events.push_back(hit(now - 24'000, "api", "b"));
    u.add(events);

    const auto five = ChartSpan::buckets(now, 5 * ChartSpan::MINUTE_MS);
    const auto s = u.callerSeries(five, false, 0);
    QCOMPARE(s.size(), 1);
    QCOMPARE(s[0].perBucket.size(), 30);
    QCOMPARE(s[0].perBucket[29], 3.0);
    QCOMPARE(s[0].perBucket[27], 1.0);
    QCOMPARE(s[0].total, 4.0);
    QCOMPARE(u.callerSeries(five, true, 0)[0].perBucket[29], 21.0);
    const auto hits = u.rateLimits(five);
    QCOMPARE(hits[27], 2);
    QCOMPARE(std::accumulate(hits.begin(), hits.end(), 0), 2);
    // The same data in 15-minute buckets of the day: one bucket holds it all.
    const auto day = u.callerSeries(ChartSpan::buckets(now, 24 * ChartSpan::HOUR_MS), false, 0);
    QCOMPARE(day[0].perBucket.size(), 96);
    QCOMPARE(std::accumulate(day[0].perBucket.begin(), day[0].perBucket.end(), 0.0), 4.0);
    const auto between = u.rateLimitedBetween(five.startOf(27), five.startOf(28));
    QCOMPARE(between.size(), 2);
}

QTEST_APPLESS_MAIN(TestUsageHistory)
#include "tst_usagehistory.moc"
