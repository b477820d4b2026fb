#include "capacitymodel.h"

#include "quota/capacity.h"

#include <QLocale>

namespace tollgate::ui {

namespace {

QString qs(const std::string& s)
{
    return QString::fromStdString(s);
}

// Whole seconds, rounded up: "next free in 1 s" must not be said 0.4 s early as "0 s".
QString duration(std::int64_t ms)
{
    const std::int64_t s = (std::max<std::int64_t>(ms, 0) + 999) / 1000;
    if (s < 60)
        return QObject::tr("%1 s").arg(s);
    if (s < 3600)
        return s % 60 == 0 ? QObject::tr("%1 min").arg(s / 60)
                           : QObject::tr("%1 min %2 s").arg(s / 60).arg(s % 60);
    return QObject::tr("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60);
}

QString count(std::int64_t n)
{
    return QLocale().toString(static_cast<qlonglong>(n));
}

CapacityModel::Level levelOf(CapacityLevel l)
{
    switch (l) {
    case CapacityLevel::Ok:
        return CapacityModel::Level::Ok;
    case CapacityLevel::Near:
        return CapacityModel::Level::Near;
    case CapacityLevel::Blocked:
        break;
    }
    return CapacityModel::Level::Blocked;
}

QString headlineOf(const ProviderCapacity& c)
{
    if (c.level == CapacityLevel::Blocked) {
        switch (c.blockedBy) {
        case WaitReason::Paused:
            return QObject::tr("PAUSED");
        case WaitReason::Backoff:
            return c.backoffRemainingMs > 0 ? QObject::tr("BACKING OFF") : QObject::tr("PACING");
        case WaitReason::Queue:
            return QObject::tr("QUEUED");
        case WaitReason::Window:
            return QObject::tr("0 left");
        case WaitReason::Tokens:
            return QObject::tr("NO TOKENS");
        case WaitReason::Slots:
            return QObject::tr("NO SLOT");
        case WaitReason::None:
            break;
        }
        return QObject::tr("BLOCKED");
    }
    if (c.window.requestsLeft)
        return QObject::tr("%1 left").arg(count(*c.window.requestsLeft));
    if (c.slotsFree)
        return QObject::tr("%1 slots free").arg(count(*c.slotsFree));
    return QObject::tr("no limit");
}

QStringList windowLines(const WindowCapacity& w, const QString& prefix)
{
    QStringList out;
    if (w.requestLimit)
        out.append(prefix
            + QObject::tr("%1 / %2 requests left per %3")
                  .arg(count(*w.requestsLeft), count(*w.requestLimit), duration(w.windowMs)));
    if (w.tokenLimit)
        out.append(
            prefix + QObject::tr("%1 / %2 tokens left").arg(count(*w.tokensLeft), count(*w.tokenLimit)));
    return out;
}

} // namespace

CapacityModel::CapacityModel(QObject* parent)
    : QObject(parent)
{
}

void CapacityModel::setSnapshot(const DashboardSnapshot& snapshot, qint64 nowMs)
{
    m_limits = snapshot.limits;
    m_state = snapshot.hasState ? snapshot.state : QuotaState {};
    m_hasState = snapshot.hasState;
    m_nowMs = nowMs;
    rebuild();
}

void CapacityModel::tick(qint64 nowMs)
{
    m_nowMs = nowMs;
    rebuild();
}

const CapacityModel::Row* CapacityModel::row(const QString& provider) const
{
    for (const Row& r : m_rows) {
        if (r.provider == provider)
            return &r;
    }
    return nullptr;
}

void CapacityModel::rebuild()
{
    // No ProcessProbe: this runs on the GUI thread, where pids are not probed.
    const std::vector<ProviderCapacity> all
        = Capacity::compute(m_hasState ? &m_state : nullptr, m_limits, m_nowMs);
    QVector<Row> rows;
    rows.reserve(static_cast<int>(all.size()));
    for (const ProviderCapacity& c : all) {
        Row r;
        r.provider = qs(c.provider);
        r.level = levelOf(c.level);
        r.headline = headlineOf(c);
        if (c.level == CapacityLevel::Blocked) {
            if (c.nextCallInMs != Capacity::NEVER && c.nextCallInMs > 0)
                r.next = tr("next free in %1").arg(duration(c.nextCallInMs));
            else if (c.blockedBy == WaitReason::Paused)
                r.next = tr("until resumed");
            else if (c.blockedBy == WaitReason::Slots)
                r.next = tr("when a slot is released");
            else if (c.blockedBy == WaitReason::Queue)
                r.next = c.waiting == 1
                    ? tr("1 caller waiting first")
                    : tr("%1 callers waiting first").arg(count(static_cast<std::int64_t>(c.waiting)));
        } else {
            r.next = tr("next call: now");
        }
        if (const QStringList w = windowLines(c.window, QString()); !w.isEmpty())
            r.details.append(w);
        else if (c.hasLimits)
            r.details.append(tr("no request or token limit"));
        if (c.slotLimit)
            r.details.append(tr("%1 / %2 slots free").arg(count(*c.slotsFree), count(*c.slotLimit)));
        if (c.backoffRemainingMs > 0)
            r.details.append(
                tr("backoff %1 left (%2 × 429)").arg(duration(c.backoffRemainingMs)).arg(c.consecutive429));
        else if (c.paceRemainingMs > 0)
            r.details.append(tr("pacing after a backoff, %1 left").arg(duration(c.paceRemainingMs)));
        if (c.paused) {
            const QString reason = c.pauseReason.empty() ? tr("no reason given") : qs(c.pauseReason);
            r.details.append(
                c.pausedAll ? tr("paused (everything): %1").arg(reason) : tr("paused: %1").arg(reason));
        }
        if (c.waiting > 0 && c.blockedBy != WaitReason::Queue)
            r.details.append(c.waiting == 1
                    ? tr("1 caller waiting")
                    : tr("%1 callers waiting").arg(count(static_cast<std::int64_t>(c.waiting))));
        // Where the provider's own headers disagree with the limits set: the user fixes one.
        for (const std::string& notice : c.limitNotices)
            r.details.append(tr("⚠ %1").arg(qs(notice)));
        QStringList tip;
        if (!c.limitNotices.empty())
            tip.append(tr("the provider's figures come from its rate-limit headers, read by tollgate proxy"));
        for (const WindowCapacity& m : c.models) {
            tip.append(windowLines(m, tr("model %1: ").arg(qs(m.model))));
        }
        if (c.headroomPercent != 100)
            tip.append(tr("limits with %1% headroom applied").arg(c.headroomPercent));
        r.tooltip = tip.join(QLatin1Char('\n'));
        rows.append(r);
    }
    if (rows == m_rows)
        return;
    m_rows = rows;
    Q_EMIT changed();
}

} // namespace tollgate::ui
