#include "keyedtablemodel.h"

namespace tollgate::ui {

KeyedTableModel::KeyedTableModel(QStringList headers, QObject* parent)
    : QAbstractTableModel(parent)
    , m_headers(std::move(headers))
{
}

int KeyedTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int KeyedTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_headers.size());
}

bool KeyedTableModel::isCell(const QModelIndex& index) const
{
    return index.isValid() && index.model() == this && !index.parent().isValid()
        && index.row() < m_rows.size() && index.column() < m_headers.size();
}

QVariant KeyedTableModel::data(const QModelIndex& index, int role) const
{
    if (!isCell(index))
        return {};
    const Row& row = m_rows.at(index.row());
    if (role == KeyRole)
        return row.key;
    if (index.column() >= row.cells.size())
        return {};
    const Cell& cell = row.cells.at(index.column());
    if (role == SortRole) {
        auto it = cell.constFind(SortRole);
        return it != cell.constEnd() ? *it : cell.value(Qt::DisplayRole);
    }
    return cell.value(role);
}

QVariant KeyedTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0
        || section >= m_headers.size())
        return {};
    return m_headers.at(section);
}

QString KeyedTableModel::keyAt(int row) const
{
    return row >= 0 && row < m_rows.size() ? m_rows.at(row).key : QString();
}

int KeyedTableModel::rowOf(const QString& key) const
{
    for (int i = 0; i < m_rows.size(); ++i) {
        if (m_rows.at(i).key == key)
            return i;
    }
    return -1;
}

const KeyedTableModel::Row* KeyedTableModel::rowByKey(const QString& key) const
{
    const int i = rowOf(key);
    return i < 0 ? nullptr : &m_rows.at(i);
}

void KeyedTableModel::setRows(QVector<Row> rows)
{
    QHash<QString, int> incoming;
    for (int i = 0; i < rows.size(); ++i)
        incoming.insert(rows.at(i).key, i);

    // Remove vanished keys, from the bottom so earlier indexes stay valid; contiguous runs
    // go in one call.
    for (int i = static_cast<int>(m_rows.size()) - 1; i >= 0;) {
        if (incoming.contains(m_rows.at(i).key)) {
            --i;
            continue;
        }
        int first = i;
        while (first > 0 && !incoming.contains(m_rows.at(first - 1).key))
            --first;
        beginRemoveRows({}, first, i);
        m_rows.remove(first, i - first + 1);
        endRemoveRows();
        i = first - 1;
    }

    // Update the rows that stay, in place.
    const int columns = static_cast<int>(m_headers.size());
    for (int i = 0; i < m_rows.size(); ++i) {
        Row& mine = m_rows[i];
        Row& theirs = rows[incoming.value(mine.key)];
        theirs.cells.resize(columns);
        int firstChanged = -1;
        int lastChanged = -1;
        for (int c = 0; c < columns; ++c) {
            const Cell& before = c < mine.cells.size() ? mine.cells.at(c) : Cell();
            if (before != theirs.cells.at(c)) {
                if (firstChanged < 0)
                    firstChanged = c;
                lastChanged = c;
            }
        }
        if (firstChanged >= 0) {
            mine.cells = theirs.cells;
            Q_EMIT dataChanged(index(i, firstChanged), index(i, lastChanged));
        }
        incoming.remove(mine.key);
    }

    // Append the new keys, in the order given.
    QVector<int> fresh;
    for (int i = 0; i < rows.size(); ++i) {
        if (incoming.contains(rows.at(i).key))
            fresh.append(i);
    }
    if (!fresh.isEmpty()) {
        const int at = static_cast<int>(m_rows.size());
        beginInsertRows({}, at, at + static_cast<int>(fresh.size()) - 1);
        for (int i : fresh) {
            rows[i].cells.resize(columns);
            m_rows.append(std::move(rows[i]));
        }
        endInsertRows();
    }
}

} // namespace tollgate::ui
