#pragma once

// RateLimitCallersModel: the callers that got 429s in the last 24 hours, per provider, with
// how many and when the last one came.

#include "keyedtablemodel.h"
#include "usagehistory.h"

namespace tollgate::ui {

class RateLimitCallersModel final : public KeyedTableModel
{
    Q_OBJECT
public:
    enum Column { Provider, Caller, Count, Last, ColumnCount };

    explicit RateLimitCallersModel(QObject* parent = nullptr);

    void setCallers(const QVector<UsageHistory::RateLimited>& callers);
};

} // namespace tollgate::ui
