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
    const bool timeMoved = snapshot.nowMs != m_nowMs;
    m_nowMs = snapshot.nowMs;
    if (snapshot.holdersRevision != 0 && snapshot.holdersRevision == m_revision) {
        if (timeMoved)
            announceAges();
        return;
    }
    if (snapshot.holdersBase != 0 && snapshot.holdersBase == m_revision
        && snapshot.holders.size() == m_holders.size()) {
        QVector<Row> upserts;
        bool same = true;
        for (const int i : snapshot.holdersChanged) {
            same
                = same && i >= 0 && i < m_holders.size() && snapshot.holders.at(i).key == m_holders.at(i).key;
            if (!same)
                break;
            upserts.append(buildRow(snapshot.holders.at(i)));
        }
        if (same) {
            m_revision = snapshot.holdersRevision;
            m_holders = snapshot.holders;
            applyChanges({}, std::move(upserts));
            if (timeMoved)
                announceAges();
            return;
        }
    }
    m_revision = snapshot.holdersRevision;
    QHash<QString, int> index;
    index.reserve(snapshot.holders.size());
    QVector<Row> upserts;
    for (int i = 0; i < snapshot.holders.size(); ++i) {
        const HolderInfo& h = snapshot.holders.at(i);
        index.insert(h.key, i);
        const int before = m_index.value(h.key, -1);
        ++m_holdersCompared;
        if (before < 0 || !(m_holders.at(before) == h))
            upserts.append(buildRow(h));
    }
    QSet<QString> removed;
    for (auto it = m_index.constBegin(); it != m_index.constEnd(); ++it) {
        if (!index.contains(it.key()))
            removed.insert(it.key());
    }
    m_holders = snapshot.holders;
    m_index = std::move(index);
    applyChanges(removed, std::move(upserts));
    if (timeMoved)
        announceAges();
}

bool HoldersModel::applyPatch(const HoldersPatch& patch)
{
    if (patch.base == 0 || patch.base != m_revision || patch.changed.size() != patch.rows.size())
        return false;
    for (int i = 0; i < patch.changed.size(); ++i) {
        const int at = patch.changed.at(i);
        if (at < 0 || at >= m_holders.size() || m_holders.at(at).key != patch.rows.at(i).key)
            return false;
    }
    QVector<Row> upserts;
    for (int i = 0; i < patch.changed.size(); ++i) {
        m_holders[patch.changed.at(i)] = patch.rows.at(i);
        upserts.append(buildRow(patch.rows.at(i)));
    }
    m_revision = patch.revision;
    applyChanges({}, std::move(upserts));
    return true;
}

void HoldersModel::tick(qint64 nowMs)
{
    if (nowMs == m_nowMs)
        return;
    m_nowMs = nowMs;
    announceAges();
}

void HoldersModel::announceAges()
{
    if (rowCount() > 0)
        Q_EMIT liveColumnChanged(Age);
}

QVariant HoldersModel::data(const QModelIndex& index, int role) const
{
    if (role == Qt::DisplayRole && index.column() == Age && isCell(index)) {
        ++m_ageTexts;
        return ageText(m_nowMs - KeyedTableModel::data(index, SinceRole).toLongLong());
    }
    return KeyedTableModel::data(index, role);
}

const HolderInfo* HoldersModel::holder(const QString& key) const
{
    const int i = m_index.value(key, -1);
    return i < 0 ? nullptr : &m_holders.at(i);
}

int HoldersModel::deadCount() const
{
    int n = 0;
    for (const HolderInfo& h : m_holders)
        n += h.health == HolderHealth::Dead || h.health == HolderHealth::Stale;
    return n;
}

KeyedTableModel::Row HoldersModel::buildRow(const HolderInfo& h)
{
    ++m_rowsBuilt;
    Row row;
    row.key = h.key;
    row.cells.resize(ColumnCount);
    const bool slot = h.kind == HolderKind::Slot;
    row.cells[Kind].insert(Qt::DisplayRole, slot ? tr("slot") : tr("lock file"));
    row.cells[Where].insert(Qt::DisplayRole, slot ? h.provider : QFileInfo(h.path).fileName());
    row.cells[Where].insert(Qt::ToolTipRole, slot ? tr("%1, fence %2").arg(h.provider).arg(h.fence) : h.path);
    // A pid of another host means something only there: shown with the host it belongs to.
    row.cells[Pid].insert(Qt::DisplayRole,
        !h.pid                 ? QString()
            : h.host.isEmpty() ? QString::number(h.pid)
                               : QStringLiteral("%1 @ %2").arg(h.pid).arg(h.host));
    row.cells[Pid].insert(SortRole, h.pid);
    QString who = h.who;
    if (!h.model.isEmpty())
        who += QStringLiteral(" (%1)").arg(h.model);
    row.cells[Who].insert(Qt::DisplayRole, who);
    // The age is computed from this when asked (data()); sorting by -since is sorting by age
    // at any clock, so a tick never moves a row.
    row.cells[Age].insert(SinceRole, h.sinceMs);
    row.cells[Age].insert(SortRole, -h.sinceMs);
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
    return row;
}

} // namespace tollgate::ui
