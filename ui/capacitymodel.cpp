#include "capacitymodel.h"

#include "corebridge.h"
#include "quota/capacity.h"

#include <QLocale>

namespace tollgate::ui {

namespace {

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

// Longer spans, for a plan's 7-day window: "3 d 4 h"; below a day as duration().
QString longDuration(std::int64_t ms)
{
    const std::int64_t s = (std::max<std::int64_t>(ms, 0) + 999) / 1000;
    if (s < 86400)
        return duration(ms);
    return QObject::tr("%1 d %2 h").arg(s / 86400).arg((s % 86400) / 3600);
}

// The plan line of a tile, in `tollgate status`'s PLAN words: each window's share and when it
// resets, then the status when it is not plainly allowed; figures of a window that has reset
// since are said to be old. Empty: the plan states nothing.
QString planText(const ProviderCapacity& c, std::int64_t nowMs)
{
    const PlanUsage& u = c.plan;
    if (u.atMs == 0)
        return {};
    auto window = [&](const QString& name, std::int64_t permille, std::int64_t resetMs) -> QString {
        if (permille < 0 && resetMs == 0)
            return {};
        QString w
            = name + (permille < 0 ? QStringLiteral(" ?") : QStringLiteral(" %1%").arg((permille + 5) / 10));
        if (resetMs > nowMs)
            w += QObject::tr(" (resets in %1)").arg(longDuration(resetMs - nowMs));
        return w;
    };
    QStringList parts;
    for (const QString& w : { window(QObject::tr("5 h"), u.fiveHourPermille, u.fiveHourResetMs),
             window(QObject::tr("7 d"), u.sevenDayPermille, u.sevenDayResetMs) }) {
        if (!w.isEmpty())
            parts.append(w);
    }
    QString line = parts.join(QStringLiteral(", "));
    if (u.status == PlanUsage::Status::Warning)
        line += (line.isEmpty() ? QString() : QStringLiteral("; ")) + QObject::tr("nearly used up");
    else if (u.status == PlanUsage::Status::Rejected)
        line += (line.isEmpty() ? QString() : QStringLiteral("; "))
            + QObject::tr("USED UP: callers held until the reset");
    if (line.isEmpty())
        return {};
    line = QObject::tr("plan: %1").arg(line);
    if (!c.planCurrent)
        line += QObject::tr(" (stated %1 ago, before a reset)")
                    .arg(longDuration(std::max<std::int64_t>(0, nowMs - u.atMs)));
    return line;
}

CapacityModel::PlanLevel planLevelOf(const ProviderCapacity& c)
{
    if (c.plan.atMs == 0)
        return CapacityModel::PlanLevel::None;
    if (!c.planCurrent)
        return CapacityModel::PlanLevel::Old;
    switch (c.plan.status) {
    case PlanUsage::Status::Warning:
        return CapacityModel::PlanLevel::Warning;
    case PlanUsage::Status::Rejected:
        return CapacityModel::PlanLevel::Rejected;
    case PlanUsage::Status::Allowed:
    case PlanUsage::Status::Unknown:
        break;
    }
    return CapacityModel::PlanLevel::Allowed;
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

// "input tokens" for "input_tokens": the metric in words, as `tollgate status` says it.
QString metricWords(const std::string& metric)
{
    if (metric == "input_tokens")
        return QObject::tr("input tokens");
    if (metric == "output_tokens")
        return QObject::tr("output tokens");
    if (metric == "tokens")
        return QObject::tr("tokens");
    return QObject::tr("requests");
}

// ", more in 12 s" when one more unit of a full budget frees only later; "" when it fits now.
QString freeSuffix(std::int64_t freeInMs)
{
    if (freeInMs <= 0)
        return {};
    if (freeInMs == Capacity::NEVER)
        return QObject::tr(", not by waiting");
    return QObject::tr(", more in %1").arg(duration(freeInMs));
}

// The day a per-day budget counts in, in words: "today" (a calendar day) or "in 24 h" (rolling).
QString dayWords(const ProviderLimits* limits)
{
    return limits && !limits->dayReset.rolling() ? QObject::tr("today") : QObject::tr("in 24 h");
}

// The tile's lines of one scope: each budget set, what is left of its limit (headroom applied)
// and when more frees up — requests and tokens per window first (their fields), then input
// and output tokens per window and every per-day budget (WindowCapacity::budgets), in core's
// order. `limits` is the provider's (for the day's kind and when it resets).
QStringList windowLines(
    const WindowCapacity& w, const QString& prefix, const ProviderLimits* limits, std::int64_t nowMs)
{
    QStringList out;
    if (w.requestLimit)
        out.append(prefix
            + QObject::tr("%1 / %2 requests left per %3")
                  .arg(count(*w.requestsLeft), count(*w.requestLimit), duration(w.windowMs)));
    if (w.tokenLimit)
        out.append(prefix + QObject::tr("%1 / %2 tokens left").arg(count(*w.tokensLeft), count(*w.tokenLimit))
            + freeSuffix(w.tokensFreeInMs));
    std::int64_t dayEndsAt = 0;
    for (const BudgetCapacity& b : w.budgets) {
        QString line = prefix
            + QObject::tr("%1 / %2 %3 left").arg(count(b.left), count(b.limit), metricWords(b.metric));
        if (b.perDay)
            line += QLatin1Char(' ') + dayWords(limits);
        line += freeSuffix(b.freeInMs);
        out.append(line);
        if (b.perDay && limits && !limits->dayReset.rolling())
            dayEndsAt = std::max(
                dayEndsAt, b.dayEndsAtMs > 0 ? b.dayEndsAtMs : limits->dayReset.dayOf(nowMs).endMs);
    }
    // A calendar day: when it starts afresh, once, after its budgets (a line of its own keeps
    // the tile narrow enough for three side by side at 1280 px).
    if (dayEndsAt > 0)
        out.append(prefix + QObject::tr("day resets in %1").arg(duration(dayEndsAt - nowMs)));
    return out;
}

// One scope as `tollgate status` words it: used/limit of every budget, per window then per
// day ("3/10 requests, 40/1000 input tokens per 1 min; 7/500 requests per day (resets ...)").
QString usageText(const WindowCapacity& w, const ProviderLimits* limits, std::int64_t nowMs)
{
    QStringList window;
    if (w.requestLimit)
        window.append(QStringLiteral("%1/%2 %3")
                          .arg(count(w.requestsUsed), count(*w.requestLimit), QObject::tr("requests")));
    if (w.tokenLimit)
        window.append(
            QStringLiteral("%1/%2 %3").arg(count(w.tokensUsed), count(*w.tokenLimit), QObject::tr("tokens")));
    QStringList day;
    for (const BudgetCapacity& b : w.budgets)
        (b.perDay ? day : window)
            .append(QStringLiteral("%1/%2 %3").arg(count(b.used), count(b.limit), metricWords(b.metric)));
    QStringList parts;
    if (!window.isEmpty())
        parts.append(QObject::tr("%1 per %2").arg(window.join(QStringLiteral(", ")), duration(w.windowMs)));
    if (!day.isEmpty()) {
        QString d = day.join(QStringLiteral(", "));
        if (limits && !limits->dayReset.rolling())
            d += QObject::tr(" today (resets at %1, in %2)")
                     .arg(qs(limits->dayReset.text()), duration(limits->dayReset.dayOf(nowMs).endMs - nowMs));
        else
            d += QObject::tr(" in the last 24 h");
        parts.append(d);
    }
    return parts.isEmpty() ? QObject::tr("no limit") : parts.join(QStringLiteral("; "));
}

// A class's tightest budget, for its one line in the tile ("opus: 2 / 10 requests left per
// 1 min"); the tooltip has every budget of it.
QString classLine(const WindowCapacity& m, const ProviderLimits* limits, std::int64_t nowMs)
{
    const QStringList lines = windowLines(m, QString(), limits, nowMs);
    if (lines.isEmpty())
        return {};
    // The reset line is not a budget: it is never the tightest.
    int tightest = 0;
    int best = -1;
    int i = 0;
    auto consider = [&](int percent) {
        if (percent > best) {
            best = percent;
            tightest = i;
        }
        ++i;
    };
    if (m.requestLimit)
        consider(m.requestsPercent);
    if (m.tokenLimit)
        consider(m.tokensPercent);
    for (const BudgetCapacity& b : m.budgets)
        consider(b.percent);
    // Every budget of the class is in the tooltip.
    return (m.match.empty() ? QObject::tr("model %1: %2") : QObject::tr("class %1: %2"))
        .arg(qs(m.model), lines.at(tightest));
}

} // namespace

CapacityModel::CapacityModel(QObject* parent)
    : QObject(parent)
{
}

void CapacityModel::setSnapshot(const DashboardSnapshot& snapshot, qint64 nowMs)
{
    m_limits = snapshot.limits;
    m_state = snapshot.hasState ? snapshot.liveState.value_or(snapshot.state) : QuotaState {};
    m_hasState = snapshot.hasState;
    m_limitsCorrupt = snapshot.limitsCorrupt && !snapshot.corruptFile.isEmpty();
    m_corruptFile = snapshot.corruptFile;
    m_corruptReason = snapshot.corruptReason;
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
        if (m_limitsCorrupt) {
            // Without limits core sees no limit; the commands see corrupt ones and refuse.
            r.level = Level::Blocked;
            r.headline = tr("LIMITS CORRUPT");
            r.next = tr("every call refused until the limits are fixed");
            r.details.append(tr("the limits do not parse: %1").arg(m_corruptReason));
            r.tooltip = tr("tollgate commands refuse (exit 3) while %1 does not parse").arg(m_corruptFile);
            rows.append(r);
            continue;
        }
        r.level = levelOf(c.level);
        // The provider's own limits differ from the ones set: not green (core's level stays:
        // the limits set are what the limiter applies; the tile asks the user to look).
        if (r.level == Level::Ok && !c.limitNotices.empty())
            r.level = Level::Near;
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
        const ProviderLimits* limits = m_limits.find(c.provider);
        if (const QStringList w = windowLines(c.window, QString(), limits, m_nowMs); !w.isEmpty())
            r.details.append(w);
        else if (c.hasLimits)
            r.details.append(tr("no request or token limit"));
        if (c.slotLimit)
            r.details.append(tr("%1 / %2 slots free").arg(count(*c.slotsFree), count(*c.slotLimit)));
        for (const WindowCapacity& m : c.models) {
            if (const QString line = classLine(m, limits, m_nowMs); !line.isEmpty())
                r.details.append(line);
        }
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
        r.plan = planText(c, m_nowMs);
        r.planLevel = r.plan.isEmpty() ? PlanLevel::None : planLevelOf(c);
        QStringList tip;
        if (!c.limitNotices.empty())
            tip.append(tr("the provider's figures come from its rate-limit headers, read by tollgate proxy"));
        if (c.learning)
            tip.append(tr("following the provider's limits (the ones you have not set)"));
        if (!c.learned.empty()) {
            QStringList keys;
            for (const std::string& k : c.learned)
                keys.append(qs(k));
            tip.append(tr("from the provider: %1").arg(keys.join(QStringLiteral(", "))));
        }
        // Every budget as `tollgate status` says it (used/limit), the provider's then each class's.
        if (c.hasLimits)
            tip.append(usageText(c.window, limits, m_nowMs));
        for (const WindowCapacity& m : c.models) {
            QStringList patterns;
            for (const std::string& p : m.match)
                patterns.append(qs(p));
            const QString scope = patterns.isEmpty()
                ? tr("model %1").arg(qs(m.model))
                : tr("class %1 (%2)").arg(qs(m.model), patterns.join(QStringLiteral(", ")));
            tip.append(tr("%1: %2").arg(scope, usageText(m, limits, m_nowMs)));
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
