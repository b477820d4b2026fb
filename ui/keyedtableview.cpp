#include "keyedtableview.h"

#include "keyedtablemodel.h"

#include <QHeaderView>
#include <QScrollBar>

namespace tollgate::ui {

KeyedTableView::KeyedTableView(QWidget* parent)
    : QTableView(parent)
{
    QScrollBar* bar = verticalScrollBar();
    connect(bar, &QScrollBar::valueChanged, this, [this, bar](int value) {
        if (m_autoScrolling)
            return;
        // Whatever moved it (wheel, keys, drag, a shrinking range): at the end means follow.
        m_following = value >= bar->maximum();
    });
    connect(bar, &QScrollBar::rangeChanged, this, [this, bar](int, int max) {
        // Rows arrived or the view was resized: a follower stays at the end.
        if (!m_followsEnd || !m_following)
            return;
        m_autoScrolling = true;
        bar->setValue(max);
        m_autoScrolling = false;
    });
}

void KeyedTableView::setModel(QAbstractItemModel* model)
{
    QTableView::setModel(model);
    setKey(QString());
    if (!model)
        return;
    // Connected after the selection model's own handlers, so these run once it has moved its
    // persistent indexes: they only correct what it got wrong.
    connect(selectionModel(), &QItemSelectionModel::currentRowChanged, this,
        [this](const QModelIndex& current) { onCurrentChanged(current); });
    connect(selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        // Deselected (Ctrl+click): nothing is chosen, even though a current index remains.
        if (!m_restoring && !selectionModel()->hasSelection())
            setKey(QString());
    });
    connect(model, &QAbstractItemModel::rowsInserted, this, &KeyedTableView::restoreSelection);
    connect(model, &QAbstractItemModel::rowsRemoved, this, &KeyedTableView::restoreSelection);
    connect(model, &QAbstractItemModel::rowsMoved, this, &KeyedTableView::restoreSelection);
    connect(model, &QAbstractItemModel::layoutChanged, this, &KeyedTableView::restoreSelection);
    connect(model, &QAbstractItemModel::modelReset, this, &KeyedTableView::restoreSelection);
    connect(model, &QAbstractItemModel::rowsInserted, this, [this] {
        if (m_followsEnd && m_following) {
            m_autoScrolling = true;
            scrollToBottom();
            m_autoScrolling = false;
        }
    });
}

QString KeyedTableView::keyOf(const QModelIndex& index) const
{
    return index.isValid() ? index.siblingAtColumn(0).data(KeyedTableModel::KeyRole).toString() : QString();
}

int KeyedTableView::rowOfKey(const QString& key) const
{
    const QAbstractItemModel* m = model();
    if (!m || key.isEmpty())
        return -1;
    for (int r = 0; r < m->rowCount(rootIndex()); ++r) {
        if (m->index(r, 0, rootIndex()).data(KeyedTableModel::KeyRole).toString() == key)
            return r;
    }
    return -1;
}

bool KeyedTableView::selectKey(const QString& key)
{
    const int row = rowOfKey(key);
    if (row < 0) {
        clearKeySelection();
        return false;
    }
    setCurrentIndex(model()->index(row, 0, rootIndex()));
    selectRow(row);
    setKey(key);
    return true;
}

void KeyedTableView::clearKeySelection()
{
    m_restoring = true;
    if (selectionModel())
        selectionModel()->clear();
    m_restoring = false;
    setKey(QString());
}

void KeyedTableView::setKey(const QString& key)
{
    if (key == m_key)
        return;
    m_key = key;
    Q_EMIT selectedKeyChanged(m_key);
}

void KeyedTableView::onCurrentChanged(const QModelIndex& current)
{
    if (m_restoring)
        return;
    setKey(keyOf(current));
}

void KeyedTableView::rowsAboutToBeRemoved(const QModelIndex& parent, int start, int end)
{
    const QModelIndex current = currentIndex();
    if (current.isValid() && current.parent() == parent && current.row() >= start && current.row() <= end) {
        // The chosen item goes away: nothing is chosen any more (see the header).
        clearKeySelection();
    }
    QTableView::rowsAboutToBeRemoved(parent, start, end);
}

void KeyedTableView::restoreSelection()
{
    if (m_key.isEmpty() || !model())
        return;
    if (keyOf(currentIndex()) == m_key && selectionModel()->isRowSelected(currentIndex().row(), rootIndex()))
        return;
    const int row = rowOfKey(m_key);
    if (row < 0) {
        clearKeySelection();
        return;
    }
    m_restoring = true;
    const QModelIndex index = model()->index(row, 0, rootIndex());
    selectionModel()->setCurrentIndex(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    m_restoring = false;
}

void KeyedTableView::setFollowsEnd(bool follow)
{
    m_followsEnd = follow;
    m_following = true;
}

} // namespace tollgate::ui
