#pragma once

// CallerUsageModel: who is eating the quota — requests in the last minute and the last hour,
// each caller's share of all requests, and tokens, one row per caller and provider seen in the
// hour (key: provider, a unit separator, caller).

#include "keyedtablemodel.h"
#include "usagehistory.h"

namespace tollgate::ui {

class CallerUsageModel final : public KeyedTableModel
{
    Q_OBJECT
public:
    enum Column { Caller, Provider, LastMinute, LastHour, Share, Tokens, ColumnCount };

    explicit CallerUsageModel(QObject* parent = nullptr);

    void setTotals(const QVector<UsageHistory::CallerTotals>& totals);
};

} // namespace tollgate::ui
