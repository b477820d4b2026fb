#include "usagebardelegate.h"

#include "keyedtablemodel.h"

#include <QPainter>

namespace tollgate::ui {

void UsageBarDelegate::paint(
    QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const
{
    const QVariant fraction = index.data(KeyedTableModel::FractionRole);
    if (fraction.isValid()) {
        const double f = std::clamp(fraction.toDouble(), 0.0, 1.0);
        QColor c = f >= 0.9 ? QColor(0xe5, 0x73, 0x73)
            : f >= 0.7      ? QColor(0xf2, 0xc1, 0x4e)
                            : QColor(0x8f, 0xd1, 0x9e);
        // On a dark base the bar is a muted tint, so the light text over it stays readable.
        if (option.palette.color(QPalette::Base).lightness() < 128)
            c.setAlpha(110);
        QRectF bar = QRectF(option.rect).adjusted(2, 3, -2, -3);
        bar.setWidth(bar.width() * f);
        painter->save();
        painter->setPen(Qt::NoPen);
        painter->setBrush(c);
        painter->drawRoundedRect(bar, 2, 2);
        painter->restore();
    }
    QStyledItemDelegate::paint(painter, option, index);
}

} // namespace tollgate::ui
