#pragma once

// EventsModel: the history as a log, newest last. It only ever appends what the incremental
// history reader delivered (beginInsertRows) and drops the oldest rows past MAX_ROWS
// (beginRemoveRows), so a busy history never makes the view reset or re-read.
// Rows carry a key (KeyedTableModel::KeyRole) like the keyed tables.

#include "history/historyevent.h"

#include <QAbstractTableModel>
#include <deque>
#include <vector>

namespace tollgate::ui {

class EventsModel final : public QAbstractTableModel
{
    Q_OBJECT
public:
    static constexpr int MAX_ROWS = 5000;
    static constexpr int TypeRole = Qt::UserRole + 10;
    enum Column { Time, Type, Provider, Caller, Pid, Details, ColumnCount };

    explicit EventsModel(QObject* parent = nullptr);

    void append(const std::vector<HistoryEvent>& events);
    void clear();

    [[nodiscard]] int rowCount(const QModelIndex& parent = {}) const override;
    [[nodiscard]] int columnCount(const QModelIndex& parent = {}) const override;
    [[nodiscard]] QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    [[nodiscard]] QVariant headerData(
        int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    [[nodiscard]] static QString details(const HistoryEvent& e);

private:
    [[nodiscard]] bool isCell(const QModelIndex& index) const;

    std::deque<HistoryEvent> m_events;
    // Every event ever appended gets the next serial; a row's key (KeyRole) is its serial, so
    // a view keeps its selection on the same event when old rows are dropped.
    quint64 m_firstSerial = 0;
};

} // namespace tollgate::ui
