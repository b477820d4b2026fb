#pragma once

// LimitsModel: every limit of every provider, in the provider's own terms — one row per
// provider and one per model class under it (key "provider" or "provider/class": '/' is never
// in a name) with requests, tokens, input and output tokens per window and per day, the
// window, the day reset, parallel calls, headroom, the 429 backoff's base and cap, the
// longest hold of a slot, and a class's model patterns. Fed from the
// snapshots' limits (rows updated by difference; a snapshot whose limits did not change
// changes nothing). Every cell a scope has is editable in place; an edit is checked with the
// core's own rules — QuotaLimits::check for a value (named as the CLI names its option, so the
// refusal is word for word `tollgate limits set`'s), DayReset::parse for a reset,
// QuotaLimits::validate for the whole — and, when valid, handed on as a request
// (limitsEditRequested) carrying the limits shown with only the edited field changed: a
// limit the user did not touch is passed on exactly as it was read. A per-window limit that came
// from the provider (a learned mark) is shown as such ("40 (from provider)", in italics); editing or
// clearing it makes it the user's, as `limits set` does (LearnedLimits). The Learn column turns
// following the provider on or off.

#include "dashboardsnapshot.h"
#include "keyedtablemodel.h"

#include <QHash>

namespace tollgate::ui {

class LimitsModel final : public KeyedTableModel
{
    Q_OBJECT
public:
    enum Column {
        Provider,
        Class,
        Models,
        Requests,
        Tokens,
        InputTokens,
        OutputTokens,
        Window,
        RequestsPerDay,
        TokensPerDay,
        InputTokensPerDay,
        OutputTokensPerDay,
        DayResets,
        Parallel,
        Headroom,
        BackoffBase, // the first 429's backoff, seconds (doubles up to BackoffCap)
        BackoffCap,
        MaxHold, // a slot held longer is overdue, seconds
        Learn, // the provider's `learn`: unset per-window limits follow the provider's (checkable)
        ColumnCount
    };

    // A new class as the user describes it: its name, its patterns ("a*, b*"; empty: the
    // model of its name) and its limits as typed, by column (Requests ... OutputTokensPerDay,
    // Window; at least one limit). Checked as the same cells of a class row are.
    struct NewClass
    {
        QString name;
        QString patterns;
        QHash<int, QString> values;
    };

    explicit LimitsModel(QObject* parent = nullptr);

    void setSnapshot(const DashboardSnapshot& snapshot);

    [[nodiscard]] Qt::ItemFlags flags(const QModelIndex& index) const override;
    bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;

    [[nodiscard]] static QString keyOf(const QString& provider, const QString& className = {});
    [[nodiscard]] static QString providerOfKey(const QString& key);
    [[nodiscard]] static QString classOfKey(const QString& key); // empty: the provider's row

    // Adds a class to a provider (refused as an edit is: editRefused, false). The window of a
    // class given without one is its provider's.
    bool addClass(const QString& provider, const NewClass& added);
    bool removeClass(const QString& provider, const QString& className);
    // Turns following the provider's limits on or off (`limits set --learn` / `--no-learn`:
    // off keeps the learned values, as the user's).
    bool setLearning(const QString& provider, bool on);
    [[nodiscard]] bool isLearning(const QString& provider) const;

Q_SIGNALS:
    void limitsEditRequested(const QString& provider, const tollgate::ProviderLimits& limits);
    void editRefused(const QString& provider, const QString& reason);

private:
    void rebuild();
    bool request(const QString& provider, const ProviderLimits& current, const ProviderLimits& edited);
    // Sets one column's value, as typed, in the provider's limits or (cls) one class's; false
    // with the core's words in `refusal` when the value is refused.
    static bool apply(
        ProviderLimits& edited, ModelLimits* cls, int column, const QString& raw, QString& refusal);

    QuotaLimits m_limits;
    bool m_fed = false;
};

} // namespace tollgate::ui
