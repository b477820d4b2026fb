#pragma once

// HoldersModel: who holds something right now — the providers' parallel slots and the lock
// files in the watched lock directories — with pid, caller or tag, age and whether the holder
// is alive, dead (its slot or lock only waits to be reclaimed), stale or overdue.
//
// Scale: a snapshot whose holdersRevision is the one shown changes nothing; one that names
// the revision shown as its holdersBase rebuilds only the rows it lists; otherwise rows
// are built only for holders that are new or differ, and vanished keys are removed. The age
// is not stored: it is computed when a view asks (so only for the rows it paints), and a
// tick announces it with liveColumnChanged(Age) (a view repaints the cells in view); the
// age column sorts by the constant -sinceMs, so no proxy ever needs to re-sort for time.

#include "dashboardsnapshot.h"
#include "keyedtablemodel.h"

namespace tollgate::ui {

class HoldersModel final : public KeyedTableModel
{
    Q_OBJECT
public:
    enum Column { Kind, Where, Pid, Who, Age, Health, CommandLine, ColumnCount };

    static constexpr int SinceRole = Qt::UserRole + 20; // Age column: sinceMs

    explicit HoldersModel(QObject* parent = nullptr);

    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

    void setSnapshot(const DashboardSnapshot& snapshot);
    // False (nothing changed) unless the patch is based on the revision shown.
    bool applyPatch(const HoldersPatch& patch);
    [[nodiscard]] const QList<HolderInfo>& holders() const { return m_holders; }
    [[nodiscard]] quint64 revision() const { return m_revision; }
    void tick(qint64 nowMs);

    [[nodiscard]] const HolderInfo* holder(const QString& key) const;
    [[nodiscard]] int deadCount() const;

    [[nodiscard]] static QString healthName(HolderHealth health);
    [[nodiscard]] static QString ageText(qint64 ms);

    // Test hooks: age texts computed, rows built, and holders diffed, since construction.
    [[nodiscard]] quint64 ageTextsComputed() const { return m_ageTexts; }
    [[nodiscard]] quint64 rowsBuilt() const { return m_rowsBuilt; }
    [[nodiscard]] quint64 holdersCompared() const { return m_holdersCompared; }

private:
    [[nodiscard]] Row buildRow(const HolderInfo& h);
    void announceAges();

    QList<HolderInfo> m_holders;
    QHash<QString, int> m_index; // key -> index in m_holders
    quint64 m_revision = 0;
    qint64 m_nowMs = 0;
    mutable quint64 m_ageTexts = 0;
    quint64 m_rowsBuilt = 0;
    quint64 m_holdersCompared = 0;
};

} // namespace tollgate::ui
