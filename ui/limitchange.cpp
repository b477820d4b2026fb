#include "limitchange.h"

#include "learnedlimits.h"

#include <QObject>
#include <algorithm>

namespace tollgate::ui {

namespace {

struct Field
{
    QString name;
    std::optional<std::int64_t> before;
    std::optional<std::int64_t> after;
    bool seconds = false; // a duration in ms, shown in seconds
};

// The counts and durations both a provider and a class have, in `prefix` terms.
template <class Limits> void budgetFields(QVector<Field>& out, const QString& prefix, const Limits& b, const Limits& a)
{
    out.append({ prefix + QObject::tr("requests per window"), b.requests, a.requests });
    out.append({ prefix + QObject::tr("tokens per window"), b.tokens, a.tokens });
    out.append({ prefix + QObject::tr("input tokens per window"), b.inputTokens, a.inputTokens });
    out.append({ prefix + QObject::tr("output tokens per window"), b.outputTokens, a.outputTokens });
    out.append({ prefix + QObject::tr("window"), b.windowMs, a.windowMs, true });
    out.append({ prefix + QObject::tr("requests per day"), b.perDay.requests, a.perDay.requests });
    out.append({ prefix + QObject::tr("tokens per day"), b.perDay.tokens, a.perDay.tokens });
    out.append({ prefix + QObject::tr("input tokens per day"), b.perDay.inputTokens, a.perDay.inputTokens });
    out.append({ prefix + QObject::tr("output tokens per day"), b.perDay.outputTokens, a.perDay.outputTokens });
}

// Every number a change can touch: the provider's, then each class present before and after.
// A class added or removed is a TextChange (below), not a field.
QVector<Field> fieldsOf(const LimitChange& c)
{
    QVector<Field> out;
    budgetFields(out, QString(), c.before, c.after);
    out.append({ QObject::tr("parallel"), c.before.parallel, c.after.parallel });
    out.append({ QObject::tr("headroom %"), c.before.headroomPercent, c.after.headroomPercent });
    out.append({ QObject::tr("backoff base"), c.before.backoffBaseMs, c.after.backoffBaseMs, true });
    out.append({ QObject::tr("backoff cap"), c.before.backoffCapMs, c.after.backoffCapMs, true });
    out.append({ QObject::tr("max hold"), c.before.maxHoldMs, c.after.maxHoldMs, true });
    for (const auto& [name, b] : c.before.models) {
        auto it = c.after.models.find(name);
        if (it != c.after.models.end())
            budgetFields(out, QObject::tr("class %1 ").arg(QString::fromStdString(name)), b, it->second);
    }
    return out;
}

struct TextChange
{
    QString text; // "day resets rolling → 00:00@America/Los_Angeles"
    bool drastic = false; // a class removed: its limits go with it
};

QString patternsText(const std::vector<std::string>& match)
{
    QStringList p;
    for (const auto& m : match)
        p.append(QString::fromStdString(m));
    return p.isEmpty() ? QObject::tr("its own name") : p.join(QStringLiteral(", "));
}

// Learned marks that went while the value stayed: the user took the provider's figure as theirs.
template <class Limits>
void markChanges(QVector<TextChange>& out, const QString& prefix, const Limits& b, const Limits& a)
{
    for (const std::string& key : b.learned) {
        if (std::find(a.learned.begin(), a.learned.end(), key) != a.learned.end())
            continue;
        const auto before = b.perWindow();
        const auto after = a.perWindow();
        const bool same = (key == "requests" && before.requests == after.requests)
            || (key == "tokens" && before.tokens == after.tokens)
            || (key == "input_tokens" && before.inputTokens == after.inputTokens)
            || (key == "output_tokens" && before.outputTokens == after.outputTokens);
        if (same)
            out.append({ prefix + QObject::tr("%1 kept as yours").arg(LearnedLimits::metricWords(key)) });
    }
}

QVector<TextChange> textChangesOf(const LimitChange& c)
{
    QVector<TextChange> out;
    if (c.before.learn != c.after.learn)
        out.append({ c.after.learn ? QObject::tr("following the provider's limits")
                                   : QObject::tr("no longer following the provider's limits") });
    markChanges(out, QString(), c.before, c.after);
    for (const auto& [name, b] : c.before.models) {
        auto it = c.after.models.find(name);
        if (it != c.after.models.end())
            markChanges(out, QObject::tr("class %1 ").arg(QString::fromStdString(name)), b, it->second);
    }
    if (!(c.before.dayReset == c.after.dayReset))
        out.append({ QObject::tr("day resets %1 → %2")
                         .arg(QString::fromStdString(c.before.dayReset.text()),
                             QString::fromStdString(c.after.dayReset.text())) });
    for (const auto& [name, b] : c.before.models) {
        const QString n = QString::fromStdString(name);
        auto it = c.after.models.find(name);
        if (it == c.after.models.end())
            out.append({ QObject::tr("class %1 removed").arg(n), true });
        else if (b.match != it->second.match)
            out.append({ QObject::tr("class %1 models %2 → %3").arg(n, patternsText(b.match), patternsText(it->second.match)) });
    }
    for (const auto& [name, a] : c.after.models) {
        if (!c.before.models.count(name))
            out.append({ QObject::tr("class %1 added (%2)").arg(QString::fromStdString(name), patternsText(a.match)) });
    }
    return out;
}

QString valueText(const std::optional<std::int64_t>& v, bool seconds)
{
    if (!v)
        return QObject::tr("none");
    if (seconds)
        return QObject::tr("%1 s").arg(static_cast<double>(*v) / 1000.0);
    return QString::number(*v);
}

} // namespace

QStringList LimitChange::warnings() const
{
    QStringList out;
    for (const Field& f : fieldsOf(*this)) {
        if (f.before == f.after || !f.before)
            continue; // setting a limit where there was none only protects more
        const QString change
            = QStringLiteral("%1: %2 → %3")
                  .arg(f.name, valueText(f.before, f.seconds), valueText(f.after, f.seconds));
        if (!f.after) {
            out.append(change + QObject::tr(" (removes the limit)"));
            continue;
        }
        // More than half: below half of the old value, or above one and a half times it.
        const std::int64_t from = *f.before;
        const std::int64_t to = *f.after;
        if (2 * to < from || 2 * to > 3 * from)
            out.append(change + QObject::tr(" (more than half)"));
    }
    for (const TextChange& t : textChangesOf(*this)) {
        if (t.drastic)
            out.append(t.text + QObject::tr(" (removes its limits)"));
    }
    return out;
}

QString LimitChange::summary() const
{
    QStringList parts;
    for (const Field& f : fieldsOf(*this)) {
        if (f.before != f.after)
            parts.append(QStringLiteral("%1 %2 → %3")
                             .arg(f.name, valueText(f.before, f.seconds), valueText(f.after, f.seconds)));
    }
    for (const TextChange& t : textChangesOf(*this))
        parts.append(t.text);
    if (parts.isEmpty())
        parts.append(QObject::tr("other settings"));
    return parts.join(QStringLiteral(", "));
}

LimitChange LimitChange::reversed() const
{
    return LimitChange { provider, after, before, true, QString() };
}

} // namespace tollgate::ui
