#include "holdersmodel.h"

#include <QBrush>
#include <QColor>
#include <QFileInfo>

namespace tollgate::ui {

HoldersModel::HoldersModel(QObject* parent)
    : KeyedTableModel({ tr("Kind"), tr("Provider / lock file"), tr("PID"), tr("Caller / tag"), tr("Age"),
                          tr("Holder"), tr("Command line") },
        parent)
{
}

QString HoldersModel::healthName(HolderHealth health)
{
    switch (health) {
    case HolderHealth::Alive:
        return tr("alive");
    case HolderHealth::Dead:
        return tr("dead");
    case HolderHealth::Stale:
        return tr("stale");
    case HolderHealth::Overdue:
        return tr("alive, overdue");
    case HolderHealth::Corrupt:
        return tr("corrupt file");
    }
    return {};
}

QString HoldersModel::ageText(qint64 ms)
{
    const qint64 s = std::max<qint64>(0, ms / 1000);
    if (s < 60)
        return tr("%1 s").arg(s);
    if (s < 3600)
        return tr("%1 min %2 s").arg(s / 60).arg(s % 60);
    if (s < 86400)
        return tr("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60);
    return tr("%1 d %2 h").arg(s / 86400).arg((s % 86400) / 3600);
}

void HoldersModel::setSnapshot(const DashboardSnapshot& snapshot)
{
    m_holders = snapshot.holders;
    m_nowMs = snapshot.nowMs;
    rebuild();
}

void HoldersModel::tick(qint64 nowMs)
{
    m_nowMs = nowMs;
    rebuild();
}

const HolderInfo* HoldersModel::holder(const QString& key) const
{
    for (const HolderInfo& h : m_holders) {
        if (h.key == key)
            return &h;
    }
    return nullptr;
}

int HoldersModel::deadCount() const
{
    int n = 0;
    for (const HolderInfo& h : m_holders)
        n += h.health == HolderHealth::Dead || h.health == HolderHealth::Stale;
    return n;
}

void HoldersModel::rebuild()
{
    QVector<Row> rows;
    rows.reserve(static_cast<int>(m_holders.size()));
    for (const HolderInfo& h : m_holders) {
        Row row;
        row.key = h.key;
        row.cells.resize(ColumnCount);
        const bool slot = h.kind == HolderKind::Slot;
        row.cells[Kind].insert(Qt::DisplayRole, slot ? tr("slot") : tr("lock file"));
        row.cells[Where].insert(Qt::DisplayRole, slot ? h.provider : QFileInfo(h.path).fileName());
        row.cells[Where].insert(
            Qt::ToolTipRole, slot ? tr("%1, fence %2").arg(h.provider).arg(h.fence) : h.path);
        row.cells[Pid].insert(Qt::DisplayRole, h.pid ? QString::number(h.pid) : QString());
        row.cells[Pid].insert(SortRole, h.pid);
        QString who = h.who;
        if (!h.model.isEmpty())
            who += QStringLiteral(" (%1)").arg(h.model);
        row.cells[Who].insert(Qt::DisplayRole, who);
        const qint64 age = m_nowMs - h.sinceMs;
        row.cells[Age].insert(Qt::DisplayRole, ageText(age));
        row.cells[Age].insert(SortRole, age / 1000);
        row.cells[Health].insert(Qt::DisplayRole, healthName(h.health));
        if (h.health != HolderHealth::Alive) {
            const QColor c
                = h.health == HolderHealth::Overdue ? QColor(0xc0, 0x60, 0x00) : QColor(0xb0, 0x20, 0x20);
            row.cells[Health].insert(Qt::ForegroundRole, QBrush(c));
        }
        if (!h.problem.isEmpty())
            row.cells[Health].insert(Qt::ToolTipRole, h.problem);
        row.cells[CommandLine].insert(Qt::DisplayRole, h.commandLine);
        row.cells[CommandLine].insert(Qt::ToolTipRole, h.commandLine);
        rows.append(std::move(row));
    }
    setRows(std::move(rows));
}

} // namespace tollgate::ui
