#pragma once

// TimeChartView: the frame shared by the dashboard's time charts — a chart with a time axis at
// the bottom, a whole-number count axis at the left and the legend at the right, plus what
// every time chart does the same way:
//  - a span (ChartSpan: 5 min … 24 h, or automatic) whose bucket width the subclass draws;
//  - a time axis whose ticks fall on round steps of the wall clock (18:55, 19:00, 19:05; see
//    ChartSpan::tickStep), recomputed whenever the range or the width changes — Qt's
//    QDateTimeAxis only divides its range evenly, which put labels at 18:57:08;
//  - zoom: the wheel, a horizontal rubber band, or + and - (also Ctrl+= and Ctrl+-) narrow the
//    time axis to an absolute range; Escape, 0, resetZoom() or "Reset zoom" in the right-click
//    menu go back to the span. Zoom never widens past the span;
//  - charts aligned with each other (alignWith) get the same plot-area edges, so their time
//    axes line up when they show the same range;
//  - hovering a bar or point shows its time and values (the subclass's tip), never a static
//    hint (the hint is the status tip);
//  - a marker tip that stays while the mouse is on the marker (QToolTip vanishes after a
//    second while traffic redraws the chart) and is pinned by a click until Escape or a click
//    elsewhere;
//  - a heading ("Requests per 10 s by caller, last 5 min") above the plot, or, on a chart
//    shorter than COMPACT_BELOW, beside it as the count axis's title, so a short chart's
//    height goes to its bars;
//  - colours from the widget's palette, re-applied on every palette change, so a dark desktop
//    gets a dark chart.
// Subclasses own their series and call frame() at the top of each redraw.

#include "chartspan.h"

#include <QPointer>
#include <QtCharts/QChartView>
#include <memory>

QT_BEGIN_NAMESPACE
class QChart;
class QCategoryAxis;
class QLabel;
class QMenu;
class QValueAxis;
QT_END_NAMESPACE

namespace tollgate::ui {

class TimeChartView : public QChartView
{
    Q_OBJECT
public:
    static constexpr int COMPACT_BELOW = 200; // px of height: the heading moves beside the plot

    explicit TimeChartView(const QString& title, QWidget* parent = nullptr);

    // What the chart says it shows, above the plot; beside it (see COMPACT_BELOW) the short
    // form ("requests / 10 s": the time axis shows the span).
    void setHeading(const QString& heading, const QString& compact);
    [[nodiscard]] QString heading() const { return m_heading; }

    // ChartSpan::AUTO or one of ChartSpan::spans(); takes effect at the next redraw.
    void setSpan(qint64 spanMs);
    [[nodiscard]] qint64 span() const { return m_span; }
    // What the last redraw showed (the automatic span resolved) and its buckets.
    [[nodiscard]] qint64 effectiveSpan() const { return m_effectiveSpan; }
    [[nodiscard]] const ChartSpan::Buckets& buckets() const { return m_buckets; }
    [[nodiscard]] qint64 axisMinMs() const;
    [[nodiscard]] qint64 axisMaxMs() const;
    // Where the time axis has its labelled ticks now, and their labels.
    [[nodiscard]] const QVector<qint64>& timeTicks() const { return m_ticks; }
    [[nodiscard]] QStringList timeTickLabels() const;

    // Charts aligned with each other share their plot area's left and right insets (the
    // widest of them), kept at every redraw and resize. Not owned.
    void alignWith(TimeChartView* other);

    [[nodiscard]] bool isZoomed() const { return m_zoomTo > m_zoomFrom; }
    void zoomTo(qint64 fromMs, qint64 toMs);
    void resetZoom();
    // factor < 1 narrows, > 1 widens, around the middle of what is shown.
    void zoomBy(double factor);

    [[nodiscard]] bool tipVisible() const;
    [[nodiscard]] bool tipPinned() const { return m_tipPinned; }
    [[nodiscard]] QString tipText() const;

    // What a right-click offers: the subclass's "Show events of caller X" entries, then
    // "Reset zoom" (also for tests).
    [[nodiscard]] std::unique_ptr<QMenu> contextMenu();

Q_SIGNALS:
    void zoomChanged(bool zoomed);
    // "Show events of…" was chosen (either may be empty).
    void scopeRequested(const QString& provider, const QString& caller);

protected:
    // Resolves the span for this redraw (oldestMs: the oldest data, for the automatic span),
    // sets the time axis to the span or the zoom, and returns the buckets to fill.
    const ChartSpan::Buckets& frame(qint64 nowMs, qint64 oldestMs);
    // Shows text next to the value point; a tip for another point replaces it unless pinned.
    void showTip(const QPointF& value, const QString& text);
    void hideTip(); // unless pinned
    void pinTip(); // the tip shown now stays
    void unpinTip();
    // Called after the palette's colours were applied to the frame (series colours).
    virtual void themeChanged() { }
    // The callers (and providers) the chart shows, for the right-click menu's scope entries.
    struct Scope
    {
        QString provider;
        QString caller;
    };
    [[nodiscard]] virtual QList<Scope> scopes() const { return {}; }
    [[nodiscard]] bool isDark() const;
    // How many legend entries fit the chart's height at the right.
    [[nodiscard]] int legendRowsThatFit() const;
    // How many count-axis intervals have room for their labels (2..6).
    [[nodiscard]] int yIntervalsThatFit() const;

    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void changeEvent(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    // Subclasses call this at the end of each redraw (the count axis's labels changed width).
    void alignPlotAreas();

    QCategoryAxis* m_x = nullptr; // owned by the chart
    QValueAxis* m_y = nullptr; // owned by the chart

private:
    void applyRange();
    void applyTicks();
    void applyHeading();
    void applyTheme();
    [[nodiscard]] int maxTimeTicks() const;

    qint64 m_span = ChartSpan::AUTO;
    qint64 m_effectiveSpan = 0;
    ChartSpan::Buckets m_buckets;
    qint64 m_zoomFrom = 0;
    qint64 m_zoomTo = 0;
    bool m_settingRange = false;
    QLabel* m_tip = nullptr; // child
    bool m_tipPinned = false;
    bool m_tipPinnedThisClick = false;
    bool m_theming = false;
    QString m_heading;
    QString m_compactHeading;
    QVector<qint64> m_ticks;
    qint64 m_tickStep = 0;
    QList<QPointer<TimeChartView>> m_aligned; // the others; not owned
    QMargins m_baseMargins { 4, 4, 4, 4 };
    int m_extraLeft = 0; // added to the margins to line up with the others
    int m_extraRight = 0;
    bool m_aligning = false;
};

} // namespace tollgate::ui
