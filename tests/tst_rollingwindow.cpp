// RollingWindow: the guarantee (never more than N requests / T tokens in any interval of the
// window's length), checked by brute force over random traffic, plus its edges.

#include "quota/rollingwindow.h"

#include <QTest>
#include <algorithm>
#include <climits>
#include <random>
#include <vector>

using tollgate::RollingWindow;

class TestRollingWindow final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void admitsUpToLimitThenBlocks();
    void releasesWhenOldestBucketLeaves();
    void neverExceedsLimitInAnyInterval_data();
    void neverExceedsLimitInAnyInterval();
    void tokensLimitHolds();
    void impossibleRequestNeverFits();
    void rescaleKeepsUsageConservatively();
    void rescaleBeyondTheMaximumChangesNothing();
    void clockGoingBackCountsFutureBuckets();
    void adjustTokensReconciles();
    void costDoesNotDependOnTraffic();
};

void TestRollingWindow::admitsUpToLimitThenBlocks()
{
    RollingWindow w(60000);
    for (int i = 0; i < 5; ++i) {
        QCOMPARE(w.whenFits(1000, 1, 5, 0, -1), 1000);
        w.record(1000, 1, 0);
    }
    QVERIFY(w.whenFits(1000, 1, 5, 0, -1) > 1000);
    QCOMPARE(w.usage(1000).requests, 5);
}

void TestRollingWindow::releasesWhenOldestBucketLeaves()
{
    RollingWindow w(32000); // 32 buckets of 1000 ms
    QCOMPARE(w.bucketMs(), 1000);
    w.record(5500, 1, 0); // bucket 5: [5000, 6000)
    const auto at = w.whenFits(6000, 1, 1, 0, -1);
    QCOMPARE(at, 6000 + 32000); // the bucket's end plus the window
    QCOMPARE(w.usage(at - 1).requests, 1);
    QCOMPARE(w.usage(at).requests, 0);
    QVERIFY(at - 5500 >= 32000); // never earlier than one window after the admission
}

void TestRollingWindow::neverExceedsLimitInAnyInterval_data()
{
    QTest::addColumn<qint64>("windowMs");
    QTest::addColumn<qint64>("limit");
    QTest::addColumn<int>("seed");
    QTest::newRow("60s x 10") << qint64(60000) << qint64(10) << 1;
    QTest::newRow("1s x 3") << qint64(1000) << qint64(3) << 2;
    QTest::newRow("7s x 50 (uneven buckets)") << qint64(7001) << qint64(50) << 3;
    QTest::newRow("100ms x 1") << qint64(100) << qint64(1) << 4;
}

void TestRollingWindow::neverExceedsLimitInAnyInterval()
{
    QFETCH(qint64, windowMs);
    QFETCH(qint64, limit);
    QFETCH(int, seed);
    RollingWindow w(windowMs);
    std::mt19937_64 rng(static_cast<unsigned>(seed));
    std::vector<qint64> admitted;
    qint64 now = 1'000'000;
    for (int step = 0; step < 20000; ++step) {
        now += static_cast<qint64>(rng() % static_cast<std::uint64_t>(std::max<qint64>(2, windowMs / limit)));
        if (w.whenFits(now, 1, limit, 0, -1) <= now) {
            w.record(now, 1, 0);
            admitted.push_back(now);
        }
    }
    QVERIFY(admitted.size() > static_cast<std::size_t>(limit) * 5);
    // brute force: every window-length interval starting at an admission
    for (std::size_t i = 0; i < admitted.size(); ++i) {
        const auto end = std::lower_bound(admitted.begin(), admitted.end(), admitted[i] + windowMs);
        const auto count = end - (admitted.begin() + static_cast<std::ptrdiff_t>(i));
        QVERIFY2(count <= limit,
            qPrintable(
                QStringLiteral("%1 admissions in [%2, +%3)").arg(count).arg(admitted[i]).arg(windowMs)));
    }
}

void TestRollingWindow::tokensLimitHolds()
{
    RollingWindow w(10000);
    std::mt19937_64 rng(7);
    std::vector<std::pair<qint64, qint64>> admitted;
    qint64 now = 0;
    for (int step = 0; step < 20000; ++step) {
        now += static_cast<qint64>(rng() % 50);
        const qint64 tokens = static_cast<qint64>(rng() % 400);
        if (w.whenFits(now, 1, -1, tokens, 1000) <= now) {
            w.record(now, 1, tokens);
            admitted.emplace_back(now, tokens);
        }
    }
    for (std::size_t i = 0; i < admitted.size(); ++i) {
        qint64 sum = 0;
        for (std::size_t j = i; j < admitted.size() && admitted[j].first < admitted[i].first + 10000; ++j)
            sum += admitted[j].second;
        QVERIFY2(sum <= 1000, qPrintable(QString::number(sum)));
    }
}

void TestRollingWindow::impossibleRequestNeverFits()
{
    RollingWindow w(1000);
    QCOMPARE(w.whenFits(0, 1, -1, 2000, 1000), INT64_MAX);
    QCOMPARE(w.whenFits(0, 2, 1, 0, -1), INT64_MAX);
}

void TestRollingWindow::rescaleKeepsUsageConservatively()
{
    RollingWindow w(60000);
    w.record(1000, 4, 40);
    w.rescale(10000, 30000);
    QCOMPARE(w.windowMs(), 10000);
    QCOMPARE(w.usage(30000).requests, 4); // kept, as if it happened now
    QCOMPARE(w.usage(30000).tokens, 40);
    QCOMPARE(w.usage(30000 + 10000 + w.bucketMs()).requests, 0); // gone one window later
}

void TestRollingWindow::rescaleBeyondTheMaximumChangesNothing()
{
    // An out-of-range length is clamped to the maximum; asking for it again must not count
    // today's usage again "as if it happened now", or it would never leave the window.
    const std::int64_t max = RollingWindow::MAX_WINDOW_MS;
    RollingWindow w(2 * max);
    QCOMPARE(w.windowMs(), max);
    w.record(0, 1, 0);
    for (std::int64_t t = 0; t <= max + w.bucketMs() + 1; t += max / 4)
        w.rescale(2 * max, t);
    w.rescale(INT64_MAX, max + w.bucketMs() + 1);
    QCOMPARE(w.windowMs(), max);
    QCOMPARE(w.usage(max + w.bucketMs() + 1).requests, 0);
}

void TestRollingWindow::clockGoingBackCountsFutureBuckets()
{
    RollingWindow w(10000);
    w.record(50000, 3, 0);
    QCOMPARE(w.usage(20000).requests, 3); // the clock went back: still counted
    w.record(20000, 1, 0);
    QCOMPARE(w.usage(20000).requests, 4);

    // Less than a window ahead: left as it is (it counts two windows at most).
    RollingWindow near(10000);
    near.record(25000, 2, 7);
    QVERIFY(!near.boundFuture(20000));
    QCOMPARE(near.usage(20000).requests, 2);
    QCOMPARE(near.usage(34999).requests, 2);
    QCOMPARE(near.usage(35000 + near.bucketMs()).requests, 0);

    // Far ahead (a clock that said 9999 and was put right): counted from now, for one window
    // more, not until that date comes.
    const std::int64_t year9999 = 253402300799000;
    RollingWindow far(10000);
    far.record(year9999, 3, 50);
    far.record(year9999 - 5000, 1, 5);
    QCOMPARE(far.usage(20000).requests, 4);
    QVERIFY(far.boundFuture(20000));
    QCOMPARE(far.usage(20000).requests, 4);
    QCOMPARE(far.usage(20000).tokens, 55);
    QVERIFY(!far.boundFuture(20000)); // bounded: nothing moves again
    QCOMPARE(far.usage(29999).requests, 4);
    QCOMPARE(far.usage(30000 + far.bucketMs()).requests, 0);
}

void TestRollingWindow::adjustTokensReconciles()
{
    RollingWindow w(10000);
    w.record(1000, 1, 500);
    w.adjustTokens(1000, 2000, -300);
    QCOMPARE(w.usage(2000).tokens, 200);
    w.adjustTokens(1000, 2000, 100);
    QCOMPARE(w.usage(2000).tokens, 300);
}

void TestRollingWindow::costDoesNotDependOnTraffic()
{
    // The ring is fixed: a million admissions leave it exactly as big as ten do.
    RollingWindow few(60000), many(60000);
    for (int i = 0; i < 10; ++i)
        few.record(i * 100, 1, 1);
    for (int i = 0; i < 1000000; ++i)
        many.record(i / 20, 1, 1);
    QCOMPARE(few.buckets().size(), many.buckets().size());
    QCOMPARE(many.usage(50000).requests, 1000000);
}

QTEST_APPLESS_MAIN(TestRollingWindow)
#include "tst_rollingwindow.moc"
