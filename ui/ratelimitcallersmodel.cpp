#include "ratelimitcallersmodel.h"

#include <QDateTime>

namespace tollgate::ui {

RateLimitCallersModel::RateLimitCallersModel(QObject* parent)
    : KeyedTableModel({ tr("Provider"), tr("Caller"), tr("429s, 24 h"), tr("Last 429") }, parent)
{
}

void RateLimitCallersModel::setCallers(const QVector<UsageHistory::RateLimited>& callers)
{
    QVector<Row> rows;
    for (const auto& c : callers) {
        Row row;
        row.key = c.provider + QLatin1Char('\n') + c.caller;
        row.cells.resize(ColumnCount);
        row.cells[Provider].insert(Qt::DisplayRole, c.provider);
        row.cells[Caller].insert(Qt::DisplayRole, c.caller);
        row.cells[Count].insert(Qt::DisplayRole, QString::number(c.count));
        row.cells[Count].insert(SortRole, c.count);
        row.cells[Last].insert(
            Qt::DisplayRole, QDateTime::fromMSecsSinceEpoch(c.lastMs).toString(QStringLiteral("HH:mm:ss")));
        row.cells[Last].insert(SortRole, c.lastMs);
        rows.append(std::move(row));
    }
    setRows(std::move(rows));
}

} // namespace tollgate::ui
