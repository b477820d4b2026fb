#include "keyedtablemodel.h"

#include <algorithm>

namespace tollgate::ui {

void KeyedTableModel::Cell::insert(int role, const QVariant& value)
{
    auto it = std::lower_bound(m_entries.begin(), m_entries.end(), role,
        [](const std::pair<int, QVariant>& e, int r) { return e.first < r; });
    if (it != m_entries.end() && it->first == role)
        it->second = value;
    else
        m_entries.insert(it, { role, value });
}

const QVariant* KeyedTableModel::Cell::find(int role) const
{
    for (const auto& e : m_entries) {
        if (e.first == role)
            return &e.second;
    }
    return nullptr;
}

QVariant KeyedTableModel::Cell::value(int role) const
{
    const QVariant* v = find(role);
    return v ? *v : QVariant();
}

KeyedTableModel::Cell KeyedTableModel::textCell(const QString& display, const QVariant& sort)
{
    Cell c;
    c.insert(Qt::DisplayRole, display);
    if (sort.isValid())
        c.insert(SortRole, sort);
    return c;
}

QString KeyedTableModel::secondsText(qint64 ms)
{
    if (ms % 1000 == 0)
        return QStringLiteral("%1 s").arg(ms / 1000);
    return QStringLiteral("%1 s").arg(static_cast<double>(ms) / 1000.0, 0, 'f', 1);
}

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
        const QVariant* sort = cell.find(SortRole);
        return sort ? *sort : cell.value(Qt::DisplayRole);
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
    return m_rowOf.value(key, -1);
}

const KeyedTableModel::Row* KeyedTableModel::rowByKey(const QString& key) const
{
    const int i = rowOf(key);
    return i < 0 ? nullptr : &m_rows.at(i);
}

void KeyedTableModel::reindex(int from)
{
    for (int i = from; i < m_rows.size(); ++i)
        m_rowOf.insert(m_rows.at(i).key, i);
}

void KeyedTableModel::freeze(bool on)
{
    m_frozen = std::max(0, m_frozen + (on ? 1 : -1));
    if (m_frozen > 0 || m_vanished.isEmpty())
        return;
    const QSet<QString> vanished = std::exchange(m_vanished, {});
    removeRowsWhere([&vanished](const QString& key) { return vanished.contains(key); });
}

void KeyedTableModel::removeRowsWhere(const std::function<bool(const QString&)>& gone)
{
    if (m_frozen > 0) {
        for (const Row& row : std::as_const(m_rows)) {
            if (gone(row.key))
                m_vanished.insert(row.key);
        }
        return;
    }
    // From the bottom so earlier indexes stay valid; contiguous runs go in one call.
    int lowest = -1;
    for (int i = static_cast<int>(m_rows.size()) - 1; i >= 0;) {
        if (!gone(m_rows.at(i).key)) {
            --i;
            continue;
        }
        int first = i;
        while (first > 0 && gone(m_rows.at(first - 1).key))
            --first;
        beginRemoveRows({}, first, i);
        for (int r = first; r <= i; ++r)
            m_rowOf.remove(m_rows.at(r).key);
        m_rows.remove(first, i - first + 1);
        endRemoveRows();
        lowest = first;
        i = first - 1;
    }
    if (lowest >= 0)
        reindex(lowest);
}

void KeyedTableModel::updateRow(int i, Row& incoming)
{
    const int columns = static_cast<int>(m_headers.size());
    Row& mine = m_rows[i];
    incoming.cells.resize(columns);
    int firstChanged = -1;
    int lastChanged = -1;
    for (int c = 0; c < columns; ++c) {
        const Cell& before = c < mine.cells.size() ? mine.cells.at(c) : Cell();
        if (before != incoming.cells.at(c)) {
            if (firstChanged < 0)
                firstChanged = c;
            lastChanged = c;
        }
    }
    if (firstChanged >= 0) {
        mine.cells = std::move(incoming.cells);
        Q_EMIT dataChanged(index(i, firstChanged), index(i, lastChanged));
    }
}

void KeyedTableModel::setRows(QVector<Row> rows)
{
    QHash<QString, int> incoming;
    incoming.reserve(rows.size());
    for (int i = 0; i < rows.size(); ++i)
        incoming.insert(rows.at(i).key, i);
    removeRowsWhere([&incoming](const QString& key) { return !incoming.contains(key); });

    // Update the rows that stay, in place (a row kept only because the model is frozen has
    // nothing new; one that came back is no longer on its way out).
    for (int i = 0; i < m_rows.size(); ++i) {
        const QString key = m_rows.at(i).key;
        const auto at = incoming.constFind(key);
        if (at == incoming.constEnd())
            continue;
        m_vanished.remove(key);
        updateRow(i, rows[*at]);
        incoming.remove(key);
    }

    // Append the new keys, in the order given.
    QVector<Row> fresh;
    for (int i = 0; i < rows.size(); ++i) {
        if (incoming.contains(rows.at(i).key))
            fresh.append(std::move(rows[i]));
    }
    applyChanges({}, std::move(fresh));
}

void KeyedTableModel::applyChanges(const QSet<QString>& removed, QVector<Row> upserts)
{
    if (!removed.isEmpty())
        removeRowsWhere([&removed](const QString& key) { return removed.contains(key); });
    const int columns = static_cast<int>(m_headers.size());
    QVector<Row> fresh;
    for (Row& row : upserts) {
        m_vanished.remove(row.key);
        if (const int i = rowOf(row.key); i >= 0)
            updateRow(i, row);
        else
            fresh.append(std::move(row));
    }
    if (fresh.isEmpty())
        return;
    const int at = static_cast<int>(m_rows.size());
    beginInsertRows({}, at, at + static_cast<int>(fresh.size()) - 1);
    for (Row& row : fresh) {
        row.cells.resize(columns);
        m_rowOf.insert(row.key, static_cast<int>(m_rows.size()));
        m_rows.append(std::move(row));
    }
    endInsertRows();
}

} // namespace tollgate::ui
