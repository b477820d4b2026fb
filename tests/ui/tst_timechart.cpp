// The time charts (issue 28, item 7): time ticks on round steps of the wall clock, both charts'
// plot areas and ranges lined up, a hovered bar shows its values (not a static hint), Auto
// picks the smallest span of its ladder that holds the data, and the keyboard zooms.

#include "chartspan.h"
#include "history/historyevent.h"
#include "ratelimitchart.h"
#include "testsupport.h"
#include "usagechart.h"
#include "usagehistory.h"

#include <QDateTime>
#include <QGraphicsLayout>
#include <QRegularExpression>
#include <QTest>
#include <QtCharts/QAreaSeries>
#include <QtCharts/QChart>

using namespace tollgate;
using namespace tollgate::ui;

class TestTimeChart final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void ticksFallOnRoundSteps();
    void bothChartsLineUp();
    void hoveringABarShowsItsValues();
    void autoSpanFitsTheData();
    void keyboardZooms();
};

namespace {

constexpr qint64 T0 = 1'000'000'000'000;

HistoryEvent admitted(qint64 t, const char* caller, std::int64_t tokens = 1)
{
    HistoryEvent e;
    e.timeMs = t;
    e.type = EventType::Admit;
    e.provider = "api";
    e.caller = caller;
    e.tokens = tokens;
    return e;
}

qint64 localMs(qint64 utcMs)
{
    return utcMs + static_cast<qint64>(QDateTime::fromMSecsSinceEpoch(utcMs).offsetFromUtc()) * 1000;
}

} // namespace

void TestTimeChart::ticksFallOnRoundSteps()
{
    const qint64 now = T0 + 37'123; // not on any round time
    UsageHistory usage;
    usage.add({ admitted(now - 1000, "a") });
    UsageChart chart;
    chart.resize(900, 300);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    const QList<qint64> allowed { 1000, 2000, 5000, 10'000, 15'000, 30'000, 60'000, 120'000, 300'000, 600'000,
        900'000, 1'800'000, 3'600'000, 7'200'000, 10'800'000, 21'600'000, 43'200'000 };
    for (qint64 span : ChartSpan::spans()) {
        chart.setSpan(span);
        chart.update(usage, now);
        const QVector<qint64> ticks = chart.timeTicks();
        QVERIFY2(ticks.size() >= 3, qPrintable(QString::number(ticks.size())));
        const qint64 step = ticks[1] - ticks[0];
        QVERIFY2(allowed.contains(step), qPrintable(QString::number(step)));
        for (int i = 0; i < ticks.size(); ++i) {
            if (i > 0)
                QCOMPARE(ticks[i] - ticks[i - 1], step);
            QCOMPARE(localMs(ticks[i]) % step, 0); // 18:55, 19:00, 19:05 on the local clock
            QVERIFY(ticks[i] >= chart.axisMinMs() && ticks[i] <= chart.axisMaxMs());
        }
        // The labels say the round times.
        const QStringList labels = chart.timeTickLabels();
        QCOMPARE(labels.size(), ticks.size());
        for (const QString& l : labels) {
            if (step >= 60'000)
                QVERIFY2(!l.contains(QRegularExpression(QStringLiteral(":\\d\\d:\\d\\d"))), qPrintable(l));
            else
                QVERIFY2(l.endsWith(QStringLiteral("0")) || l.endsWith(QStringLiteral("5")), qPrintable(l));
        }
    }
    // Zoomed: still round.
    chart.setSpan(ChartSpan::HOUR_MS);
    chart.update(usage, now);
    chart.zoomTo(now - 7 * 60'000 - 3'456, now - 1'234);
    const QVector<qint64> ticks = chart.timeTicks();
    QVERIFY(ticks.size() >= 3);
    QVERIFY(allowed.contains(ticks[1] - ticks[0]));
    QCOMPARE(localMs(ticks[0]) % (ticks[1] - ticks[0]), 0);
}

void TestTimeChart::bothChartsLineUp()
{
    const qint64 now = T0 + 5000;
    UsageHistory usage;
    std::vector<HistoryEvent> events;
    for (int i = 0; i < 400; ++i)
        events.push_back(admitted(now - i * 2'000, i % 2 ? "a-very-long-caller-name" : "b", 5000));
    events.push_back(TestSupport::rateLimited(now - 60'000, "api", "a"));
    usage.add(events);
    UsageChart chart;
    RateLimitChart rate;
    rate.alignWith(&chart);
    chart.setShowTokens(true); // wide count labels (tens of thousands) against the 429s' "1"
    for (TimeChartView* v : { static_cast<TimeChartView*>(&chart), static_cast<TimeChartView*>(&rate) }) {
        v->resize(620, 280);
        v->show();
        QVERIFY(QTest::qWaitForWindowExposed(v));
    }
    chart.update(usage, now);
    rate.update(usage, now);
    QCOMPARE(chart.axisMinMs(), rate.axisMinMs());
    QCOMPARE(chart.axisMaxMs(), rate.axisMaxMs());
    QCOMPARE(chart.timeTicks(), rate.timeTicks());
    auto plotOf = [](TimeChartView& v) {
        v.chart()->layout()->activate();
        return v.chart()->mapToScene(v.chart()->plotArea()).boundingRect();
    };
    // Within a pixel: the margins that line them up are whole pixels, the labels' widths not.
    QVERIFY2(std::abs(plotOf(chart).left() - plotOf(rate).left()) < 1.0,
        qPrintable(QStringLiteral("%1 %2").arg(plotOf(chart).left()).arg(plotOf(rate).left())));
    QVERIFY(std::abs(plotOf(chart).right() - plotOf(rate).right()) < 1.0);
    const double before = plotOf(chart).left();
    // Short charts: the heading beside the plot, still lined up.
    for (TimeChartView* v : { static_cast<TimeChartView*>(&chart), static_cast<TimeChartView*>(&rate) })
        v->resize(620, TimeChartView::COMPACT_BELOW - 40);
    chart.update(usage, now);
    rate.update(usage, now);
    QVERIFY(chart.chart()->title().isEmpty());
    QVERIFY2(std::abs(plotOf(chart).left() - plotOf(rate).left()) < 1.0,
        qPrintable(QStringLiteral("%1 %2").arg(plotOf(chart).left()).arg(plotOf(rate).left())));
    QVERIFY(std::abs(plotOf(chart).right() - plotOf(rate).right()) < 1.0);
    for (TimeChartView* v : { static_cast<TimeChartView*>(&chart), static_cast<TimeChartView*>(&rate) })
        v->resize(620, 280);
    chart.update(usage, now);
    rate.update(usage, now);
    QVERIFY(!chart.chart()->title().isEmpty());
    // A redraw with other figures keeps them lined up.
    usage.add({ admitted(now + 500, "b", 9'000'000) });
    chart.update(usage, now + 1000);
    rate.update(usage, now + 1000);
    QVERIFY(plotOf(chart).left() > before); // wider labels
    QVERIFY2(std::abs(plotOf(chart).left() - plotOf(rate).left()) < 1.0,
        qPrintable(QStringLiteral("%1 %2").arg(plotOf(chart).left()).arg(plotOf(rate).left())));
    QVERIFY(std::abs(plotOf(chart).right() - plotOf(rate).right()) < 1.0);
}

void TestTimeChart::hoveringABarShowsItsValues()
{
    const qint64 now = T0 + 5000;
    UsageHistory usage;
    usage.add({ admitted(now - 3000, "alice"), admitted(now - 2500, "alice"), admitted(now - 2000, "bob") });
    UsageChart chart;
    chart.setLimitRates(1.0, 0);
    chart.resize(600, 300);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    chart.setSpan(5 * ChartSpan::MINUTE_MS);
    chart.update(usage, now);
    QVERIFY(chart.toolTip().isEmpty()); // no static hint over the values
    QAreaSeries* band = nullptr;
    for (QAbstractSeries* s : chart.chart()->series()) {
        if (auto* a = qobject_cast<QAreaSeries*>(s); a && a->isVisible())
            band = a;
    }
    QVERIFY(band);
    Q_EMIT band->hovered(QPointF(static_cast<double>(now - 2000), 1.0), true);
    QVERIFY(chart.tipVisible());
    const QString tip = chart.tipText();
    const qint64 bucket = now - 2000 - ChartSpan::floorDiv(now - 2000, 10'000) * 10'000;
    const QString from
        = QDateTime::fromMSecsSinceEpoch(now - 2000 - bucket).toString(QStringLiteral("HH:mm:ss"));
    QVERIFY2(tip.contains(from), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("alice: 2")), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("bob: 1")), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("total: 3 requests")), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("limit: 10")), qPrintable(tip));
    Q_EMIT band->hovered(QPointF(static_cast<double>(now - 2000), 1.0), false);
    QVERIFY(!chart.tipVisible());

    // The 429 chart's bars too, and without a static hint.
    UsageHistory storms;
    storms.add({ TestSupport::rateLimited(now - 3000, "api", "alice") });
    RateLimitChart rate;
    rate.resize(600, 300);
    rate.show();
    QVERIFY(QTest::qWaitForWindowExposed(&rate));
    rate.setSpan(5 * ChartSpan::MINUTE_MS);
    rate.update(storms, now);
    QVERIFY(rate.toolTip().isEmpty());
    QVERIFY(rate.barTipAt(now - 3000).contains(QStringLiteral("1 × 429")));
}

void TestTimeChart::autoSpanFitsTheData()
{
    const qint64 now = T0 + 5000;
    // 16 minutes of data: at most 20 minutes (it was an hour, 3/4 of it empty).
    QVERIFY(ChartSpan::autoSpan(now - 16 * ChartSpan::MINUTE_MS, now) <= 20 * ChartSpan::MINUTE_MS);
    QVERIFY(ChartSpan::autoSpan(now - 16 * ChartSpan::MINUTE_MS, now) >= 16 * ChartSpan::MINUTE_MS);
    // Every amount of data: the smallest span of the ladder that holds it.
    const QVector<qint64> ladder = ChartSpan::autoSpans();
    for (qint64 minutes : { 1, 4, 6, 11, 16, 25, 45, 70, 150, 300, 500, 1000 }) {
        const qint64 oldest = now - minutes * ChartSpan::MINUTE_MS;
        const qint64 span = ChartSpan::autoSpan(oldest, now);
        QVERIFY(ladder.contains(span));
        QVERIFY2(ChartSpan::buckets(now, span).firstMs <= oldest, qPrintable(QString::number(minutes)));
        const int i = static_cast<int>(ladder.indexOf(span));
        if (i > 0)
            QVERIFY2(ChartSpan::buckets(now, ladder[i - 1]).firstMs > oldest,
                qPrintable(QString::number(minutes)));
        // 30 to 96 bars.
        const ChartSpan::Buckets b = ChartSpan::buckets(now, span);
        QVERIFY2(b.count >= 30 && b.count <= 96, qPrintable(QString::number(b.count)));
    }
    // In a chart.
    UsageHistory usage;
    usage.add({ admitted(now - 16 * ChartSpan::MINUTE_MS, "a"), admitted(now - 1000, "a") });
    UsageChart chart;
    chart.update(usage, now);
    QVERIFY(chart.effectiveSpan() <= 20 * ChartSpan::MINUTE_MS);
    QCOMPARE(chart.axisMaxMs() - chart.axisMinMs(), chart.effectiveSpan());
    QVERIFY(chart.heading().contains(QStringLiteral("last 20 min")));
}

void TestTimeChart::keyboardZooms()
{
    const qint64 now = T0 + 5000;
    UsageHistory usage;
    usage.add({ admitted(now - 1000, "a") });
    UsageChart chart;
    chart.resize(600, 300);
    chart.setSpan(ChartSpan::HOUR_MS);
    chart.update(usage, now);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    chart.setFocus();
    const qint64 whole = chart.axisMaxMs() - chart.axisMinMs();
    QTest::keyClick(&chart, Qt::Key_Plus);
    QVERIFY(chart.isZoomed());
    const qint64 once = chart.axisMaxMs() - chart.axisMinMs();
    QVERIFY(once < whole);
    QTest::keyClick(&chart, Qt::Key_Equal, Qt::ControlModifier);
    QVERIFY(chart.axisMaxMs() - chart.axisMinMs() < once);
    QTest::keyClick(&chart, Qt::Key_Minus, Qt::ControlModifier);
    QCOMPARE(chart.axisMaxMs() - chart.axisMinMs(), once);
    QTest::keyClick(&chart, Qt::Key_Minus);
    QTest::keyClick(&chart, Qt::Key_Minus);
    QVERIFY(!chart.isZoomed()); // never wider than the span
    QCOMPARE(chart.axisMaxMs() - chart.axisMinMs(), whole);
    QTest::keyClick(&chart, Qt::Key_Plus);
    QTest::keyClick(&chart, Qt::Key_Plus);
    QVERIFY(chart.isZoomed());
    QTest::keyClick(&chart, Qt::Key_0);
    QVERIFY(!chart.isZoomed());
    QTest::keyClick(&chart, Qt::Key_Plus);
    QTest::keyClick(&chart, Qt::Key_0, Qt::ControlModifier);
    QVERIFY(!chart.isZoomed());
}

QTEST_MAIN(TestTimeChart)
#include "tst_timechart.moc"
