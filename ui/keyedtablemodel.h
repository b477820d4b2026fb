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
#include <QVariant>
#include <QVector>
#include <functional>

namespace tollgate::ui {

class KeyedTableModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    static constexpr int KeyRole = Qt::UserRole + 1; // the row's key, on every column
    static constexpr int SortRole = Qt::UserRole + 2; // a number or text that sorts naturally
    static constexpr int FractionRole = Qt::UserRole + 3; // 0..1 for usage bars, when meaningful

    using Cell = QHash<int, QVariant>;
    struct Row
    {
        QString key;
        QVector<Cell> cells;
    };

    explicit KeyedTableModel(QStringList headers, QObject* parent = nullptr);

    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const override;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const override;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    [[nodiscard]] QString keyAt(int row) const;
    [[nodiscard]] int rowOf(const QString& key) const;

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
};

} // namespace tollgate::ui
