#include "usagebardelegate.h"

#include "keyedtablemodel.h"

#include <QApplication>
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
    // Drawn as QStyledItemDelegate does, except that over a bar the text keeps the view's own
    // colour: the model's warning colour (red when nearly full) on a red bar is unreadable.
    QStyleOptionViewItem opt = option;
    initStyleOption(&opt, index);
    if (fraction.isValid())
        opt.palette.setBrush(QPalette::Text, option.palette.brush(QPalette::Text));
    const QWidget* widget = opt.widget;
    QStyle* style = widget ? widget->style() : QApplication::style();
    style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, widget);
}

} // namespace tollgate::ui
