#pragma once

// UsageBarDelegate: draws a cell's share of a limit (KeyedTableModel::FractionRole) as a bar
// behind its text — green, amber from 70%, red from 90% — so a provider or caller near its
// limit stands out without reading numbers.

#include <QStyledItemDelegate>

namespace tollgate::ui {

class UsageBarDelegate final : public QStyledItemDelegate
{
    Q_OBJECT
public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(
        QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
};

} // namespace tollgate::ui
