#include "focusringstyle.h"

#include <QPainter>
#include <QStyleOption>

namespace tollgate::ui {

namespace {

void drawRing(const QStyleOption* option, QPainter* painter, const QRect& area)
{
    painter->save();
    painter->setRenderHint(QPainter::Antialiasing, false);
    QPen pen(option->palette.color(QPalette::Active, QPalette::Highlight));
    pen.setWidth(FocusRingStyle::RING_WIDTH);
    pen.setJoinStyle(Qt::MiterJoin);
    painter->setPen(pen);
    painter->setBrush(Qt::NoBrush);
    // A 2 px pen straddles the path: inset by one so both pixels fall inside the rectangle.
    painter->drawRect(area.adjusted(1, 1, -1, -1));
    painter->restore();
}

} // namespace

FocusRingStyle::FocusRingStyle(QStyle* base)
    : QProxyStyle(base)
{
}

void FocusRingStyle::drawPrimitive(
    PrimitiveElement element, const QStyleOption* option, QPainter* painter, const QWidget* widget) const
{
    if (element == PE_FrameFocusRect && option) {
        drawRing(option, painter, option->rect);
        return;
    }
    QProxyStyle::drawPrimitive(element, option, painter, widget);
}

void FocusRingStyle::drawControl(
    ControlElement element, const QStyleOption* option, QPainter* painter, const QWidget* widget) const
{
    if (element == CE_FocusFrame && option) {
        drawRing(option, painter, option->rect);
        return;
    }
    QProxyStyle::drawControl(element, option, painter, widget);
}

int FocusRingStyle::pixelMetric(PixelMetric metric, const QStyleOption* option, const QWidget* widget) const
{
    // The focus frame sits just outside the widget it rings.
    if (metric == PM_FocusFrameHMargin || metric == PM_FocusFrameVMargin)
        return RING_WIDTH;
    return QProxyStyle::pixelMetric(metric, option, widget);
}

} // namespace tollgate::ui
