#pragma once

// KeyedTableModel: the common base of the dashboard's tables. A subclass turns a snapshot
// into rows, each with a stable key (provider name, holder key...) and per-column role data;
// setRows() then applies only the difference: rows whose key vanished are removed, new keys
// are appended, and rows that changed get one dataChanged for the columns that changed. So a
// tick that changes nothing emits nothing, and views keep selection and scroll position.
// applyChanges() does the same from a known difference (keys removed, rows added or
// changed), so a model over 10,000 items builds rows only for the items that changed.
// A key's row is found through a hash, never by a scan.

#include <QAbstractTableModel>
#include <QHash>
#include <QSet>
#include <QStringList>
#include <QVarLengthArray>
#include <QVariant>
#include <QVector>
#include <functional>
#include <utility>

namespace tollgate::ui {

class KeyedTableModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    static constexpr int KeyRole = Qt::UserRole + 1; // the row's key, on every column
    static constexpr int SortRole = Qt::UserRole + 2; // a number or text that sorts naturally
    static constexpr int FractionRole = Qt::UserRole + 3; // 0..1 for usage bars, when meaningful

    // One cell's role data: a few (role, value) pairs kept sorted by role, inline (a QHash
    // per cell cost 2 KB; 10,000 rows of 7 cells were 150 MB).
    class Cell
    {
    public:
        void insert(int role, const QVariant& value);
        [[nodiscard]] QVariant value(int role) const;
        [[nodiscard]] const QVariant* find(int role) const;
        [[nodiscard]] bool contains(int role) const { return find(role) != nullptr; }
        bool operator==(const Cell& other) const { return m_entries == other.m_entries; }

    private:
        QVarLengthArray<std::pair<int, QVariant>, 2> m_entries;
    };
    struct Row
    {
        QString key;
        QVector<Cell> cells;
    };

    // A cell showing `display`, sorted by `sort` when given (else by its text).
    [[nodiscard]] static Cell textCell(const QString& display, const QVariant& sort = {});
    // A duration as the tables show it: "12 s", or "1.5 s" when not whole seconds.
    [[nodiscard]] static QString secondsText(qint64 ms);

    explicit KeyedTableModel(QStringList headers, QObject* parent = nullptr);

    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const override;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const override;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    [[nodiscard]] QString keyAt(int row) const;
    [[nodiscard]] int rowOf(const QString& key) const;

    // While frozen (the pointer over a view of it, a menu of it open) no row moves under the
    // pointer: rows whose key vanished stay, with their last data, and go when it thaws; new
    // rows are still appended at the end and rows still change in place. Nested (counted).
    void freeze(bool on);
    [[nodiscard]] bool isFrozen() const { return m_frozen > 0; }

Q_SIGNALS:
    // The display of a time-derived column moved (ages, countdowns), for every row: a view
    // repaints the column's visible cells (KeyedTableView does). Not a dataChanged: through a
    // sorting proxy that would re-sort all rows every tick.
    void liveColumnChanged(int column);

protected:
    // A cell of this table (invalid and foreign indexes are asked about by views and testers).
    [[nodiscard]] bool isCell(const QModelIndex& index) const;
    void setRows(QVector<Row> rows);
    // Removes the rows of `removed`; replaces the rows of known keys in `upserts` (one
    // dataChanged over the columns that differ) and appends the others in the order given.
    void applyChanges(const QSet<QString>& removed, QVector<Row> upserts);
    [[nodiscard]] const Row* rowByKey(const QString& key) const;

private:
    QStringList m_headers;
    void removeRowsWhere(const std::function<bool(const QString&)>& gone);
    void updateRow(int i, Row& incoming);
    void reindex(int from);

    QVector<Row> m_rows;
    QHash<QString, int> m_rowOf; // key -> index in m_rows
    int m_frozen = 0;
    QSet<QString> m_vanished; // keys gone while frozen, still shown until it thaws
};

} // namespace tollgate::ui
