#pragma once

// KeyedTableView: a table view whose selection follows the *item*, not the row number. Rows
// carry their identity in KeyedTableModel::KeyRole (through any proxy). The selected key is
// remembered when the user picks a row; after every change of the model (rows appear, vanish,
// re-sort, filter, reset) the selection is put back on the row with that key, or cleared when
// that item is gone. QAbstractItemView's own rule in single-selection mode — move the
// selection to the next row when the selected one is removed — is exactly what must not
// happen here: an action would then hit a neighbour the user never chose.
//
// Optionally (setFollowsEnd) the view stays scrolled to the end while the user is there, also
// across resizes, and stays put once the user scrolls up.
//
// Column widths (every table of the dashboard): columns are Interactive, never
// ResizeToContents (which measures every cell of every row on each change), and rows have one
// fixed height. Widths are fitted to their content from a bounded sample — the header, the
// rows in view and the last rows, at most FIT_SAMPLE_ROWS — once rows arrive, vanish or the
// model is reset, at most once per FIT_INTERVAL_MS, never on dataChanged (a tick). A column's
// need only grows (no jitter while values flicker), up to MAX_FIT_WIDTH. The widths then fill
// the view exactly: spare width is shared in equal parts (no one column takes it all),
// and when the needs do not fit, the wider columns give way (their text elides, the full text
// is in the tooltip) down to their header's width, so every column stays on screen before a
// horizontal scroll bar is needed. That layout is redone, without measuring, whenever the
// view's width changes. A column the user resized (with the mouse on the header) is left alone.
//
// Time-derived columns (KeyedTableModel::liveColumnChanged, e.g. ages) are repainted in
// place: only the visible cells of the column are asked for their text.

#include <QElapsedTimer>
#include <QHash>
#include <QList>
#include <QPair>
#include <QPointer>
#include <QSet>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTimer>

namespace tollgate::ui {

class KeyedTableView final : public QTableView
{
    Q_OBJECT
public:
    static constexpr int FIT_SAMPLE_ROWS = 40;
    static constexpr int FIT_INTERVAL_MS = 1000;
    static constexpr int MAX_FIT_WIDTH = 420;
    // A column that gives way keeps at least its header's width, and at least this.
    static constexpr int MIN_GIVE_WIDTH = 48;

    explicit KeyedTableView(QWidget* parent = nullptr);
    // A view as every table of the dashboard has it: whole rows selected one at a time, no row
    // numbers, one fixed row height, alternating rows, no wrapping, at least a header and a row.
    [[nodiscard]] static KeyedTableView* create(QWidget* parent, const QString& name);
    ~KeyedTableView() override; // thaws its model (which may outlive it)

    void setModel(QAbstractItemModel* model) override;

    // The key of the selected item; empty when nothing is selected.
    [[nodiscard]] QString selectedKey() const { return m_key; }
    // Selects the row with this key; false (and nothing selected) when there is none.
    bool selectKey(const QString& key);
    void clearKeySelection();
    [[nodiscard]] int rowOfKey(const QString& key) const;

    void setFollowsEnd(bool follow);
    [[nodiscard]] bool isFollowingEnd() const { return m_following; }

    // Fits the column widths now (from the bounded sample); a fit is otherwise scheduled by
    // the model's structural changes.
    void fitColumns();
    // Test hooks: fits done, and cells measured by them, since construction.
    [[nodiscard]] int columnFits() const { return m_fits; }
    [[nodiscard]] bool isFitPending() const { return m_fitTimer.isActive(); }
    [[nodiscard]] quint64 cellsMeasured() const { return m_cellsMeasured; }

    // Holds the rows still while the pointer is over the table (done here) or a menu of it is
    // open (its opener calls this around exec): the source model keeps vanished rows
    // (KeyedTableModel::freeze) and sorting proxies stop re-sorting, so a click lands on the
    // row it was aimed at; when it thaws, the rows catch up. Nested (counted).
    void freezeRows(bool on);
    [[nodiscard]] bool rowsFrozen() const { return m_freezes > 0; }

Q_SIGNALS:
    void selectedKeyChanged(const QString& key);

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;
    void rowsAboutToBeRemoved(const QModelIndex& parent, int start, int end) override;

private:
    void repaintColumn(int sourceColumn);
    void scheduleFit();
    void layoutColumns();
    [[nodiscard]] QList<int> fitSample() const;
    void onCurrentChanged(const QModelIndex& current);
    void restoreSelection();
    void setKey(const QString& key);
    [[nodiscard]] QString keyOf(const QModelIndex& index) const;

    QString m_key;
    bool m_restoring = false;
    bool m_followsEnd = false;
    bool m_following = true;
    bool m_autoScrolling = false;
    QMetaObject::Connection m_liveColumn;
    QTimer m_fitTimer;
    QElapsedTimer m_sinceFit;
    bool m_fitting = false;
    bool m_headerPressed = false;
    QSet<int> m_userSized; // logical columns the user resized
    QHash<int, int> m_need; // logical column -> widest content measured (high-water mark)
    int m_fits = 0;
    quint64 m_cellsMeasured = 0;
    int m_freezes = 0;
    bool m_hovered = false; // the pointer's freeze is held
    QList<QPair<QPointer<QSortFilterProxyModel>, bool>> m_frozenProxies; // their dynamicSortFilter before
};

} // namespace tollgate::ui
