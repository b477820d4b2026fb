#include "limitchange.h"

#include <QObject>

namespace tollgate::ui {

namespace {

struct Field
{
    QString name;
    std::optional<std::int64_t> before;
    std::optional<std::int64_t> after;
    bool seconds = false; // a duration in ms, shown in seconds
};

QVector<Field> fieldsOf(const LimitChange& c)
{
    return {
        { QObject::tr("requests per window"), c.before.requests, c.after.requests },
        { QObject::tr("tokens per window"), c.before.tokens, c.after.tokens },
        { QObject::tr("window"), c.before.windowMs, c.after.windowMs, true },
        { QObject::tr("parallel"), c.before.parallel, c.after.parallel },
    };
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
    if (parts.isEmpty())
        parts.append(QObject::tr("other settings"));
    return parts.join(QStringLiteral(", "));
}

LimitChange LimitChange::reversed() const
{
    return LimitChange { provider, after, before, true };
}

} // namespace tollgate::ui
