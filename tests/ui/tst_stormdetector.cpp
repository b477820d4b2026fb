// Storm detection: thresholds, one alert per storm (not one per 429), per provider, quiet
// windows ending a storm, and old history never alerting. Pure logic: no clock, no files.

#include "stormdetector.h"
#include "testsupport.h"

#include <QTest>

using namespace tollgate;
using namespace tollgate::ui;

class TestStormDetector final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void belowThresholdIsNoStorm();
    void oneAlertPerStorm();
    void quietWindowEndsStorm();
    void providersAreSeparate();
    void configurableThreshold();
    void oldHistoryDoesNotAlert();
};

namespace {

constexpr qint64 T0 = 1'700'000'000'000;

HistoryEvent hit(qint64 t, const char* provider, const char* caller)
{
    return TestSupport::rateLimited(t, provider, caller);
}

} // namespace

void TestStormDetector::belowThresholdIsNoStorm()
{
    StormDetector d;
    QCOMPARE(d.threshold(), 3);
    QCOMPARE(d.windowMs(), qint64(60000));
    QVERIFY(d.add({ hit(T0, "api", "a"), hit(T0 + 10'000, "api", "b") }, T0 + 10'000).isEmpty());
    // The third comes 61 s after the first: still only two within any 60 s.
    QVERIFY(d.add({ hit(T0 + 61'000, "api", "a") }, T0 + 61'000).isEmpty());
    QVERIFY(!d.anyActive());
    // A non-429 event never counts.
    HistoryEvent admit = hit(T0 + 62'000, "api", "a");
    admit.type = EventType::Admit;
    QVERIFY(d.add({ admit, admit, admit }, T0 + 62'000).isEmpty());
}

void TestStormDetector::oneAlertPerStorm()
{
    StormDetector d;
    const auto started = d.add(
        { hit(T0, "api", "indexer"), hit(T0 + 1000, "api", "chat"), hit(T0 + 2000, "api", "indexer") },
        T0 + 2000);
    QCOMPARE(started.size(), 1);
    QCOMPARE(started[0].provider, QStringLiteral("api"));
    QCOMPARE(started[0].callers, QStringList({ QStringLiteral("indexer"), QStringLiteral("chat") }));
    QCOMPARE(started[0].count, 3);
    QCOMPARE(started[0].startMs, T0);
    QVERIFY(d.anyActive());
    // Ten more 429s, one batch at a time: still the same storm, no new alert.
    for (int i = 0; i < 10; ++i)
        QVERIFY(
            d.add({ hit(T0 + 3000 + i * 5000, "api", i == 5 ? "report" : "indexer") }, T0 + 3000 + i * 5000)
                .isEmpty());
    const auto* storm = d.active(QStringLiteral("api"));
    QVERIFY(storm);
    QCOMPARE(storm->count, 13);
    QVERIFY(storm->callers.contains(QStringLiteral("report")));
    QVERIFY(d.tick(T0 + 50'000).isEmpty());
}

void TestStormDetector::quietWindowEndsStorm()
{
    StormDetector d;
    QCOMPARE(
        d.add({ hit(T0, "api", "a"), hit(T0 + 1, "api", "a"), hit(T0 + 2, "api", "a") }, T0 + 2).size(), 1);
    QVERIFY(d.tick(T0 + 60'000).isEmpty()); // not yet a whole quiet window
    QCOMPARE(d.tick(T0 + 60'003), QStringList({ QStringLiteral("api") }));
    QVERIFY(!d.anyActive());
    // The next burst is a new storm with its own alert.
    const qint64 t = T0 + 120'000;
    QCOMPARE(d.add({ hit(t, "api", "b"), hit(t + 1, "api", "b"), hit(t + 2, "api", "c") }, t + 2).size(), 1);
    // A quiet window inside one batch (no tick in between) also ends the storm.
    const qint64 u = t + 200'000;
    QCOMPARE(d.add({ hit(u, "api", "d"), hit(u + 1, "api", "d"), hit(u + 2, "api", "d") }, u + 2).size(), 1);
}

void TestStormDetector::providersAreSeparate()
{
    StormDetector d;
    QVERIFY(d.add({ hit(T0, "a", "x"), hit(T0 + 1, "b", "x"), hit(T0 + 2, "a", "x"), hit(T0 + 3, "b", "x") },
                 T0 + 3)
                .isEmpty());
    const auto started = d.add({ hit(T0 + 4, "b", "y"), hit(T0 + 5, "a", "y") }, T0 + 5);
    QCOMPARE(started.size(), 2);
    QVERIFY(d.active(QStringLiteral("a")) && d.active(QStringLiteral("b")));
    QVERIFY(!d.active(QStringLiteral("c")));
}

void TestStormDetector::configurableThreshold()
{
    StormDetector d;
    d.setThreshold(5, 10'000);
    QVERIFY(d.add({ hit(T0, "api", "a"), hit(T0 + 1, "api", "a"), hit(T0 + 2, "api", "a"),
                      hit(T0 + 3, "api", "a") },
                 T0 + 3)
                .isEmpty());
    // Spread over more than 10 s, five 429s are not a storm.
    QVERIFY(d.add({ hit(T0 + 10'500, "api", "a") }, T0 + 10'500).isEmpty());
    // Five within 10 s are.
    QVERIFY(
        d.add({ hit(T0 + 10'501, "api", "a"), hit(T0 + 10'502, "api", "a"), hit(T0 + 10'503, "api", "a") },
             T0 + 10'503)
            .isEmpty());
    QCOMPARE(d.add({ hit(T0 + 10'504, "api", "a") }, T0 + 10'504).size(), 1);
}

void TestStormDetector::oldHistoryDoesNotAlert()
{
    StormDetector d;
    // Yesterday's storm, read at start-up: tracked, not announced.
    const qint64 now = T0 + 86'400'000;
    QVERIFY(d.add({ hit(T0, "api", "a"), hit(T0 + 1, "api", "a"), hit(T0 + 2, "api", "a") }, now).isEmpty());
    QVERIFY(!d.tick(now).isEmpty());
    // A live storm is announced.
    QCOMPARE(
        d.add({ hit(now, "api", "a"), hit(now + 1, "api", "a"), hit(now + 2, "api", "a") }, now + 2).size(),
        1);
}

QTEST_APPLESS_MAIN(TestStormDetector)
#include "tst_stormdetector.moc"
