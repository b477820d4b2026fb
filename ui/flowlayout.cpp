#include "flowlayout.h"

#include <QWidget>
#include <algorithm>

namespace tollgate::ui {

namespace {

constexpr int DEFAULT_SPACING = 8;

} // namespace

FlowLayout::FlowLayout(QWidget* parent)
    : QLayout(parent)
{
}

FlowLayout::~FlowLayout()
{
    while (QLayoutItem* item = takeAt(0))
        delete item;
}

void FlowLayout::addItem(QLayoutItem* item)
{
    m_items.append(item);
    invalidate();
}

int FlowLayout::count() const
{
    return static_cast<int>(m_items.size());
}

QLayoutItem* FlowLayout::itemAt(int index) const
{
    return index >= 0 && index < m_items.size() ? m_items.at(index) : nullptr;
}

QLayoutItem* FlowLayout::takeAt(int index)
{
    if (index < 0 || index >= m_items.size())
        return nullptr;
    QLayoutItem* item = m_items.takeAt(index);
    invalidate();
    return item;
}

void FlowLayout::reorder(const QList<QWidget*>& widgets)
{
    QList<QLayoutItem*> ordered;
    ordered.reserve(m_items.size());
    for (QWidget* w : widgets) {
        auto it = std::find_if(
            m_items.cbegin(), m_items.cend(), [w](const QLayoutItem* item) { return item->widget() == w; });
        if (it != m_items.cend() && !ordered.contains(*it))
            ordered.append(*it);
    }
    for (QLayoutItem* item : std::as_const(m_items)) {
        if (!ordered.contains(item))
            ordered.append(item);
    }
    if (ordered != m_items) {
        m_items = ordered;
        invalidate();
    }
}

Qt::Orientations FlowLayout::expandingDirections() const
{
    return {};
}

int FlowLayout::heightForWidth(int width) const
{
    const QMargins m = contentsMargins();
    const QList<int> rows = flow(QRect(0, 0, width, 0), false);
    int h = m.top() + m.bottom();
    for (int r : rows)
        h += r;
    const int gap = spacing() >= 0 ? spacing() : DEFAULT_SPACING;
    return h + gap * std::max<int>(0, static_cast<int>(rows.size()) - 1);
}

QList<int> FlowLayout::rowHeights(int width) const
{
    return flow(QRect(0, 0, width, 0), false);
}

int FlowLayout::firstRowHeight(int width) const
{
    const QMargins m = contentsMargins();
    const QList<int> rows = flow(QRect(0, 0, width, 0), false);
    return m.top() + m.bottom() + (rows.isEmpty() ? 0 : rows.first());
}

QSize FlowLayout::minimumSize() const
{
    // The widest item's minimum (narrower, it would be cut) and the tallest item.
    QSize size;
    for (const QLayoutItem* item : m_items) {
        if (!item->isEmpty())
            size = size.expandedTo(item->minimumSize());
    }
    const QMargins m = contentsMargins();
    return size + QSize(m.left() + m.right(), m.top() + m.bottom());
}

QSize FlowLayout::sizeHint() const
{
    // One row of everything: what the layout would like, were there room.
    const int gap = spacing() >= 0 ? spacing() : DEFAULT_SPACING;
    int width = 0;
    int height = 0;
    int n = 0;
    for (const QLayoutItem* item : m_items) {
        if (item->isEmpty())
            continue;
        const QSize hint = item->sizeHint().expandedTo(item->minimumSize());
        width += hint.width() + (n++ > 0 ? gap : 0);
        height = std::max(height, hint.height());
    }
    const QMargins m = contentsMargins();
    return { width + m.left() + m.right(), height + m.top() + m.bottom() };
}

void FlowLayout::setGeometry(const QRect& rect)
{
    QLayout::setGeometry(rect);
    flow(rect, true);
}

QList<int> FlowLayout::flow(const QRect& rect, bool apply) const
{
    const QRect area = rect.marginsRemoved(contentsMargins());
    const int gap = spacing() >= 0 ? spacing() : DEFAULT_SPACING;
    struct Placed
    {
        QLayoutItem* item;
        int x;
        int width;
    };
    QList<int> heights;
    QList<QList<Placed>> rows;
    int x = area.left();
    for (QLayoutItem* item : m_items) {
        if (item->isEmpty())
            continue;
        const QSize min = item->minimumSize();
        const QSize hint = item->sizeHint().expandedTo(min);
        const int width = std::max(min.width(), std::min(hint.width(), area.width()));
        if (rows.isEmpty() || (x > area.left() && x + width > area.left() + area.width())) {
            rows.append(QList<Placed>());
            heights.append(0);
            x = area.left();
        }
        rows.last().append(Placed { item, x, width });
        heights.last() = std::max(heights.last(), hint.height());
        x += width + gap;
    }
    if (apply) {
        int y = area.top();
        for (int r = 0; r < rows.size(); ++r) {
            for (const Placed& p : rows[r])
                p.item->setGeometry(QRect(p.x, y, p.width, heights[r]));
            y += heights[r] + gap;
        }
    }
    return heights;
}

} // namespace tollgate::ui
