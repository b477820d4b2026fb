#include "learnedlimits.h"

#include <QObject>
#include <algorithm>

namespace tollgate::ui {

bool LearnedLimits::isLearned(const std::vector<std::string>& learned, std::string_view key)
{
    return std::find(learned.begin(), learned.end(), key) != learned.end();
}

void LearnedLimits::unmark(std::vector<std::string>& learned, std::string_view key)
{
    std::erase_if(learned, [key](const std::string& k) { return k == key; });
}

ProviderLimits LearnedLimits::withLearning(ProviderLimits limits, bool on)
{
    limits.learn = on;
    if (!on) {
        // What was learned stays, as the user's (the CLI's --no-learn): a limit the callers
        // were held to does not vanish because the user stopped following the provider.
        limits.learned.clear();
        for (auto& [name, m] : limits.models)
            m.learned.clear();
    }
    return limits;
}

ReportedLimits LearnedLimits::reportedOf(const ProviderState* state)
{
    if (!state)
        return {};
    return ReportedLimits { state->reportedRequests, state->reportedTokens, state->reportedInputTokens,
        state->reportedOutputTokens, state->reportedScope };
}

std::optional<LimitLearning::Lesson> LearnedLimits::adoption(const ProviderLimits& limits, const ProviderState* state)
{
    const ReportedLimits reported = reportedOf(state);
    if (!reported.any())
        return std::nullopt;
    auto lesson = LimitLearning::adopt(limits, reported);
    // Only marks would change (the figures are already the limits): nothing to ask the user
    // about; `limits adopt` says "already the provider's" then too.
    if (!lesson || lesson->changes.empty())
        return std::nullopt;
    return lesson;
}

QString LearnedLimits::metricWords(std::string_view key)
{
    if (key == "requests")
        return QObject::tr("requests per window");
    if (key == "tokens")
        return QObject::tr("tokens per window");
    if (key == "input_tokens")
        return QObject::tr("input tokens per window");
    return QObject::tr("output tokens per window");
}

QStringList LearnedLimits::changeLines(const LimitLearning::Lesson& lesson)
{
    QStringList out;
    for (const LimitLearning::Change& c : lesson.changes) {
        QString line = QStringLiteral("%1: %2 → %3")
                           .arg(metricWords(c.key), c.before ? QString::number(*c.before) : QObject::tr("none"))
                           .arg(c.after);
        if (!lesson.scope.empty())
            line += QObject::tr(" (class %1)").arg(QString::fromStdString(lesson.scope));
        out.append(line);
    }
    return out;
}

} // namespace tollgate::ui
