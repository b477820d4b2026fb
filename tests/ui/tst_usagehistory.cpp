// UsageHistory: the per-minute aggregates behind the charts and per-caller tables.

#include "testsupport.h"
#include "usagehistory.h"

#include <QTest>

using namespace tollgate;
using namespace tollgate::ui;

class TestUsageHistory final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void usageAggregatesPerMinute();
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
        e.type = "admit";
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
    pause.type = "pause";
    pause.reason = "why";
    events.push_back(pause);
    events.push_back(hit(minute + 5, "api", "big"));
    u.add(events);

    const auto requests = u.callerSeries(minute + 30'000, false, 4);
    QCOMPARE(requests.size(), 4); // three largest and "others"
    QCOMPARE(requests[0].caller, QStringLiteral("big"));
    QCOMPARE(requests[0].perMinute.size(), UsageHistory::USAGE_MINUTES);
    QCOMPARE(requests[0].perMinute.last(), 10.0);
    QCOMPARE(requests[0].total, 10.0);
    QCOMPARE(requests.last().caller, QStringLiteral("others"));
    QCOMPARE(requests.last().total, 7.0); // 9 small callers of 1 request, minus the two shown

    const auto tokens = u.callerSeries(minute + 30'000, true, 0);
    QCOMPARE(tokens[0].caller, QStringLiteral("small"));
    QCOMPARE(tokens[0].perMinute[UsageHistory::USAGE_MINUTES - 2], 1000.0);

    const auto perMinute = u.rateLimitsPerMinute(minute + 30'000);
    QCOMPARE(perMinute.size(), UsageHistory::RATE_LIMIT_MINUTES);
    QCOMPARE(perMinute.last(), 1);
    QCOMPARE(u.markers(minute).size(), 1);
    QCOMPARE(u.markers(minute).first().text, QStringLiteral("why"));

    // Pruning forgets what is out of every window.
    u.prune(minute + 2 * 86'400'000);
    QVERIFY(u.callerSeries(minute + 2 * 86'400'000, false, 0).isEmpty());
    QVERIFY(u.markers(minute + 2 * 86'400'000).isEmpty());
    QVERIFY(u.rateLimitedCallers(minute + 2 * 86'400'000).isEmpty());
}

QTEST_APPLESS_MAIN(TestUsageHistory)
#include "tst_usagehistory.moc"
