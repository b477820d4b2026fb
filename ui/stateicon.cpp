#include "stateicon.h"

#include <QPainter>
#include <QPainterPath>
#include <QPixmap>

namespace tollgate::ui {

namespace {

QPixmap draw(TrayState state, int size)
{
    QPixmap pm(size, size);
    pm.fill(Qt::transparent);
    QPainter p(&pm);
    p.setRenderHint(QPainter::Antialiasing);
    p.scale(size / 32.0, size / 32.0);
    QColor fill;
    switch (state) {
    case TrayState::Normal:
        fill = QColor(0x2e, 0x9d, 0x4f);
        break;
    case TrayState::Backoff:
        fill = QColor(0xe0, 0x8a, 0x00);
        break;
    case TrayState::Paused:
        fill = QColor(0x2d, 0x6c, 0xd0);
        break;
    case TrayState::Storm:
        fill = QColor(0xd0, 0x2b, 0x2b);
        break;
    }
    p.setPen(QPen(fill.darker(140), 1.5));
    p.setBrush(fill);
    p.drawEllipse(QRectF(2, 2, 28, 28));
    p.setPen(Qt::NoPen);
    p.setBrush(Qt::white);
    switch (state) {
    case TrayState::Normal: {
        QPen pen(Qt::white, 3.5, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin);
        p.setPen(pen);
        p.setBrush(Qt::NoBrush);
        QPainterPath check;
        check.moveTo(9, 16.5);
        check.lineTo(14, 21.5);
        check.lineTo(23, 11);
        p.drawPath(check);
        break;
    }
    case TrayState::Backoff: {
        QPolygonF glass;
        glass << QPointF(10, 8) << QPointF(22, 8) << QPointF(16, 16) << QPointF(22, 24) << QPointF(10, 24)
              << QPointF(16, 16);
        p.drawPolygon(glass);
        break;
    }
    case TrayState::Paused:
        p.drawRoundedRect(QRectF(10, 9, 4.5, 14), 1, 1);
        p.drawRoundedRect(QRectF(17.5, 9, 4.5, 14), 1, 1);
        break;
    case TrayState::Storm: {
        QPolygonF bolt;
        bolt << QPointF(18, 5) << QPointF(9, 18) << QPointF(15, 18) << QPointF(13, 27) << QPointF(23, 13)
             << QPointF(17, 13) << QPointF(19, 5);
        p.drawPolygon(bolt);
        break;
    }
    }
    return pm;
}

} // namespace

QIcon StateIcon::icon(TrayState state)
{
    QIcon icon;
    for (int size : { 16, 22, 32, 48, 64 })
        icon.addPixmap(draw(state, size));
    return icon;
}

QString StateIcon::name(TrayState state)
{
    switch (state) {
    case TrayState::Normal:
        return QStringLiteral("normal");
    case TrayState::Backoff:
        return QStringLiteral("backoff");
    case TrayState::Paused:
        return QStringLiteral("paused");
    case TrayState::Storm:
        return QStringLiteral("storm");
    }
    return {};
}

} // namespace tollgate::ui
