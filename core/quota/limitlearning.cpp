#include "quota/limitlearning.h"

#include <algorithm>

namespace tollgate {

namespace {

struct Metric
{
    const char* key;
    std::int64_t ReportedLimits::*reported;
};
constexpr Metric METRICS[] = {
    { "requests", &ReportedLimits::requests },
    { "tokens", &ReportedLimits::tokens },
    { "input_tokens", &ReportedLimits::inputTokens },
    { "output_tokens", &ReportedLimits::outputTokens },
};

// The per-window limit of `key` in a scope whose fields are these.
std::optional<std::int64_t>* fieldOf(std::string_view key, std::optional<std::int64_t>& requests,
    std::optional<std::int64_t>& tokens, std::optional<std::int64_t>& input, std::optional<std::int64_t>& output)
{
    if (key == "requests")
        return &requests;
    if (key == "tokens")
        return &tokens;
    if (key == "input_tokens")
        return &input;
    return &output;
}

void mark(std::vector<std::string>& learned, const std::string& key, bool on)
{
    auto it = std::lower_bound(learned.begin(), learned.end(), key);
    const bool there = it != learned.end() && *it == key;
    if (on && !there)
        learned.insert(it, key);
    else if (!on && there)
        learned.erase(it);
}

} // namespace

std::string LimitLearning::Lesson::describe(std::string_view how) const
{
    std::string out(how);
    out += ": ";
    for (std::size_t i = 0; i < changes.size(); ++i) {
        const Change& c = changes[i];
        out += (i ? ", " : "") + c.key + " " + (c.before ? std::to_string(*c.before) : std::string("none"))
            + " -> " + std::to_string(c.after);
    }
    if (!scope.empty())
        out += " (class " + scope + ")";
    return out;
}

std::string LimitLearning::scopeOf(const ProviderLimits& limits, std::string_view model)
{
    const auto classes = limits.classesOf(model);
    return classes.empty() ? std::string() : classes.front();
}

ReportedLimits LimitLearning::keptIn(const ProviderState* state)
{
    if (!state)
        return {};
    return { state->reportedRequests, state->reportedTokens, state->reportedInputTokens,
        state->reportedOutputTokens, state->reportedScope };
}

std::int64_t LimitLearning::perWindow(std::int64_t perMinute, std::int64_t windowMs)
{
    if (windowMs >= 60000)
        return perMinute;
    // perMinute is at most 2^40 (QuotaLimits::MAX_COUNT) and windowMs below 60,000: no overflow.
    return std::max<std::int64_t>(1, perMinute * windowMs / 60000);
}

std::optional<LimitLearning::Lesson> LimitLearning::learn(
    const ProviderLimits& limits, const ReportedLimits& reported)
{
    if (!limits.learn)
        return std::nullopt;
    return apply(limits, reported, false);
}

std::optional<LimitLearning::Lesson> LimitLearning::adopt(
    const ProviderLimits& limits, const ReportedLimits& reported)
{
    return apply(limits, reported, true);
}

std::optional<LimitLearning::Lesson> LimitLearning::apply(
    const ProviderLimits& limits, const ReportedLimits& reported, bool userToo)
{
    Lesson lesson;
    lesson.limits = limits;
    lesson.scope = reported.scope;
    ProviderLimits& l = lesson.limits;
    ModelLimits* cls = nullptr;
    if (!reported.scope.empty()) {
        auto it = l.models.find(reported.scope);
        if (it == l.models.end())
            return std::nullopt;
        cls = &it->second;
    }
    const std::int64_t windowMs = cls ? cls->windowMs : l.windowMs;
    std::vector<std::string>& learned = cls ? cls->learned : l.learned;
    for (const Metric& m : METRICS) {
        const std::int64_t figure = reported.*m.reported;
        if (figure <= 0)
            continue;
        std::optional<std::int64_t>* field = cls
            ? fieldOf(m.key, cls->requests, cls->tokens, cls->inputTokens, cls->outputTokens)
            : fieldOf(m.key, l.requests, l.tokens, l.inputTokens, l.outputTokens);
        const bool followed = std::binary_search(learned.begin(), learned.end(), std::string(m.key));
        if (!userToo && field->has_value() && !followed)
            continue; // the user's: flagged when it differs, never overwritten
        const std::int64_t value = std::min(perWindow(figure, windowMs), QuotaLimits::MAX_COUNT);
        if (*field == value && followed != userToo)
            continue;
        const std::optional<std::int64_t> before = *field;
        *field = value;
        mark(learned, m.key, !userToo);
        if (!QuotaLimits::validate("p", l)) {
            // A figure that contradicts the scope's per-day limit: the user's day stands.
            *field = before;
            mark(learned, m.key, followed);
            continue;
        }
        if (before != value)
            lesson.changes.push_back({ m.key, before, value });
    }
    if (lesson.limits == limits)
        return std::nullopt;
    return lesson;
}

} // namespace tollgate
