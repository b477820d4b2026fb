#include "eventsmodel.h"

#include "keyedtablemodel.h"

#include <QBrush>
#include <QColor>
#include <QDateTime>

namespace tollgate::ui {

namespace {

QString qs(std::string_view s)
{
    return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

} // namespace

EventsModel::EventsModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void EventsModel::append(const std::vector<HistoryEvent>& events)
{
    if (events.empty())
        return;
    // Only the newest MAX_ROWS of this batch can survive; skip the rest before inserting.
    const std::size_t skip = events.size() > MAX_ROWS ? events.size() - MAX_ROWS : 0;
    const int adding = static_cast<int>(events.size() - skip);
    const int overflow = static_cast<int>(m_events.size()) + adding - MAX_ROWS;
    if (overflow > 0) {
        beginRemoveRows({}, 0, overflow - 1);
        m_events.erase(m_events.begin(), m_events.begin() + overflow);
        m_firstSerial += static_cast<quint64>(overflow);
        endRemoveRows();
    }
    const int at = static_cast<int>(m_events.size());
    beginInsertRows({}, at, at + adding - 1);
    m_events.insert(m_events.end(), events.begin() + static_cast<std::ptrdiff_t>(skip), events.end());
    endInsertRows();
}

void EventsModel::clear()
{
    if (m_events.empty())
        return;
    beginRemoveRows({}, 0, static_cast<int>(m_events.size()) - 1);
    m_firstSerial += m_events.size();
    m_events.clear();
    endRemoveRows();
}

int EventsModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_events.size());
}

int EventsModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

bool EventsModel::isCell(const QModelIndex& index) const
{
    return index.isValid() && index.model() == this && !index.parent().isValid()
        && static_cast<std::size_t>(index.row()) < m_events.size() && index.column() < ColumnCount;
}

QString EventsModel::details(const HistoryEvent& e)
{
    QStringList parts;
    if (!e.model.empty())
        parts.append(tr("model %1").arg(qs(e.model)));
    if (e.tokens)
        parts.append(tr("%1 tokens").arg(e.tokens));
    if (e.waitedMs)
        parts.append(tr("waited %1 ms").arg(e.waitedMs));
    if (e.fence)
        parts.append(tr("fence %1").arg(e.fence));
    if (e.retryAfterMs)
        parts.append(tr("Retry-After %1 s").arg(static_cast<double>(e.retryAfterMs) / 1000.0));
    if (e.backoffMs)
        parts.append(tr("backoff %1 s").arg(static_cast<double>(e.backoffMs) / 1000.0, 0, 'f', 1));
    if (!e.reason.empty())
        parts.append(qs(e.reason));
    return parts.join(QStringLiteral(", "));
}

QVariant EventsModel::data(const QModelIndex& index, int role) const
{
    if (!isCell(index))
        return {};
    const HistoryEvent& e = m_events[static_cast<std::size_t>(index.row())];
    if (role == TypeRole)
        return qs(e.typeName());
    if (role == KeyedTableModel::KeyRole)
        return QString::number(m_firstSerial + static_cast<quint64>(index.row()));
    if (role == Qt::ForegroundRole && index.column() == Type) {
        if (e.type == EventType::RateLimited)
            return QBrush(QColor(0xb0, 0x20, 0x20));
        if (e.type == EventType::Pause || e.type == EventType::Resume || e.type == EventType::Limits
            || e.type == EventType::LockRelease || e.type == EventType::LockClean)
            return QBrush(QColor(0x20, 0x50, 0xb0));
        return {};
    }
    if (role != Qt::DisplayRole && role != Qt::ToolTipRole)
        return {};
    switch (index.column()) {
    case Time:
        return QDateTime::fromMSecsSinceEpoch(e.timeMs).toString(QStringLiteral("yyyy-MM-dd HH:mm:ss.zzz"));
    case Type:
        return qs(e.typeName());
    case Provider:
        if ((e.type == EventType::LockRelease || e.type == EventType::LockClean))
            return QString(); // lock files belong to no provider
        return e.provider.empty() ? tr("(all)") : qs(e.provider);
    case Caller:
        return qs(e.caller);
    case Pid:
        return e.pid ? QVariant(static_cast<qlonglong>(e.pid)) : QVariant(QString());
    case Details:
        return details(e);
    default:
        return {};
    }
}

QVariant EventsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case Time:
        return tr("Time");
    case Type:
        return tr("Event");
    case Provider:
        return tr("Provider");
    case Caller:
        return tr("Caller");
    case Pid:
        return tr("PID");
    case Details:
        return tr("Details");
    default:
        return {};
    }
}

} // namespace tollgate::ui
