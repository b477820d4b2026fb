#pragma once

// HoldersModel: who holds something right now — the providers' parallel slots and the lock
// files in the watched lock directories — with pid, caller or tag, age and whether the holder
// is alive, dead (its slot or lock only waits to be reclaimed), stale or overdue.

#include "dashboardsnapshot.h"
#include "keyedtablemodel.h"

namespace tollgate::ui {

class HoldersModel final : public KeyedTableModel
{
    Q_OBJECT
public:
    enum Column { Kind, Where, Pid, Who, Age, Health, CommandLine, ColumnCount };

    explicit HoldersModel(QObject* parent = nullptr);

    void setSnapshot(const DashboardSnapshot& snapshot);
    void tick(qint64 nowMs);

    [[nodiscard]] const HolderInfo* holder(const QString& key) const;
    [[nodiscard]] int deadCount() const;

    [[nodiscard]] static QString healthName(HolderHealth health);
    [[nodiscard]] static QString ageText(qint64 ms);

private:
    void rebuild();

    std::vector<HolderInfo> m_holders;
    qint64 m_nowMs = 0;
};

} // namespace tollgate::ui
