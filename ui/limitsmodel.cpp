#include "limitsmodel.h"

#include "corebridge.h"
#include "learnedlimits.h"

#include <QBrush>
#include <QFont>
#include <QPalette>
#include <type_traits>

namespace tollgate::ui {

namespace {

// One count column: its field's range, and the CLI option that sets it (the name the core's
// refusal uses, so the dashboard and `tollgate limits set` say the same words).
struct CountColumn
{
    LimitsModel::Column column;
    LimitField field;
    const char* option;
    const char* unit; // for "no ... limit" tooltips
    // The limits.json key of a per-window limit the provider may have given (a learned mark);
    // null: never learned (per day, parallel).
    const char* learnKey = nullptr;
};

constexpr CountColumn COUNT_COLUMNS[] = {
    { LimitsModel::Requests, LimitField::Requests, "--requests", "requests per window", "requests" },
    { LimitsModel::Tokens, LimitField::Tokens, "--tokens", "tokens per window", "tokens" },
    { LimitsModel::InputTokens, LimitField::InputTokens, "--input-tokens", "input tokens per window",
        "input_tokens" },
    { LimitsModel::OutputTokens, LimitField::OutputTokens, "--output-tokens", "output tokens per window",
        "output_tokens" },
    { LimitsModel::RequestsPerDay, LimitField::Requests, "--requests-per-day", "requests per day" },
    { LimitsModel::TokensPerDay, LimitField::Tokens, "--tokens-per-day", "tokens per day" },
    { LimitsModel::InputTokensPerDay, LimitField::InputTokens, "--input-tokens-per-day",
        "input tokens per day" },
    { LimitsModel::OutputTokensPerDay, LimitField::OutputTokens, "--output-tokens-per-day",
        "output tokens per day" },
    { LimitsModel::Parallel, LimitField::Parallel, "--parallel", "parallel" },
};

const CountColumn* countColumn(int column)
{
    for (const CountColumn& c : COUNT_COLUMNS) {
        if (c.column == column)
            return &c;
    }
    return nullptr;
}

// The limit a count column shows, in a provider's or a class's limits (the two share the
// per-window and per-day fields; parallel is the provider's only).
template <class Limits> auto slotOf(Limits& l, int column) -> decltype(&l.requests)
{
    switch (column) {
    case LimitsModel::Requests:
        return &l.requests;
    case LimitsModel::Tokens:
        return &l.tokens;
    case LimitsModel::InputTokens:
        return &l.inputTokens;
    case LimitsModel::OutputTokens:
        return &l.outputTokens;
    case LimitsModel::RequestsPerDay:
        return &l.perDay.requests;
    case LimitsModel::TokensPerDay:
        return &l.perDay.tokens;
    case LimitsModel::InputTokensPerDay:
        return &l.perDay.inputTokens;
    case LimitsModel::OutputTokensPerDay:
        return &l.perDay.outputTokens;
    default:
        break;
    }
    if constexpr (std::is_same_v<std::remove_const_t<Limits>, ProviderLimits>) {
        if (column == LimitsModel::Parallel)
            return &l.parallel;
    }
    return nullptr;
}

bool providerOnly(int column)
{
    return column == LimitsModel::DayResets || column == LimitsModel::Parallel
        || column == LimitsModel::Headroom || column == LimitsModel::BackoffBase
        || column == LimitsModel::BackoffCap || column == LimitsModel::MaxHold
        || column == LimitsModel::Learn;
}

KeyedTableModel::Cell countCell(
    const std::optional<std::int64_t>& given, std::int64_t headroom, const char* unit, bool learned = false)
{
    if (!given) {
        auto c = KeyedTableModel::textCell(QStringLiteral("—"), -1);
        c.insert(Qt::EditRole, QString());
        c.insert(Qt::ToolTipRole, QObject::tr("No %1 limit. Edit to set one.").arg(QLatin1String(unit)));
        return c;
    }
    // A learned value says so in the cell itself (a tooltip alone is never seen in a
    // screenshot or by a keyboard user); the editor gets the bare number.
    auto c = KeyedTableModel::textCell(
        learned ? QObject::tr("%1 (from provider)").arg(*given) : QString::number(*given),
        static_cast<qlonglong>(*given));
    c.insert(Qt::EditRole, QString::number(*given));
    QStringList tip;
    if (learned) {
        tip.append(
            QObject::tr("From the provider: its answers' rate-limit headers set this limit (learning is on). "
                        "Edit it to make it yours."));
        QFont italic;
        italic.setItalic(true);
        c.insert(Qt::FontRole, italic);
    }
    if (headroom != 100) {
        ProviderLimits l;
        l.headroomPercent = headroom;
        tip.append(QObject::tr("%1 %2 after %3% headroom")
                       .arg(l.effective(*given))
                       .arg(QLatin1String(unit))
                       .arg(headroom));
    }
    if (!tip.isEmpty())
        c.insert(Qt::ToolTipRole, tip.join(QLatin1Char('\n')));
    return c;
}

KeyedTableModel::Cell windowCell(std::int64_t ms)
{
    auto w = KeyedTableModel::textCell(KeyedTableModel::secondsText(ms), static_cast<qlonglong>(ms));
    w.insert(Qt::EditRole, QString::number(static_cast<double>(ms) / 1000.0));
    return w;
}

// "claude-opus-4*, claude-opus-5*" → the patterns as given, trimmed (the CLI's --models split);
// empty text: none (the class is the model of its own name).
std::vector<std::string> patternList(const QString& text)
{
    std::vector<std::string> out;
    if (text.trimmed().isEmpty())
        return out;
    for (const QString& one : text.split(QLatin1Char(',')))
        out.push_back(one.trimmed().toStdString());
    return out;
}

bool isNone(const QString& t)
{
    return t.isEmpty() || t == QLatin1String("-") || t == QStringLiteral("—")
        || t.compare(QLatin1String("none"), Qt::CaseInsensitive) == 0;
}

} // namespace

LimitsModel::LimitsModel(QObject* parent)
    : KeyedTableModel(
        { tr("Provider"), tr("Class"), tr("Models"), tr("Requests"), tr("Tokens"), tr("Input tokens"),
            tr("Output tokens"), tr("Window"), tr("Requests/day"), tr("Tokens/day"), tr("Input/day"),
            tr("Output/day"), tr("Day resets"), tr("Parallel"), tr("Headroom %"), tr("Backoff from"),
            tr("Backoff up to"), tr("Max hold"), tr("Follows provider") },
        parent)
{
}

QString LimitsModel::keyOf(const QString& provider, const QString& className)
{
    return className.isEmpty() ? provider : provider + QLatin1Char('/') + className;
}

QString LimitsModel::providerOfKey(const QString& key)
{
    return key.section(QLatin1Char('/'), 0, 0);
}

QString LimitsModel::classOfKey(const QString& key)
{
    return key.section(QLatin1Char('/'), 1);
}

void LimitsModel::setSnapshot(const DashboardSnapshot& snapshot)
{
    if (m_fed && snapshot.limits == m_limits)
        return; // the state moved, the limits did not: nothing here changes
    m_limits = snapshot.limits;
    m_fed = true;
    rebuild();
}

void LimitsModel::rebuild()
{
    QVector<Row> rows;
    const QString inherited = tr("(provider's)");
    for (const auto& [name, l] : m_limits.providers()) {
        const QString provider = qs(name);
        Row row;
        row.key = keyOf(provider);
        row.cells.resize(ColumnCount);
        row.cells[Provider] = KeyedTableModel::textCell(provider);
        auto all = KeyedTableModel::textCell(tr("all models"));
        all.insert(Qt::ToolTipRole, tr("The provider's own limits: every call counts in them"));
        row.cells[Class] = all;
        row.cells[Models] = KeyedTableModel::textCell(QString());
        for (const CountColumn& c : COUNT_COLUMNS) {
            const auto* v = slotOf(l, c.column);
            row.cells[c.column] = countCell(
                *v, l.headroomPercent, c.unit, c.learnKey && LearnedLimits::isLearned(l.learned, c.learnKey));
        }
        row.cells[Window] = windowCell(l.windowMs);
        auto reset = KeyedTableModel::textCell(qs(l.dayReset.text()));
        reset.insert(Qt::EditRole, qs(l.dayReset.text()));
        reset.insert(Qt::ToolTipRole,
            tr("When a day's budget starts afresh: \"rolling\" (the last 24 h), \"HH:MM\" (UTC) or "
               "\"HH:MM@Area/City\""));
        row.cells[DayResets] = reset;
        auto headroom = KeyedTableModel::textCell(
            QString::number(l.headroomPercent), static_cast<qlonglong>(l.headroomPercent));
        headroom.insert(Qt::EditRole, QString::number(l.headroomPercent));
        row.cells[Headroom] = headroom;
        auto timed = [](std::int64_t ms, const QString& tip) {
            auto cell = windowCell(ms);
            cell.insert(Qt::ToolTipRole, tip);
            return cell;
        };
        row.cells[BackoffBase] = timed(l.backoffBaseMs,
            tr("After a 429 every caller waits this long (unless the provider names the time); each 429 in a "
               "row doubles it (--backoff-base)"));
        row.cells[BackoffCap]
            = timed(l.backoffCapMs, tr("The doubled backoff stops growing here (--backoff-cap)"));
        row.cells[MaxHold] = timed(l.maxHoldMs,
            tr("A slot held longer than this is shown as overdue, and a dead holder's slot is reclaimed "
               "(--max-hold)"));
        auto learn = KeyedTableModel::textCell(l.learn ? tr("yes") : tr("no"), l.learn ? 1 : 0);
        learn.insert(Qt::CheckStateRole, l.learn ? Qt::Checked : Qt::Unchecked);
        learn.insert(Qt::ToolTipRole,
            tr("Follow the provider's limits: the per-window limits you have not set take the figures "
               "its answers state (read by tollgate proxy). Unticking keeps what was learned, as yours."));
        row.cells[Learn] = learn;
        rows.append(std::move(row));

        for (const auto& [className, m] : l.models) {
            Row c;
            c.key = keyOf(provider, qs(className));
            c.cells.resize(ColumnCount);
            c.cells[Provider] = KeyedTableModel::textCell(provider);
            c.cells[Class] = KeyedTableModel::textCell(qs(className));
            QStringList patterns;
            for (const std::string& p : m.match)
                patterns.append(qs(p));
            auto models
                = KeyedTableModel::textCell(patterns.isEmpty() ? tr("(the model %1)").arg(qs(className))
                                                               : patterns.join(QStringLiteral(", ")));
            models.insert(Qt::EditRole, patterns.join(QStringLiteral(", ")));
            models.insert(Qt::ToolTipRole,
                tr("Model name patterns this class pools (* ? [...]), separated by commas; empty: "
                   "the model named %1 only")
                    .arg(qs(className)));
            c.cells[Models] = models;
            for (const CountColumn& col : COUNT_COLUMNS) {
                if (const auto* v = slotOf(m, col.column))
                    c.cells[col.column] = countCell(*v, l.headroomPercent, col.unit,
                        col.learnKey && LearnedLimits::isLearned(m.learned, col.learnKey));
            }
            c.cells[Window] = windowCell(m.windowMs);
            for (int column : { int(DayResets), int(Parallel), int(Headroom), int(BackoffBase),
                     int(BackoffCap), int(MaxHold), int(Learn) }) {
                auto cell = KeyedTableModel::textCell(inherited);
                cell.insert(Qt::ForegroundRole, QBrush(QPalette().color(QPalette::Disabled, QPalette::Text)));
                c.cells[column] = cell;
            }
            rows.append(std::move(c));
        }
    }
    setRows(std::move(rows));
}

Qt::ItemFlags LimitsModel::flags(const QModelIndex& index) const
{
    if (!isCell(index))
        return Qt::NoItemFlags;
    Qt::ItemFlags f = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
    const QString key = keyAt(index.row());
    const bool isClass = !classOfKey(key).isEmpty();
    const int column = index.column();
    if (column == Provider || column == Class)
        return f;
    if (column == Models && !isClass)
        return f;
    if (isClass && providerOnly(column))
        return f;
    if (column == Learn)
        return f | Qt::ItemIsUserCheckable;
    return f | Qt::ItemIsEditable;
}

bool LimitsModel::setData(const QModelIndex& index, const QVariant& value, int role)
{
    if (role == Qt::CheckStateRole && isCell(index) && index.column() == Learn
        && classOfKey(keyAt(index.row())).isEmpty())
        return setLearning(keyAt(index.row()), value.toInt() == Qt::Checked);
    if (role != Qt::EditRole || !isCell(index) || !(flags(index) & Qt::ItemIsEditable))
        return false;
    const QString key = keyAt(index.row());
    const QString provider = providerOfKey(key);
    const QString className = classOfKey(key);
    const ProviderLimits* current = m_limits.find(provider.toStdString());
    if (!current)
        return false;
    ProviderLimits edited = *current;
    ModelLimits* cls = nullptr;
    if (!className.isEmpty()) {
        auto it = edited.models.find(className.toStdString());
        if (it == edited.models.end())
            return false;
        cls = &it->second;
    }
    auto refuse = [&](const QString& why) {
        Q_EMIT editRefused(provider, tr("%1: %2").arg(provider, why));
        return false;
    };
    QString refusal;
    if (!apply(edited, cls, index.column(), value.toString(), refusal))
        return refuse(refusal);

    // What `limits set` refuses beyond a value's range: a scope left with no limit at all.
    if (cls && !cls->perWindow().any() && !cls->perDay.any())
        return refuse(tr("class %1 would have no limit left; remove the class instead").arg(className));
    if (!cls && !edited.perWindow().any() && !edited.perDay.any() && !edited.parallel && !edited.learn)
        return refuse(tr("a provider needs at least one of --requests, --tokens, --input-tokens, "
                         "--output-tokens, a per-day limit or --parallel"));
    return request(provider, *current, edited);
}

bool LimitsModel::apply(
    ProviderLimits& edited, ModelLimits* cls, int column, const QString& typed, QString& refusal)
{
    const QString raw = typed.trimmed();
    if (const CountColumn* c = countColumn(column)) {
        std::optional<std::int64_t>* slot = cls ? slotOf(*cls, column) : slotOf(edited, column);
        if (!slot)
            return false;
        // A value the user sets or clears is theirs (the CLI's rule): kept learned, clearing it
        // would be refused (a mark names a set limit) and the next figure the proxy reads would
        // overwrite the edit.
        if (c->learnKey)
            LearnedLimits::unmark(cls ? cls->learned : edited.learned, c->learnKey);
        if (isNone(raw)) {
            slot->reset();
            return true;
        }
        bool ok = false;
        const double n = raw.toDouble(&ok);
        if (!ok) {
            refusal = tr("%1 must be a whole number, or empty for no limit (got \"%2\")")
                          .arg(QLatin1String(c->option), raw);
            return false;
        }
        auto checked = QuotaLimits::check(c->field, n, c->option);
        if (!checked) {
            refusal = qs(checked.error().message);
            return false;
        }
        *slot = *checked;
        return true;
    }
    switch (column) {
    case Window: {
        bool ok = false;
        const double s = raw.toDouble(&ok);
        if (!ok) {
            refusal = tr("--window must be a number of seconds (got \"%1\")").arg(raw);
            return false;
        }
        auto ms = QuotaLimits::check(LimitField::WindowSeconds, s, "--window");
        if (!ms) {
            refusal = qs(ms.error().message);
            return false;
        }
        (cls ? cls->windowMs : edited.windowMs) = *ms;
        return true;
    }
    case Headroom: {
        if (cls)
            return false;
        bool ok = true;
        const double n = isNone(raw) ? 100.0 : raw.toDouble(&ok);
        if (!ok) {
            refusal = tr("--headroom must be a whole number (got \"%1\")").arg(raw);
            return false;
        }
        auto checked = QuotaLimits::check(LimitField::HeadroomPercent, n, "--headroom");
        if (!checked) {
            refusal = qs(checked.error().message);
            return false;
        }
        edited.headroomPercent = *checked;
        return true;
    }
    case BackoffBase:
    case BackoffCap:
    case MaxHold: {
        if (cls)
            return false;
        struct Timed
        {
            LimitField field;
            const char* option;
            std::int64_t ProviderLimits::*slot;
        };
        const Timed t = column == BackoffBase
            ? Timed { LimitField::BackoffBaseSeconds, "--backoff-base", &ProviderLimits::backoffBaseMs }
            : column == BackoffCap
            ? Timed { LimitField::BackoffCapSeconds, "--backoff-cap", &ProviderLimits::backoffCapMs }
            : Timed { LimitField::MaxHoldSeconds, "--max-hold", &ProviderLimits::maxHoldMs };
        QString number = raw;
        if (number.endsWith(QLatin1Char('s')))
            number = number.chopped(1).trimmed(); // "60 s", as the cell shows it
        bool ok = false;
        const double s = number.toDouble(&ok);
        if (!ok) {
            refusal = tr("%1 must be a number of seconds (got \"%2\")").arg(QLatin1String(t.option), raw);
            return false;
        }
        auto ms = QuotaLimits::check(t.field, s, t.option);
        if (!ms) {
            refusal = qs(ms.error().message);
            return false;
        }
        edited.*t.slot = *ms;
        return true;
    }
    case DayResets: {
        if (cls)
            return false;
        auto reset = DayReset::parse(isNone(raw) ? std::string("rolling") : raw.toStdString());
        if (!reset) {
            refusal = QStringLiteral("--day-resets: ") + qs(reset.error().message);
            return false;
        }
        edited.dayReset = *reset; // "0:00" for "00:00" is the same reset: no change
        return true;
    }
    case Models:
        if (!cls)
            return false;
        cls->match = patternList(raw);
        return true;
    default:
        break;
    }
    return false;
}

bool LimitsModel::request(
    const QString& provider, const ProviderLimits& current, const ProviderLimits& edited)
{
    if (auto valid = QuotaLimits::validate(provider.toStdString(), edited); !valid) {
        Q_EMIT editRefused(provider, qs(valid.error().message));
        return false;
    }
    if (edited == current)
        return true;
    Q_EMIT limitsEditRequested(provider, edited);
    return true;
}

bool LimitsModel::setLearning(const QString& provider, bool on)
{
    const ProviderLimits* current = m_limits.find(provider.toStdString());
    if (!current)
        return false;
    return request(provider, *current, LearnedLimits::withLearning(*current, on));
}

bool LimitsModel::isLearning(const QString& provider) const
{
    const ProviderLimits* l = m_limits.find(provider.toStdString());
    return l && l->learn;
}

bool LimitsModel::addClass(const QString& provider, const NewClass& added)
{
    const ProviderLimits* current = m_limits.find(provider.toStdString());
    if (!current) {
        Q_EMIT editRefused(provider, tr("%1 has no limits; set some first").arg(provider));
        return false;
    }
    const std::string name = added.name.trimmed().toStdString();
    if (auto ok = QuotaLimits::validateName("class", name); !ok) {
        Q_EMIT editRefused(provider, qs(ok.error().message));
        return false;
    }
    if (current->models.count(name)) {
        Q_EMIT editRefused(provider, tr("%1 already has a class %2").arg(provider, qs(name)));
        return false;
    }
    ModelLimits m { std::nullopt, std::nullopt, current->windowMs };
    m.match = patternList(added.patterns);
    ProviderLimits scratch = *current;
    for (auto it = added.values.cbegin(); it != added.values.cend(); ++it) {
        if (it.value().trimmed().isEmpty())
            continue;
        QString refusal;
        if (!apply(scratch, &m, it.key(), it.value(), refusal)) {
            Q_EMIT editRefused(provider,
                tr("%1: %2").arg(provider, refusal.isEmpty() ? tr("a class has no such limit") : refusal));
            return false;
        }
    }
    if (!m.perWindow().any() && !m.perDay.any()) {
        Q_EMIT editRefused(provider,
            tr("a class limit needs requests, tokens, input tokens, output tokens or a per-day limit"));
        return false;
    }
    ProviderLimits edited = *current;
    edited.models[name] = m;
    return request(provider, *current, edited);
}

bool LimitsModel::removeClass(const QString& provider, const QString& className)
{
    const ProviderLimits* current = m_limits.find(provider.toStdString());
    if (!current || !current->models.count(className.toStdString()))
        return false;
    ProviderLimits edited = *current;
    edited.models.erase(className.toStdString());
    return request(provider, *current, edited);
}

} // namespace tollgate::ui
