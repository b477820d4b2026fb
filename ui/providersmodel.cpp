#include "providersmodel.h"

#include "corebridge.h"
#include "learnedlimits.h"
#include "quota/capacity.h"
#include "quota/quotapolicy.h"
#include "system/hostidentity.h"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <cmath>

namespace tollgate::ui {

namespace {

KeyedTableModel::Cell limitCell(const std::optional<std::int64_t>& given, const ProviderLimits& l,
    const QString& unit, const char* learnKey = nullptr)
{
    if (!given) {
        auto c = KeyedTableModel::textCell(QStringLiteral("—"), -1);
        c.insert(Qt::EditRole, QString());
        c.insert(Qt::ToolTipRole, QObject::tr("No %1 limit. Edit to set one.").arg(unit));
        return c;
    }
    auto c = KeyedTableModel::textCell(QString::number(*given), static_cast<qlonglong>(*given));
    c.insert(Qt::EditRole, QString::number(*given));
    QStringList tip;
    // A learned limit in italics, as in the limits tab (which also says so in the cell).
    if (learnKey && LearnedLimits::isLearned(l.learned, learnKey)) {
        QFont italic;
        italic.setItalic(true);
        c.insert(Qt::FontRole, italic);
        tip.append(
            QObject::tr("From the provider (learned from its answers' headers); edit it to make it yours."));
    }
    if (l.headroomPercent != 100) {
        tip.append(QObject::tr("%1 %2 after %3% headroom")
                       .arg(l.effective(*given))
                       .arg(unit)
                       .arg(l.headroomPercent));
    }
    if (!tip.isEmpty())
        c.insert(Qt::ToolTipRole, tip.join(QLatin1Char('\n')));
    return c;
}

KeyedTableModel::Cell usageCell(
    std::int64_t used, const std::optional<std::int64_t>& limit, const ProviderLimits* l)
{
    if (!limit || !l)
        return KeyedTableModel::textCell(QString::number(used), static_cast<qlonglong>(used));
    const std::int64_t effective = l->effective(*limit);
    const double share = effective > 0 ? static_cast<double>(used) / static_cast<double>(effective) : 0.0;
    auto c = KeyedTableModel::textCell(
        QStringLiteral("%1 / %2 (%3%)").arg(used).arg(effective).arg(std::lround(share * 100.0)), share);
    c.insert(KeyedTableModel::FractionRole, share);
    if (share >= 0.9)
        c.insert(Qt::ForegroundRole, QBrush(QColor(0xb0, 0x30, 0x20)));
    return c;
}

// A count cell: empty (or "none") for no limit, else checked by the core's one range check,
// so the dashboard refuses exactly what the CLI and limits.json refuse, with the same words.
std::optional<std::int64_t> parseCount(
    const QString& raw, LimitField field, const char* name, bool& ok, QString& refusal)
{
    const QString t = raw.trimmed();
    ok = true;
    if (t.isEmpty() || t == QLatin1String("-") || t == QStringLiteral("—")
        || t.compare(QLatin1String("none"), Qt::CaseInsensitive) == 0)
        return std::nullopt;
    const double n = t.toDouble(&ok);
    if (!ok)
        return std::nullopt;
    auto checked = QuotaLimits::check(field, n, name);
    if (!checked) {
        refusal = QString::fromStdString(checked.error().message);
        return std::nullopt;
    }
    return *checked;
}

} // namespace

ProvidersModel::ProvidersModel(QObject* parent)
    : KeyedTableModel(
        { tr("Provider"), tr("Requests limit"), tr("Tokens limit"), tr("Window"), tr("Parallel"),
            tr("Requests in window"), tr("Tokens in window"), tr("Slots in use"), tr("Backoff"),
            tr("429s in a row"), tr("Waiting"), tr("Paused"), tr("Provider reports") },
        parent)
{
}

void ProvidersModel::setSnapshot(const DashboardSnapshot& snapshot)
{
    m_limits = snapshot.limits;
    m_state = snapshot.state;
    m_liveState = snapshot.liveState.value_or(snapshot.state);
    m_nowMs = snapshot.nowMs;
    rebuild();
}

void ProvidersModel::tick(qint64 nowMs)
{
    m_nowMs = nowMs;
    rebuild();
}

QStringList ProvidersModel::providerNames() const
{
    QStringList out;
    for (int i = 0; i < rowCount(); ++i)
        out.append(keyAt(i));
    return out;
}

std::optional<ProviderLimits> ProvidersModel::limitsOf(const QString& provider) const
{
    if (const ProviderLimits* l = m_limits.find(provider.toStdString()))
        return *l;
    return std::nullopt;
}

bool ProvidersModel::isPaused(const QString& provider) const
{
    const ProviderState* p = m_state.provider(provider.toStdString());
    return m_state.pausedAll || (p && p->paused);
}

bool ProvidersModel::inBackoff(const QString& provider) const
{
    const ProviderState* p = m_state.provider(provider.toStdString());
    return p && p->backoffUntilMs > m_nowMs;
}

void ProvidersModel::rebuild()
{
    QStringList names;
    for (const auto& [name, l] : m_limits.providers())
        names.append(qs(name));
    for (const ProviderState& p : m_state.providers) {
        if (!names.contains(qs(p.name)))
            names.append(qs(p.name));
    }

    QVector<Row> rows;
    for (const QString& name : names) {
        const std::string key = name.toStdString();
        const ProviderLimits* l = m_limits.find(key);
        const ProviderState* p = m_state.provider(key);
        Row row;
        row.key = name;
        row.cells.resize(ColumnCount);
        auto nameCell = KeyedTableModel::textCell(name);
        if (!l)
            nameCell.insert(Qt::ToolTipRole, tr("No limits are set for %1 (removed?)").arg(name));
        row.cells[Provider] = nameCell;
        if (l) {
            row.cells[RequestLimit] = limitCell(l->requests, *l, tr("requests"), "requests");
            row.cells[TokenLimit] = limitCell(l->tokens, *l, tr("tokens"), "tokens");
            auto w = KeyedTableModel::textCell(
                KeyedTableModel::secondsText(l->windowMs), static_cast<qlonglong>(l->windowMs));
            w.insert(Qt::EditRole, QString::number(static_cast<double>(l->windowMs) / 1000.0));
            row.cells[Window] = w;
            row.cells[Parallel] = limitCell(l->parallel, *l, tr("parallel"));
        } else {
            row.cells[RequestLimit] = KeyedTableModel::textCell(tr("(no limits)"));
        }
        // The figures are core's summary (Capacity), the same status and status --watch show.
        const ProviderCapacity c = Capacity::forProvider(m_liveState, key, l, m_nowMs);
        row.cells[RequestsUsed] = usageCell(c.window.requestsUsed, l ? l->requests : std::nullopt, l);
        row.cells[TokensUsed] = usageCell(c.window.tokensUsed, l ? l->tokens : std::nullopt, l);
        const qlonglong slots = static_cast<qlonglong>(c.slotsInUse);
        if (l && l->parallel) {
            auto c = KeyedTableModel::textCell(QStringLiteral("%1 / %2").arg(slots).arg(*l->parallel), slots);
            c.insert(FractionRole, static_cast<double>(slots) / static_cast<double>(*l->parallel));
            row.cells[Slots] = c;
        } else {
            row.cells[Slots] = KeyedTableModel::textCell(QString::number(slots), slots);
        }
        // Bounded as the core judges it: a forged far-future backoff shows at most 24 h + 5 s.
        const qint64 backoff = c.backoffRemainingMs;
        if (backoff > 0) {
            // Whole seconds, rounded up, so the countdown reaches 0 when the backoff ends.
            auto c = KeyedTableModel::textCell(tr("%1 s").arg((backoff + 999) / 1000), backoff);
            c.insert(Qt::ForegroundRole, QBrush(QColor(0xc0, 0x60, 0x00)));
            row.cells[Backoff] = c;
        } else {
            row.cells[Backoff] = KeyedTableModel::textCell(QString(), 0);
        }
        const int consecutive = c.consecutive429;
        row.cells[Consecutive429]
            = KeyedTableModel::textCell(consecutive ? QString::number(consecutive) : QString(), consecutive);
        const qlonglong waiting = static_cast<qlonglong>(c.waiting);
        auto wc = KeyedTableModel::textCell(waiting ? QString::number(waiting) : QString(), waiting);
        if (p && !p->queue.empty()) {
            QStringList who;
            for (const Waiter& w : p->queue) {
                // A waiter of another host (a Redis home) is named with its host, as status does;
                // the codec gives the waiters of this host our pid namespace, others none.
                const QString pid = w.host.empty() || w.pidNs != 0
                    ? QString::number(w.pid)
                    : QStringLiteral("%1 @ %2").arg(w.pid).arg(qs(HostIdentity::shortName(w.host)));
                who.append(
                    tr("%1 (pid %2): %3").arg(qs(w.caller), pid, QLatin1String(waitReasonName(w.reason))));
            }
            wc.insert(Qt::ToolTipRole, who.join(QLatin1Char('\n')));
        }
        row.cells[Waiting] = wc;
        QString paused;
        if (c.paused) {
            const QString why = qs(c.pauseReason);
            if (c.pausedAll)
                paused = why.isEmpty() ? tr("all paused") : tr("all paused: %1").arg(why);
            else
                paused = why.isEmpty() ? tr("paused") : tr("paused: %1").arg(why);
        }
        auto pc = KeyedTableModel::textCell(paused);
        if (!paused.isEmpty())
            pc.insert(Qt::ForegroundRole, QBrush(QColor(0x20, 0x50, 0xb0)));
        row.cells[Paused] = pc;
        // What the provider's headers say, per minute (issue 28: a limit that differs from the
        // provider's stayed green with no column for it); amber where it differs, each
        // difference in the tooltip (the proxy reads them; Use the provider's limits adopts them).
        QStringList reports;
        if (c.reportedAtMs != 0) {
            if (c.reportedRequests >= 0)
                reports.append(tr("%1 req/min").arg(c.reportedRequests));
            if (c.reportedTokens >= 0)
                reports.append(tr("%1 tok/min").arg(c.reportedTokens));
            if (c.reportedInputTokens >= 0)
                reports.append(tr("%1 in/min").arg(c.reportedInputTokens));
            if (c.reportedOutputTokens >= 0)
                reports.append(tr("%1 out/min").arg(c.reportedOutputTokens));
        }
        auto rc = KeyedTableModel::textCell(reports.join(QStringLiteral(", ")));
        if (!c.limitNotices.empty()) {
            QStringList notices;
            for (const std::string& n : c.limitNotices)
                notices.append(qs(n));
            rc.insert(Qt::ForegroundRole, QBrush(QColor(0xb0, 0x60, 0x00)));
            rc.insert(Qt::ToolTipRole, notices.join(QLatin1Char('\n')));
        }
        row.cells[ProviderReports] = rc;
        rows.append(std::move(row));
    }
    setRows(std::move(rows));
}

Qt::ItemFlags ProvidersModel::flags(const QModelIndex& index) const
{
    if (!isCell(index))
        return Qt::NoItemFlags;
    Qt::ItemFlags f = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
    const bool limitColumn = index.column() == RequestLimit || index.column() == TokenLimit
        || index.column() == Window || index.column() == Parallel;
    if (limitColumn && m_limits.find(keyAt(index.row()).toStdString()))
        f |= Qt::ItemIsEditable;
    return f;
}

bool ProvidersModel::setData(const QModelIndex& index, const QVariant& value, int role)
{
    if (role != Qt::EditRole || !isCell(index))
        return false;
    const QString provider = keyAt(index.row());
    const ProviderLimits* current = m_limits.find(provider.toStdString());
    if (!current)
        return false;
    ProviderLimits edited = *current;
    const QString raw = value.toString();
    bool ok = true;
    QString refusal; // the core's words for a value out of range
    switch (index.column()) {
    // A limit the user sets or clears is theirs from now on (LearnedLimits; the CLI's rule).
    case RequestLimit:
        edited.requests = parseCount(raw, LimitField::Requests, "requests", ok, refusal);
        LearnedLimits::unmark(edited.learned, "requests");
        break;
    case TokenLimit:
        edited.tokens = parseCount(raw, LimitField::Tokens, "tokens", ok, refusal);
        LearnedLimits::unmark(edited.learned, "tokens");
        break;
    case Parallel:
        edited.parallel = parseCount(raw, LimitField::Parallel, "parallel", ok, refusal);
        break;
    case Window: {
        const double s = raw.trimmed().toDouble(&ok);
        if (!ok) {
            Q_EMIT editRefused(
                provider, tr("The window of %1 must be a number of seconds, not \"%2\".").arg(provider, raw));
            return false;
        }
        auto ms = QuotaLimits::check(LimitField::WindowSeconds, s, "window");
        if (!ms) {
            refusal = QString::fromStdString(ms.error().message);
            break;
        }
        edited.windowMs = *ms;
        break;
    }
    default:
        return false;
    }
    if (!refusal.isEmpty()) {
        Q_EMIT editRefused(provider, tr("%1: %2").arg(provider, refusal));
        return false;
    }
    if (!ok) {
        Q_EMIT editRefused(provider,
            tr("%1 for %2 must be a whole number, or empty for no limit (got \"%3\").")
                .arg(headerData(index.column(), Qt::Horizontal).toString(), provider, raw));
        return false;
    }
    if (auto valid = QuotaLimits::validate(provider.toStdString(), edited); !valid) {
        Q_EMIT editRefused(provider, QString::fromStdString(valid.error().message));
        return false;
    }
    if (edited == *current)
        return true;
    Q_EMIT limitsEditRequested(provider, edited);
    return true;
}

} // namespace tollgate::ui
