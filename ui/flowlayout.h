#pragma once

// FlowLayout: items left to right, wrapping onto a new row when the next one does not fit,
// like words in a paragraph. Every item gets the width of its size hint (never less than its
// minimum: an item is wrapped, not squeezed), and every item of a row the row's height, so
// tiles of one row line up. An item wider than the whole layout gets the layout's width, or
// its minimum when that is more (the parent then has to scroll sideways; nothing is cut).
//
// The height depends on the width (heightForWidth), so a QScrollArea with a resizable widget
// gives the widget the height its rows need at the viewport's width.

#include <QLayout>
#include <QList>

namespace tollgate::ui {

class FlowLayout final : public QLayout
{
    Q_OBJECT
public:
    explicit FlowLayout(QWidget* parent = nullptr);
    ~FlowLayout() override;

    // The items, in the order they flow.
    void addItem(QLayoutItem* item) override;
    [[nodiscard]] int count() const override;
    [[nodiscard]] QLayoutItem* itemAt(int index) const override;
    [[nodiscard]] QLayoutItem* takeAt(int index) override;
    // Puts the widgets (all in this layout) in this order; others keep their place after them.
    void reorder(const QList<QWidget*>& widgets);

    [[nodiscard]] Qt::Orientations expandingDirections() const override;
    [[nodiscard]] bool hasHeightForWidth() const override { return true; }
    [[nodiscard]] int heightForWidth(int width) const override;
    [[nodiscard]] QSize minimumSize() const override;
    [[nodiscard]] QSize sizeHint() const override;
    void setGeometry(const QRect& rect) override;

    // The height of the first row at this width (what a panel showing one row needs).
    [[nodiscard]] int firstRowHeight(int width) const;
    // The heights of the rows at this width, top to bottom.
    [[nodiscard]] QList<int> rowHeights(int width) const;

private:
    // Lays the visible items out in rect (only measuring when apply is false); returns the
    // rows' heights.
    QList<int> flow(const QRect& rect, bool apply) const;

    QList<QLayoutItem*> m_items;
};

} // namespace tollgate::ui
