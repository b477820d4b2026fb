#include "timechart.h"

#include <QApplication>
#include <QDateTime>
#include <QGraphicsLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QMenu>
#include <QMouseEvent>
#include <QResizeEvent>
#include <QWheelEvent>
#include <QtCharts/QCategoryAxis>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <QtCharts/QValueAxis>
#include <algorithm>
#include <cmath>

namespace tollgate::ui {

namespace {

constexpr qint64 MIN_ZOOM_MS = 20'000; // narrower shows less than two 10-second buckets
constexpr double WHEEL_STEP = 0.8;

} // namespace

// The chart goes to the constructor: the one-argument one makes a chart of its own, which
// setChart() would leave to nobody (LeakSanitizer found it).
TimeChartView::TimeChartView(const QString& title, QWidget* parent)
    : QChartView(new QChart(), parent)
{
    QChart* chart = this->chart();
    m_heading = title;
    chart->setTitle(title);
    // No rounded frame and its padding around the chart: the height goes to the plot.
    chart->setBackgroundRoundness(0);
    chart->layout()->setContentsMargins(0, 0, 0, 0);
    chart->legend()->setAlignment(Qt::AlignRight);
    QFont legendFont = chart->legend()->font();
    legendFont.setPointSizeF(legendFont.pointSizeF() * 0.85);
    chart->legend()->setFont(legendFont);
    chart->setMargins(m_baseMargins);
    m_x = new QCategoryAxis(chart);
    m_x->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
    m_y = new QValueAxis(chart);
    m_y->setLabelFormat(QStringLiteral("%d"));
    m_y->setMin(0);
    chart->addAxis(m_x, Qt::AlignBottom);
    chart->addAxis(m_y, Qt::AlignLeft);
    setRenderHint(QPainter::Antialiasing);
    setMinimumHeight(110); // the axes and a few bars; the splitters give it more when there is room
    setFocusPolicy(Qt::StrongFocus);
    setRubberBand(
        QChartView::RubberBands(QChartView::HorizontalRubberBand) | QChartView::ClickThroughRubberBand);
    // Not a tooltip: that covered the values a hovered bar shows (issue 28).
    const QString hint = tr("Wheel, drag or +/- to zoom, Esc or 0 to reset; right-click for more");
    setStatusTip(hint);
    setWhatsThis(hint);
    setAccessibleDescription(hint);

    m_tip = new QLabel(this);
    m_tip->setObjectName(QStringLiteral("chartTip"));
    m_tip->setTextFormat(Qt::PlainText);
    m_tip->setFrameShape(QFrame::Box);
    m_tip->setMargin(4);
    m_tip->setAutoFillBackground(true);
    m_tip->setAttribute(Qt::WA_TransparentForMouseEvents);
    m_tip->hide();
    applyTheme();
}

void TimeChartView::setHeading(const QString& heading, const QString& compact)
{
    m_heading = heading;
    m_compactHeading = compact;
    applyHeading();
}

void TimeChartView::applyHeading()
{
    const bool compact = height() < COMPACT_BELOW;
    const QString title = compact ? QString() : m_heading;
    const QString beside = compact ? m_compactHeading : QString();
    if (chart()->title() != title)
        chart()->setTitle(title);
    if (m_y->titleText() != beside) {
        if (!beside.isEmpty()) {
            QFont f = m_y->titleFont();
            f.setPointSizeF(QFont().pointSizeF() * 0.8);
            f.setBold(false);
            m_y->setTitleFont(f);
        }
        m_y->setTitleText(beside);
        m_y->setTitleVisible(!beside.isEmpty());
    }
}

void TimeChartView::setSpan(qint64 spanMs)
{
    m_span = ChartSpan::sanitize(spanMs);
    m_zoomFrom = m_zoomTo = 0;
}

qint64 TimeChartView::axisMinMs() const
{
    return std::llround(m_x->min());
}

qint64 TimeChartView::axisMaxMs() const
{
    return std::llround(m_x->max());
}

QStringList TimeChartView::timeTickLabels() const
{
    return m_x->categoriesLabels();
}

int TimeChartView::maxTimeTicks() const
{
    // As many labels as fit without crowding (HH:mm:ss needs about 70 px, plus a gap).
    const int plot = static_cast<int>(chart()->plotArea().width());
    return std::clamp((plot > 0 ? plot : width() - 150) / 90, 2, 10);
}

void TimeChartView::applyTicks()
{
    const qint64 from = axisMinMs();
    const qint64 to = axisMaxMs();
    if (to <= from)
        return;
    const qint64 step = ChartSpan::tickStep(to - from, maxTimeTicks());
    const QVector<qint64> ticks = ChartSpan::ticks(from, to, step);
    if (ticks == m_ticks && step == m_tickStep)
        return;
    m_ticks = ticks;
    m_tickStep = step;
    const QString format = step < ChartSpan::MINUTE_MS ? QStringLiteral("HH:mm:ss")
        : to - from > 20 * ChartSpan::HOUR_MS          ? QStringLiteral("ddd HH:mm")
                                                       : QStringLiteral("HH:mm");
    // Each tick is the end of a category whose label sits on it; the first category starts a
    // step earlier, outside the range.
    for (const QString& label : m_x->categoriesLabels())
        m_x->remove(label);
    if (!ticks.isEmpty())
        m_x->setStartValue(static_cast<double>(ticks.first() - step));
    for (qint64 t : ticks) {
        const QString label = QDateTime::fromMSecsSinceEpoch(t).toString(format);
        if (!m_x->categoriesLabels().contains(label))
            m_x->append(label, static_cast<double>(t));
    }
    // Appending may move the range to the categories: the range shown is the one set.
    m_settingRange = true;
    m_x->setRange(static_cast<double>(from), static_cast<double>(to));
    m_settingRange = false;
}

void TimeChartView::alignWith(TimeChartView* other)
{
    if (!other || other == this || m_aligned.contains(other))
        return;
    m_aligned.append(other);
    other->alignWith(this);
}

void TimeChartView::alignPlotAreas()
{
    if (m_aligning || m_aligned.isEmpty())
        return;
    QList<TimeChartView*> group { this };
    for (const auto& other : std::as_const(m_aligned)) {
        if (other)
            group.append(other.data());
    }
    // Each chart's own insets (without what an earlier alignment added), then the widest.
    struct Insets
    {
        int left;
        int right;
    };
    QVector<Insets> natural;
    int left = 0;
    int right = 0;
    for (TimeChartView* v : group) {
        v->m_aligning = true;
        v->chart()->layout()->activate();
        const QRectF plot = v->chart()->plotArea();
        const int l = static_cast<int>(std::lround(plot.left())) - v->m_extraLeft;
        const int r
            = static_cast<int>(std::lround(v->chart()->size().width() - plot.right())) - v->m_extraRight;
        natural.append({ l, r });
        left = std::max(left, l);
        right = std::max(right, r);
    }
    for (int i = 0; i < group.size(); ++i) {
        TimeChartView* v = group[i];
        const int extraLeft = left - natural[i].left;
        const int extraRight = right - natural[i].right;
        if (extraLeft != v->m_extraLeft || extraRight != v->m_extraRight) {
            v->m_extraLeft = extraLeft;
            v->m_extraRight = extraRight;
            v->chart()->setMargins(v->m_baseMargins + QMargins(extraLeft, 0, extraRight, 0));
            v->chart()->layout()->activate();
        }
        v->m_aligning = false;
    }
}

const ChartSpan::Buckets& TimeChartView::frame(qint64 nowMs, qint64 oldestMs)
{
    m_effectiveSpan = m_span == ChartSpan::AUTO ? ChartSpan::autoSpan(oldestMs, nowMs) : m_span;
    m_buckets = ChartSpan::buckets(nowMs, m_effectiveSpan);
    applyRange();
    return m_buckets;
}

void TimeChartView::applyRange()
{
    qint64 from = m_buckets.firstMs;
    qint64 to = m_buckets.endMs();
    if (isZoomed()) {
        from = std::max(from, m_zoomFrom);
        to = std::min(to, m_zoomTo);
        if (to - from < MIN_ZOOM_MS) // the zoomed range scrolled out of the span
            from = std::max(m_buckets.firstMs, to - MIN_ZOOM_MS);
    }
    m_settingRange = true;
    m_x->setRange(static_cast<double>(from), static_cast<double>(to));
    m_settingRange = false;
    applyTicks();
}

void TimeChartView::zoomTo(qint64 fromMs, qint64 toMs)
{
    if (toMs < fromMs)
        std::swap(fromMs, toMs);
    const bool wasZoomed = isZoomed();
    if (m_buckets.count > 0 && fromMs <= m_buckets.firstMs && toMs >= m_buckets.endMs()) {
        m_zoomFrom = m_zoomTo = 0;
    } else {
        if (toMs - fromMs < MIN_ZOOM_MS) {
            const qint64 mid = fromMs + (toMs - fromMs) / 2;
            fromMs = mid - MIN_ZOOM_MS / 2;
            toMs = fromMs + MIN_ZOOM_MS;
        }
        m_zoomFrom = fromMs;
        m_zoomTo = toMs;
    }
    applyRange();
    if (wasZoomed != isZoomed() || isZoomed())
        Q_EMIT zoomChanged(isZoomed());
}

std::unique_ptr<QMenu> TimeChartView::contextMenu()
{
    auto menu = std::make_unique<QMenu>(this);
    for (const Scope& scope : scopes()) {
        const QString text = scope.caller.isEmpty() ? tr("Show events of provider %1").arg(scope.provider)
                                                    : tr("Show events of caller %1").arg(scope.caller);
        QAction* a = menu->addAction(text);
        connect(a, &QAction::triggered, this,
            [this, scope] { Q_EMIT scopeRequested(scope.provider, scope.caller); });
    }
    if (!menu->isEmpty())
        menu->addSeparator();
    QAction* reset = menu->addAction(tr("Reset zoom"));
    reset->setObjectName(QStringLiteral("chartResetZoom"));
    reset->setEnabled(isZoomed());
    connect(reset, &QAction::triggered, this, &TimeChartView::resetZoom);
    return menu;
}

void TimeChartView::zoomBy(double factor)
{
    if (m_buckets.count == 0)
        return;
    const qint64 from = axisMinMs();
    const qint64 to = axisMaxMs();
    const double mid = static_cast<double>(from) + static_cast<double>(to - from) / 2;
    const double half = static_cast<double>(to - from) * factor / 2;
    zoomTo(static_cast<qint64>(mid - half), static_cast<qint64>(mid + half));
}

void TimeChartView::resetZoom()
{
    const bool was = isZoomed();
    m_zoomFrom = m_zoomTo = 0;
    applyRange();
    if (was)
        Q_EMIT zoomChanged(false);
}

void TimeChartView::wheelEvent(QWheelEvent* event)
{
    const int delta = event->angleDelta().y();
    if (delta == 0 || m_buckets.count == 0) {
        event->ignore();
        return;
    }
    const qint64 from = axisMinMs();
    const qint64 to = axisMaxMs();
    const QRectF plot = chart()->plotArea();
    const QPointF scenePos = mapToScene(event->position().toPoint());
    const double at = plot.width() > 0
        ? std::clamp((chart()->mapFromScene(scenePos).x() - plot.left()) / plot.width(), 0.0, 1.0)
        : 0.5;
    const double width = static_cast<double>(to - from) * (delta > 0 ? WHEEL_STEP : 1.0 / WHEEL_STEP);
    const double pivot = static_cast<double>(from) + at * static_cast<double>(to - from);
    const auto newFrom = static_cast<qint64>(pivot - at * width);
    zoomTo(newFrom, newFrom + static_cast<qint64>(width));
    event->accept();
}

void TimeChartView::mousePressEvent(QMouseEvent* event)
{
    m_tipPinnedThisClick = false;
    if (event->button() == Qt::RightButton) {
        event->accept(); // the release resets the zoom; QChartView's own would only zoom out
        return;
    }
    QChartView::mousePressEvent(event);
}

void TimeChartView::mouseReleaseEvent(QMouseEvent* event)
{
    if (event->button() == Qt::RightButton) {
        unpinTip();
        event->accept();
        contextMenu()->exec(event->globalPosition().toPoint());
        return;
    }
    const qint64 before = axisMinMs();
    const qint64 beforeMax = axisMaxMs();
    QChartView::mouseReleaseEvent(event);
    // A rubber band ends in QChart::zoomIn, which moved the axis: keep that as the zoom, in
    // absolute time, so the next redraw does not undo it.
    if (!m_settingRange && (axisMinMs() != before || axisMaxMs() != beforeMax))
        zoomTo(axisMinMs(), axisMaxMs());
    if (event->button() == Qt::LeftButton && !m_tipPinnedThisClick)
        unpinTip();
}

void TimeChartView::keyPressEvent(QKeyEvent* event)
{
    if (event->key() == Qt::Key_Escape && (isZoomed() || m_tipPinned)) {
        unpinTip();
        resetZoom();
        event->accept();
        return;
    }
    // The keyboard zooms as the wheel does, with or without Ctrl (browsers' Ctrl+= / Ctrl+-).
    const Qt::KeyboardModifiers mods = event->modifiers() & ~(Qt::KeypadModifier | Qt::ShiftModifier);
    if (mods == Qt::NoModifier || mods == Qt::ControlModifier) {
        switch (event->key()) {
        case Qt::Key_Plus:
        case Qt::Key_Equal:
            zoomBy(WHEEL_STEP);
            event->accept();
            return;
        case Qt::Key_Minus:
            zoomBy(1.0 / WHEEL_STEP);
            event->accept();
            return;
        case Qt::Key_0:
            unpinTip();
            resetZoom();
            event->accept();
            return;
        default:
            break;
        }
    }
    QChartView::keyPressEvent(event);
}

void TimeChartView::showTip(const QPointF& value, const QString& text)
{
    if (m_tipPinned)
        return;
    m_tip->setText(text);
    m_tip->adjustSize();
    const QPointF scene = chart()->mapToScene(chart()->mapToPosition(value));
    QPoint at = mapFromScene(scene) + QPoint(12, 12);
    at.setX(std::clamp(at.x(), 0, std::max(0, width() - m_tip->width())));
    at.setY(std::clamp(at.y(), 0, std::max(0, height() - m_tip->height())));
    m_tip->move(at);
    m_tip->show();
    m_tip->raise();
}

void TimeChartView::hideTip()
{
    if (!m_tipPinned)
        m_tip->hide();
}

void TimeChartView::pinTip()
{
    if (!m_tip->isVisible())
        return;
    m_tipPinned = true;
    m_tipPinnedThisClick = true;
    m_tip->setFrameShadow(QFrame::Raised);
    m_tip->setLineWidth(2);
}

void TimeChartView::unpinTip()
{
    m_tipPinned = false;
    m_tip->setLineWidth(1);
    m_tip->hide();
}

bool TimeChartView::tipVisible() const
{
    return !m_tip->isHidden();
}

QString TimeChartView::tipText() const
{
    return m_tip->text();
}

bool TimeChartView::isDark() const
{
    return palette().color(QPalette::Window).lightness() < 128;
}

void TimeChartView::resizeEvent(QResizeEvent* event)
{
    QChartView::resizeEvent(event);
    applyHeading();
    alignPlotAreas();
    applyTicks(); // as many as the new width has room for
}

int TimeChartView::yIntervalsThatFit() const
{
    const int label = QFontMetrics(m_y->labelsFont()).height() + 6;
    return std::clamp((height() - 90) / label, 2, 6); // the plot: less the title and time axis
}

int TimeChartView::legendRowsThatFit() const
{
    // The legend stays at the right (below the plot it would take the height a short chart
    // needs); a chart too short for every entry shows fewer.
    const int row = QFontMetrics(chart()->legend()->font()).height() + 5;
    return std::max(1, (height() - 70) / row); // the title, the time axis and the margins
}

void TimeChartView::changeEvent(QEvent* event)
{
    QChartView::changeEvent(event);
    if (!m_theming
        && (event->type() == QEvent::PaletteChange || event->type() == QEvent::ApplicationPaletteChange
            || event->type() == QEvent::StyleChange))
        applyTheme();
}

void TimeChartView::applyTheme()
{
    m_theming = true; // setting colours below must not recurse through PaletteChange
    const QPalette pal = palette();
    const QColor text = pal.color(QPalette::WindowText);
    QColor grid = pal.color(QPalette::Mid);
    grid.setAlpha(110);
    QChart* c = chart();
    c->setBackgroundBrush(pal.color(QPalette::Base));
    c->setBackgroundPen(QPen(pal.color(QPalette::Mid)));
    c->setPlotAreaBackgroundVisible(false);
    c->setTitleBrush(text);
    c->legend()->setLabelColor(text);
    for (QAbstractAxis* axis : c->axes()) {
        axis->setLabelsColor(text);
        axis->setTitleBrush(text);
        axis->setLinePenColor(pal.color(QPalette::Mid));
        axis->setGridLineColor(grid);
    }
    setBackgroundBrush(pal.color(QPalette::Window));
    QPalette tip = m_tip->palette();
    tip.setColor(QPalette::Window, pal.color(QPalette::ToolTipBase));
    tip.setColor(QPalette::WindowText, pal.color(QPalette::ToolTipText));
    m_tip->setPalette(tip);
    themeChanged();
    m_theming = false;
}

} // namespace tollgate::ui
