#include "callerusagemodel.h"

#include <cmath>

namespace tollgate::ui {

CallerUsageModel::CallerUsageModel(QObject* parent)
    : KeyedTableModel({ tr("Caller"), tr("Provider"), tr("Req/min now"), tr("Requests, 60 min"), tr("Share"),
                          tr("Tokens, 60 min") },
        parent)
{
}

void CallerUsageModel::setTotals(const QVector<UsageHistory::CallerTotals>& totals)
{
    QVector<Row> rows;
    for (const auto& t : totals) {
        Row row;
        row.key = t.provider + QChar(0x1f) + t.caller;
        row.cells.resize(ColumnCount);
        row.cells[Caller].insert(Qt::DisplayRole, t.caller);
        row.cells[Provider].insert(Qt::DisplayRole, t.provider);
        row.cells[LastMinute].insert(Qt::DisplayRole, QString::number(t.requestsLastMinute));
        row.cells[LastMinute].insert(SortRole, t.requestsLastMinute);
        row.cells[LastHour].insert(Qt::DisplayRole, QString::number(t.requests));
        row.cells[LastHour].insert(SortRole, t.requests);
        row.cells[Share].insert(Qt::DisplayRole, QStringLiteral("%1%").arg(std::lround(t.share * 100.0)));
        row.cells[Share].insert(SortRole, t.share);
        row.cells[Share].insert(FractionRole, t.share);
        row.cells[Tokens].insert(Qt::DisplayRole, QString::number(t.tokens));
        row.cells[Tokens].insert(SortRole, t.tokens);
        rows.append(std::move(row));
    }
    setRows(std::move(rows));
}

} // namespace tollgate::ui
