#include "keyedtableview.h"

#include "keyedtablemodel.h"

#include <QAbstractProxyModel>
#include <QEvent>
#include <QHeaderView>
#include <QHelpEvent>
#include <QScrollBar>
#include <QToolTip>
#include <algorithm>

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
    m_fitTimer.setSingleShot(true);
    connect(&m_fitTimer, &QTimer::timeout, this, &KeyedTableView::fitColumns);
    horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    horizontalHeader()->setStretchLastSection(true);
    verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    // A resize while a mouse button is down on the header is the user's; widths set by code
    // (setColumnWidth) are starting widths that a fit may still widen.
    horizontalHeader()->viewport()->installEventFilter(this);
    viewport()->installEventFilter(this); // Enter and Leave: the rows hold still under the pointer
    connect(horizontalHeader(), &QHeaderView::sectionResized, this, [this](int logical) {
        if (!m_fitting && m_headerPressed)
            m_userSized.insert(logical);
    });
}

KeyedTableView* KeyedTableView::create(QWidget* parent, const QString& name)
{
    auto* view = new KeyedTableView(parent);
    view->setObjectName(name);
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->setSelectionMode(QAbstractItemView::SingleSelection);
    view->verticalHeader()->hide();
    view->verticalHeader()->setDefaultSectionSize(22);
    view->setAlternatingRowColors(true);
    view->setWordWrap(false);
    // The header and a row: a short screen can give the charts and the log the room.
    view->setMinimumHeight(48);
    return view;
}

KeyedTableView::~KeyedTableView()
{
    while (m_freezes > 0)
        freezeRows(false);
}

void KeyedTableView::freezeRows(bool on)
{
    const int before = m_freezes;
    m_freezes = std::max(0, m_freezes + (on ? 1 : -1));
    if ((before > 0) == (m_freezes > 0))
        return;
    QAbstractItemModel* at = model();
    if (m_freezes > 0) {
        while (auto* proxy = qobject_cast<QAbstractProxyModel*>(at)) {
            if (auto* sorting = qobject_cast<QSortFilterProxyModel*>(proxy)) {
                m_frozenProxies.append({ sorting, sorting->dynamicSortFilter() });
                sorting->setDynamicSortFilter(false);
            }
            at = proxy->sourceModel();
        }
        if (auto* keyed = qobject_cast<KeyedTableModel*>(at))
            keyed->freeze(true);
        return;
    }
    while (auto* proxy = qobject_cast<QAbstractProxyModel*>(at))
        at = proxy->sourceModel();
    if (auto* keyed = qobject_cast<KeyedTableModel*>(at))
        keyed->freeze(false);
    for (const auto& [proxy, dynamic] : std::as_const(m_frozenProxies)) {
        if (proxy)
            proxy->setDynamicSortFilter(dynamic); // true again: it sorts what changed meanwhile
    }
    m_frozenProxies.clear();
}

bool KeyedTableView::eventFilter(QObject* watched, QEvent* event)
{
    if (watched == viewport()) {
        if (event->type() == QEvent::Resize && !m_need.isEmpty())
            layoutColumns();
        if (event->type() == QEvent::ToolTip) {
            // A cell narrowed by the layout shows its whole text on hover, unless the model
            // has a tooltip of its own.
            const auto* help = static_cast<QHelpEvent*>(event);
            const QModelIndex index = indexAt(help->pos());
            if (index.isValid() && !index.data(Qt::ToolTipRole).isValid()
                && sizeHintForIndex(index).width() > columnWidth(index.column())) {
                QToolTip::showText(
                    help->globalPos(), index.data(Qt::DisplayRole).toString(), viewport(), visualRect(index));
                return true;
            }
        }
        if (event->type() == QEvent::Enter && !m_hovered) {
            m_hovered = true;
            freezeRows(true);
        } else if ((event->type() == QEvent::Leave || event->type() == QEvent::Hide) && m_hovered) {
            m_hovered = false;
            freezeRows(false);
        }
    }
    if (watched == horizontalHeader()->viewport()) {
        if (event->type() == QEvent::MouseButtonPress)
            m_headerPressed = true;
        else if (event->type() == QEvent::MouseButtonRelease)
            m_headerPressed = false;
    }
    return QTableView::eventFilter(watched, event);
}

void KeyedTableView::repaintColumn(int sourceColumn)
{
    // Sorting and filtering proxies keep the columns; map anyway through row 0 when there is one.
    int column = sourceColumn;
    const QAbstractItemModel* at = model();
    QList<const QAbstractProxyModel*> chain;
    while (const auto* proxy = qobject_cast<const QAbstractProxyModel*>(at)) {
        chain.prepend(proxy);
        at = proxy->sourceModel();
    }
    if (at && at->rowCount() > 0) {
        QModelIndex index = at->index(0, sourceColumn);
        for (const QAbstractProxyModel* proxy : std::as_const(chain))
            index = proxy->mapFromSource(index);
        if (index.isValid())
            column = index.column();
    }
    if (column < 0 || isColumnHidden(column))
        return;
    viewport()->update(QRect(columnViewportPosition(column), 0, columnWidth(column), viewport()->height()));
}

void KeyedTableView::scheduleFit()
{
    if (m_fitTimer.isActive())
        return;
    const qint64 since = m_sinceFit.isValid() ? m_sinceFit.elapsed() : FIT_INTERVAL_MS;
    m_fitTimer.start(static_cast<int>(std::max<qint64>(0, FIT_INTERVAL_MS - since)));
}

QList<int> KeyedTableView::fitSample() const
{
    const QAbstractItemModel* m = model();
    const int rows = m ? m->rowCount(rootIndex()) : 0;
    QList<int> out;
    if (rows == 0)
        return out;
    // The rows in view first (what the user reads), then the newest, then the first.
    int top = rowAt(0);
    int bottom = rowAt(viewport()->height() - 1);
    if (top < 0)
        top = 0;
    if (bottom < 0)
        bottom = std::min(rows - 1, top + FIT_SAMPLE_ROWS / 2);
    QSet<int> seen;
    auto add = [&](int r) {
        if (r >= 0 && r < rows && out.size() < FIT_SAMPLE_ROWS && !seen.contains(r)) {
            seen.insert(r);
            out.append(r);
        }
    };
    for (int r = top; r <= bottom && out.size() < FIT_SAMPLE_ROWS / 2; ++r)
        add(r);
    for (int r = rows - 1; r >= 0 && out.size() < FIT_SAMPLE_ROWS * 3 / 4; --r)
        add(r);
    for (int r = 0; r < rows && out.size() < FIT_SAMPLE_ROWS; ++r)
        add(r);
    return out;
}

void KeyedTableView::fitColumns()
{
    m_fitTimer.stop();
    m_sinceFit.start();
    QAbstractItemModel* m = model();
    if (!m)
        return;
    ++m_fits;
    const QList<int> sample = fitSample();
    QHeaderView* header = horizontalHeader();
    const int columns = m->columnCount(rootIndex());
    for (int c = 0; c < columns; ++c) {
        if (m_userSized.contains(c) || isColumnHidden(c))
            continue;
        int width = header->sectionSizeHint(c);
        for (int r : sample) {
            const QModelIndex index = m->index(r, c, rootIndex());
            ++m_cellsMeasured;
            width = std::max(width, sizeHintForIndex(index).width() + (showGrid() ? 1 : 0));
        }
        m_need[c] = std::max(m_need.value(c), std::min(width, MAX_FIT_WIDTH));
    }
    layoutColumns();
}

void KeyedTableView::layoutColumns()
{
    QHeaderView* header = horizontalHeader();
    const int columns = header->count();
    int room = viewport()->width();
    QList<int> flex;
    qint64 needs = 0;
    for (int c = 0; c < columns; ++c) {
        if (isColumnHidden(c))
            continue;
        if (m_userSized.contains(c) || !m_need.contains(c)) {
            room -= header->sectionSize(c);
            continue;
        }
        flex.append(c);
        needs += m_need.value(c);
    }
    if (flex.isEmpty() || room <= 0)
        return;
    QHash<int, int> width;
    if (needs <= room) {
        // Spare width in equal shares (a long value already has its need); the last column
        // takes the rounding.
        const qint64 share = (room - needs) / flex.size();
        int given = 0;
        for (int c : std::as_const(flex)) {
            width[c] = m_need.value(c) + static_cast<int>(share);
            given += width[c];
        }
        width[flex.last()] += room - given;
    } else {
        // Each column gives way in proportion to what it has above its floor.
        QHash<int, int> floor;
        qint64 slack = 0;
        for (int c : std::as_const(flex)) {
            floor[c] = std::min(m_need.value(c), std::max(header->sectionSizeHint(c), MIN_GIVE_WIDTH));
            slack += m_need.value(c) - floor[c];
        }
        const qint64 excess = needs - room;
        for (int c : std::as_const(flex)) {
            const qint64 give = slack <= excess ? m_need.value(c) - floor[c]
                                                : ((m_need.value(c) - floor[c]) * excess + slack - 1) / slack;
            width[c] = m_need.value(c) - static_cast<int>(give);
        }
    }
    m_fitting = true;
    for (int c : std::as_const(flex)) {
        if (header->sectionSize(c) != width[c])
            header->resizeSection(c, width[c]);
    }
    m_fitting = false;
}

void KeyedTableView::setModel(QAbstractItemModel* model)
{
    while (m_freezes > 0) // the old model thaws
        freezeRows(false);
    m_hovered = false;
    QTableView::setModel(model);
    setKey(QString());
    disconnect(m_liveColumn);
    if (!model)
        return;
    const QAbstractItemModel* source = model;
    while (const auto* proxy = qobject_cast<const QAbstractProxyModel*>(source))
        source = proxy->sourceModel();
    if (const auto* keyed = qobject_cast<const KeyedTableModel*>(source))
        m_liveColumn
            = connect(keyed, &KeyedTableModel::liveColumnChanged, this, &KeyedTableView::repaintColumn);
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
    connect(model, &QAbstractItemModel::rowsInserted, this, &KeyedTableView::scheduleFit);
    connect(model, &QAbstractItemModel::rowsRemoved, this, &KeyedTableView::scheduleFit);
    connect(model, &QAbstractItemModel::modelReset, this, &KeyedTableView::scheduleFit);
    connect(model, &QAbstractItemModel::layoutChanged, this, &KeyedTableView::scheduleFit);
    m_userSized.clear();
    m_need.clear();
    scheduleFit();
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
    // Through the proxies down to the keyed model: its hash finds the row, no scan.
    const QAbstractItemModel* at = m;
    QList<const QAbstractProxyModel*> chain;
    while (const auto* proxy = qobject_cast<const QAbstractProxyModel*>(at)) {
        chain.prepend(proxy);
        at = proxy->sourceModel();
    }
    if (const auto* keyed = qobject_cast<const KeyedTableModel*>(at); keyed && !rootIndex().isValid()) {
        const int row = keyed->rowOf(key);
        if (row < 0)
            return -1;
        QModelIndex index = keyed->index(row, 0);
        for (const QAbstractProxyModel* proxy : std::as_const(chain))
            index = proxy->mapFromSource(index);
        return index.isValid() ? index.row() : -1;
    }
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
