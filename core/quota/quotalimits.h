#pragma once

// QuotaLimits: what the user set, per provider (one API key's quota) and optionally per model.
// Lives in limits.json in the home directory, apart from the hot state, so a corrupt or
// deleted state never loses it. Numbers are stored as given; headroom is applied on use.
//
// Every field has one documented range (the table below; QuotaLimits::range in code). A
// value outside it, of the wrong JSON type, or fractional where a count is needed is REFUSED
// with the field's name, its range and the value seen — never replaced by the default: a
// hand-edited "max_hold_seconds": -1 must not quietly become 600. Only a field that is absent
// takes its default. The CLI checks its options with the same function (QuotaLimits::check),
// so both say the same thing about the same value. A key that is not one of the fields below
// ("paralel", "Requests") or a key repeated in one object is refused too, naming its path
// (providers.p.paralel): skipped, it would silently drop the limit the user meant.
//
//   field                 unit     range                      stored as
//   requests, tokens,     count    1 .. 2^40 (or null: none)  as is
//   input_tokens,
//   output_tokens
//   parallel              count    1 .. 256 (or null: none)   as is
//   headroom_percent      count    1 .. 100                   as is
//   window_seconds        seconds  0.1 .. 604800 (7 days)     ms, rounded
//   backoff_base_seconds  seconds  0.001 .. 86400 (24 h)      ms, rounded; not above the cap
//   backoff_cap_seconds   seconds  0.001 .. 86400 (24 h)      ms, rounded
//   max_hold_seconds      seconds  1 .. 604800 (7 days)       ms, rounded
//
// Per day (`per_day`, an object with the four metrics' keys, in a provider and in a class) and
// `day_resets` ("rolling", "HH:MM" in UTC, or "HH:MM@Area/City": see DayReset) extend the
// form every earlier version wrote; a file without them reads as before, and they are written
// only when set, so a home is rewritten in the new form only when a user sets a new limit. So
// are `learn` (true: unset limits follow the provider's) and `learned` (in a provider and in a
// class: the keys of the per-window limits the provider gave, each of a limit that is set). A
// per-day limit below the same scope's per-window limit of the same metric is refused (a day
// holds many windows: the two were swapped). A class (`models.NAME`) may name the models it
// pools in `match` (patterns, see ModelLimits); a pattern that is empty, too long or holds a
// control character is refused, and so is a class whose patterns are given but empty.
//
// The backoff cap's maximum is RetryAfter::MAX_MS: with both bounded, one 429 report never
// stops the provider's callers for longer than 24 h (plus the limiter's jitter, at most 5 s).

#include "base/result.h"
#include "quota/dayreset.h"
#include "quota/retryafter.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate {

enum class LimitField {
    Requests,
    Tokens,
    InputTokens,
    OutputTokens,
    Parallel,
    HeadroomPercent,
    WindowSeconds,
    BackoffBaseSeconds,
    BackoffCapSeconds,
    MaxHoldSeconds,
};

struct LimitRange
{
    std::string_view key; // its name in limits.json
    std::int64_t min; // as stored: a count, or ms for the *_seconds fields
    std::int64_t max;
    bool count; // a whole number given and stored as is; otherwise seconds, stored as ms
};

// The metrics a provider counts, each an optional limit (none: not limited) of one period.
// tokens is input + output; input and output are the provider's own split (which usage fields
// count toward which is the provider's counting rule, CountingRule).
struct Budget
{
    std::optional<std::int64_t> requests;
    std::optional<std::int64_t> tokens;
    std::optional<std::int64_t> inputTokens;
    std::optional<std::int64_t> outputTokens;

    [[nodiscard]] bool any() const { return requests || tokens || inputTokens || outputTokens; }
    [[nodiscard]] bool split() const { return inputTokens || outputTokens; }
    bool operator==(const Budget&) const = default;
};

// A model class: one pool of the provider's quota shared by a family of model names (Anthropic
// counts "claude-opus-4*" together). `match` holds name patterns (fnmatch: * ? [...]); empty,
// the class is the model of its own name (`limits set --model NAME`, the form every earlier
// version wrote). A request counts in its provider's limits and in every class it matches.
struct ModelLimits
{
    // The fields every version had, in their order (`ModelLimits { 10, 5000, 30000 }`).
    ModelLimits(std::optional<std::int64_t> requestsPerWindow = std::nullopt,
        std::optional<std::int64_t> tokensPerWindow = std::nullopt, std::int64_t window = 60000)
        : requests(requestsPerWindow)
        , tokens(tokensPerWindow)
        , windowMs(window)
    {
    }

    std::optional<std::int64_t> requests; // per window
    std::optional<std::int64_t> tokens; // per window
    std::int64_t windowMs = 60000;
    std::optional<std::int64_t> inputTokens; // per window
    std::optional<std::int64_t> outputTokens; // per window
    Budget perDay;
    std::vector<std::string> match;
    // The per-window limits that came from the provider's headers (`limits set --learn`), by
    // their limits.json key, ascending; every other limit is the user's (see LimitLearning).
    std::vector<std::string> learned;

    [[nodiscard]] Budget perWindow() const { return { requests, tokens, inputTokens, outputTokens }; }
    [[nodiscard]] bool matches(std::string_view className, std::string_view model) const;
    bool operator==(const ModelLimits&) const = default;
};

struct ProviderLimits
{
    std::optional<std::int64_t> requests;
    std::optional<std::int64_t> tokens;
    std::int64_t windowMs = 60000;
    std::optional<std::int64_t> parallel;
    std::int64_t headroomPercent = 100; // effective = floor(given * headroom / 100), at least 1
    std::int64_t backoffBaseMs = 60000;
    std::int64_t backoffCapMs = 15 * 60000;
    std::int64_t maxHoldMs = 10 * 60000; // a slot held longer is reported as overdue
    std::optional<std::int64_t> inputTokens; // per window
    std::optional<std::int64_t> outputTokens; // per window
    Budget perDay; // for the provider and, with their own perDay, for each class
    DayReset dayReset; // when a day starts: rolling 24 h, or a wall-clock time in a zone
    std::map<std::string, ModelLimits> models; // the model classes, by name
    // Unset per-window limits follow the provider's own (its rate-limit headers, as the proxy
    // reads them; LimitLearning); `learned` names those that did, as in ModelLimits.
    bool learn = false;
    std::vector<std::string> learned;

    [[nodiscard]] Budget perWindow() const { return { requests, tokens, inputTokens, outputTokens }; }
    // The classes a model counts in, by name (ascending); empty model: none.
    [[nodiscard]] std::vector<std::string> classesOf(std::string_view model) const;

    [[nodiscard]] std::int64_t effective(std::int64_t given) const;
    bool operator==(const ProviderLimits&) const = default;
};

class QuotaLimits
{
public:
    static constexpr std::int64_t MAX_PARALLEL = 256;
    static constexpr std::size_t MAX_PROVIDERS = 64;
    static constexpr std::size_t MAX_MODELS = 32;
    static constexpr std::int64_t MIN_WINDOW_MS = 100;
    static constexpr std::int64_t MAX_WINDOW_MS = 7LL * 24 * 3600 * 1000;
    static constexpr std::int64_t MAX_COUNT = std::int64_t(1) << 40;
    static constexpr std::int64_t MAX_BACKOFF_MS = RetryAfter::MAX_MS;
    static constexpr std::int64_t MIN_HOLD_MS = 1000;
    static constexpr std::int64_t MAX_HOLD_MS = 7LL * 24 * 3600 * 1000;
    static constexpr std::size_t MAX_PATTERNS = 16; // per class
    static constexpr std::size_t MAX_PATTERN = 128; // bytes of one pattern
    static constexpr std::size_t MAX_STARS = 3; // '*' in one pattern

    [[nodiscard]] static LimitRange range(LimitField field);
    // One value as a user gives it — a count, or seconds for the *_seconds fields — checked
    // against the field's range and converted to what ProviderLimits stores (ms for times).
    // Refused with "NAME must be between MIN and MAX (got V)" ("must be a whole number
    // between" for counts), one line; NAME is the limits.json key unless given ("--max-hold").
    [[nodiscard]] static Result<std::int64_t> check(
        LimitField field, double given, std::string_view name = {});

    [[nodiscard]] const std::map<std::string, ProviderLimits>& providers() const { return m_providers; }
    [[nodiscard]] const ProviderLimits* find(std::string_view provider) const;
    // Validates before storing; the error says which value is wrong, its range and the value.
    [[nodiscard]] Result<void> set(const std::string& provider, ProviderLimits limits);
    bool remove(const std::string& provider) { return m_providers.erase(provider) != 0; }
    [[nodiscard]] std::string knownProviders() const; // "a, b, c" or "none"

    // The history's words for a provider's limits: "100 requests, 5000 tokens per 60 s, 2 parallel".
    [[nodiscard]] static std::string summary(const ProviderLimits& limits);

    [[nodiscard]] std::string toJson() const;
    // Refuses (ErrorKind::Corrupt) any field out of range or of the wrong type, any unknown
    // or repeated key; see above.
    [[nodiscard]] static Result<QuotaLimits> fromJson(std::string_view text);

    [[nodiscard]] static Result<void> validateName(std::string_view kind, std::string_view name);
    [[nodiscard]] static Result<void> validate(const std::string& provider, const ProviderLimits& limits);

    bool operator==(const QuotaLimits&) const = default;

private:
    std::map<std::string, ProviderLimits> m_providers;
};

} // namespace tollgate
