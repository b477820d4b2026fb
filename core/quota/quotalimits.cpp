#include "quota/quotalimits.h"

#include "quota/rollingwindow.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fnmatch.h>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <vector>

namespace tollgate {

static_assert(
    QuotaLimits::MAX_WINDOW_MS == RollingWindow::MAX_WINDOW_MS, "a valid window must fit a RollingWindow");

namespace {

using nlohmann::json;

Error invalid(const std::string& message)
{
    return Error::make(ErrorKind::Usage, "", message);
}

// Shortest text that reads back as the same double, as a person writes it: "-1", "0.5",
// "100000" (not "1e+05": the number the user typed comes back recognisable), "1e+300".
std::string numberText(double v)
{
    char buf[64];
    const bool whole = std::isfinite(v) && std::fabs(v) < 1e16 && v == std::trunc(v);
    const auto [end, ec] = whole ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed)
                                 : std::to_chars(buf, buf + sizeof buf, v);
    return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

double shown(const LimitRange& r, std::int64_t stored)
{
    return r.count ? static_cast<double>(stored) : static_cast<double>(stored) / 1000.0;
}

// "requests must be a whole number between 1 and 1099511627776" — the start of every refusal.
std::string mustBe(const LimitRange& r, std::string_view name, bool sayNumber, bool nullable)
{
    std::string out(name.empty() ? r.key : name);
    out += r.count ? " must be a whole number between "
                   : (sayNumber ? " must be a number between " : " must be between ");
    out += numberText(shown(r, r.min)) + " and " + numberText(shown(r, r.max));
    if (nullable)
        out += " or null";
    return out;
}

Error outOfRange(const LimitRange& r, std::string_view name, const std::string& got)
{
    return invalid(mustBe(r, name, false, false) + " (got " + got + ")");
}

// A stored value as the user wrote it, exactly: a count, or ms as decimal seconds.
std::string storedText(const LimitRange& r, std::int64_t stored)
{
    if (r.count)
        return std::to_string(stored);
    // Digit by digit, so that INT64_MIN has no absolute value to overflow.
    std::string frac;
    for (std::int64_t rest = stored % 1000, i = 0; i < 3; ++i, rest /= 10)
        frac.insert(frac.begin(), static_cast<char>('0' + (rest < 0 ? -(rest % 10) : rest % 10)));
    while (!frac.empty() && frac.back() == '0')
        frac.pop_back();
    const std::int64_t whole = stored / 1000;
    std::string out = (stored < 0 && whole == 0 ? "-" : "") + std::to_string(whole);
    return frac.empty() ? out : out + "." + frac;
}

Result<void> checkStored(const std::string& where, LimitField field, std::int64_t stored)
{
    const LimitRange r = QuotaLimits::range(field);
    if (stored < r.min || stored > r.max)
        return invalid(where + ": " + outOfRange(r, {}, storedText(r, stored)).message);
    return {};
}

Result<void> checkStored(
    const std::string& where, LimitField field, const std::optional<std::int64_t>& stored)
{
    return stored ? checkStored(where, field, *stored) : Result<void>();
}

const char* typeName(const json& v)
{
    switch (v.type()) {
    case json::value_t::null:
        return "null";
    case json::value_t::boolean:
        return "a boolean";
    case json::value_t::string:
        return "a string";
    case json::value_t::array:
        return "an array";
    case json::value_t::object:
        return "an object";
    default:
        return "something else";
    }
}

// One field of an object in limits.json: absent leaves `out` alone (the default); null clears
// it where that means "no limit"; anything else must be a number in the field's range.
Result<void> readField(const json& obj, const std::string& where, LimitField field, bool nullable,
    std::optional<std::int64_t>& out)
{
    const LimitRange r = QuotaLimits::range(field);
    auto it = obj.find(std::string(r.key));
    if (it == obj.end())
        return {};
    if (it->is_null() && nullable) {
        out.reset();
        return {};
    }
    if (!it->is_number()) {
        return Error::make(ErrorKind::Corrupt, "",
            where + ": " + mustBe(r, {}, true, nullable) + " (got " + typeName(*it) + ")");
    }
    auto v = QuotaLimits::check(field, it->get<double>());
    if (!v)
        return Error::make(ErrorKind::Corrupt, "", where + ": " + v.error().message);
    out = *v;
    return {};
}

Result<void> readField(const json& obj, const std::string& where, LimitField field, std::int64_t& out)
{
    std::optional<std::int64_t> v = out;
    if (auto r = readField(obj, where, field, false, v); !r)
        return r;
    out = *v;
    return {};
}

std::optional<std::int64_t> intFrom(const json& obj, const char* key)
{
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number_integer())
        return std::nullopt;
    return it->get<std::int64_t>();
}

double seconds(std::int64_t ms)
{
    return static_cast<double>(ms) / 1000.0;
}

// The keys this version reads, per object. Any other key is refused: a misspelt "paralel" or
// "Requests" would otherwise be skipped, and the limit the user meant to set silently gone.
// These are all the keys any version has written (the format has never renamed one).
constexpr std::string_view TOP_KEYS[] = { "version", "providers" };
constexpr std::string_view PROVIDER_KEYS[] = { "requests", "tokens", "window_seconds", "parallel",
    "headroom_percent", "backoff_base_seconds", "backoff_cap_seconds", "max_hold_seconds", "models",
    "input_tokens", "output_tokens", "per_day", "day_resets", "learn", "learned" };
constexpr std::string_view MODEL_KEYS[] = { "requests", "tokens", "window_seconds", "input_tokens",
    "output_tokens", "per_day", "match", "learned" };
constexpr std::string_view BUDGET_KEYS[] = { "requests", "tokens", "input_tokens", "output_tokens" };

// A key from the file as a message may show it: one line, at most 64 bytes, cut at a
// character boundary so the message stays valid UTF-8 (--json output dumps it).
std::string keyText(std::string_view key)
{
    std::string out(key.substr(0, 64));
    if (key.size() > out.size()) {
        while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80)
            out.pop_back();
        if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0)
            out.pop_back();
        out += "...";
    }
    for (char& c : out) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F)
            c = '?';
    }
    return out;
}

// `path` is where the object sits ("providers.p."), so the message names the exact key.
Result<void> onlyKnownKeys(
    const json& obj, const std::string& path, std::span<const std::string_view> known, std::string_view whose)
{
    for (const auto& [key, _] : obj.items()) {
        if (std::find(known.begin(), known.end(), key) != known.end())
            continue;
        std::string list;
        for (std::string_view k : known)
            list += (list.empty() ? "" : ", ") + std::string(k);
        return Error::make(ErrorKind::Corrupt, "",
            "unknown key " + path + keyText(key) + " (" + std::string(whose) + " keys are " + list + ")");
    }
    return {};
}

// nlohmann::json keeps the last of two equal keys in an object, so a hand-edited file holding
// "requests" twice would lose one value without a word. The parse notes the first key seen
// twice; the file is then refused, since which value was meant cannot be known.
class DuplicateKeys
{
public:
    bool operator()(int, json::parse_event_t event, json& parsed)
    {
        switch (event) {
        case json::parse_event_t::object_start:
        case json::parse_event_t::array_start:
            m_levels.emplace_back();
            break;
        case json::parse_event_t::object_end:
        case json::parse_event_t::array_end:
            if (!m_levels.empty())
                m_levels.pop_back();
            break;
        case json::parse_event_t::key:
            if (!m_levels.empty() && parsed.is_string()) {
                Level& top = m_levels.back();
                top.key = parsed.get_ref<const std::string&>();
                if (!top.seen.insert(top.key).second && m_first.empty())
                    m_first = path();
            }
            break;
        case json::parse_event_t::value:
            break;
        }
        return true; // keep everything: the callback only looks
    }
    // "providers.p.requests", or empty if no key was repeated.
    [[nodiscard]] const std::string& first() const { return m_first; }

private:
    struct Level
    {
        std::string key; // the current key; empty in an array
        std::set<std::string> seen;
    };

    std::string path() const
    {
        std::string out;
        for (const Level& l : m_levels) {
            if (!l.key.empty() || &l == &m_levels.back())
                out += (out.empty() ? "" : ".") + keyText(l.key);
        }
        return out;
    }

    std::vector<Level> m_levels;
    std::string m_first;
};

// The four metrics of a budget with their fields, in the order limits.json lists them.
struct BudgetField
{
    LimitField field;
    std::optional<std::int64_t> Budget::*member;
};
constexpr BudgetField BUDGET_FIELDS[] = {
    { LimitField::Requests, &Budget::requests },
    { LimitField::Tokens, &Budget::tokens },
    { LimitField::InputTokens, &Budget::inputTokens },
    { LimitField::OutputTokens, &Budget::outputTokens },
};

Result<void> checkBudget(const std::string& where, const Budget& b)
{
    for (const auto& f : BUDGET_FIELDS) {
        if (auto r = checkStored(where, f.field, b.*f.member); !r)
            return r;
    }
    return {};
}

// A day holds many windows, so a per-day limit below the per-window one of the same metric
// means the two were given the wrong way round: refused rather than read either way.
Result<void> checkDayAboveWindow(const std::string& where, const Budget& window, const Budget& day)
{
    for (const auto& f : BUDGET_FIELDS) {
        const auto& w = window.*f.member;
        const auto& d = day.*f.member;
        if (w && d && *d < *w) {
            const std::string key(QuotaLimits::range(f.field).key);
            return invalid(where + ": per_day." + key + " (" + std::to_string(*d) + ") is below " + key
                + " per window (" + std::to_string(*w) + "): a day holds many windows");
        }
    }
    return {};
}

Result<void> checkPatterns(const std::string& where, const std::vector<std::string>& patterns)
{
    if (patterns.size() > QuotaLimits::MAX_PATTERNS)
        return invalid(where + ": at most " + std::to_string(QuotaLimits::MAX_PATTERNS) + " model patterns");
    for (const std::string& p : patterns) {
        if (p.empty())
            return invalid(where + ": an empty model pattern matches no model");
        if (p.size() > QuotaLimits::MAX_PATTERN)
            return invalid(where + ": a model pattern is longer than "
                + std::to_string(QuotaLimits::MAX_PATTERN) + " bytes");
        // Matching backtracks over each *: a pattern of many, tried against a long name that does
        // not match, can take a long time (on a Redis home, inside the server for everyone).
        if (std::count(p.begin(), p.end(), '*') > static_cast<std::ptrdiff_t>(QuotaLimits::MAX_STARS))
            return invalid(where + ": model pattern '" + keyText(p) + "' has more than "
                + std::to_string(QuotaLimits::MAX_STARS) + " '*'");
        for (char c : p) {
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F || c == ',')
                return invalid(where + ": model pattern '" + keyText(p)
                    + "' holds a control character or a comma (patterns are listed apart)");
        }
    }
    return {};
}

// `learned` names per-window limits that are set, each once, ascending (as written): a mark on
// a limit that is not there, or twice, was not written by Tollgate.
Result<void> checkLearned(const std::string& where, const Budget& window, const std::vector<std::string>& learned)
{
    std::string previous;
    for (const std::string& key : learned) {
        const auto f = std::find_if(std::begin(BUDGET_FIELDS), std::end(BUDGET_FIELDS),
            [&](const BudgetField& b) { return QuotaLimits::range(b.field).key == key; });
        if (f == std::end(BUDGET_FIELDS))
            return invalid(where + ": learned names '" + keyText(key)
                + "', which is not requests, tokens, input_tokens or output_tokens");
        if (!(window.*f->member))
            return invalid(where + ": learned names " + key + ", which has no limit");
        if (!previous.empty() && key <= previous)
            return invalid(where + ": learned lists " + key + " twice or out of order");
        previous = key;
    }
    return {};
}

Result<void> readLearned(const json& obj, const std::string& where, std::vector<std::string>& out)
{
    auto it = obj.find("learned");
    if (it == obj.end())
        return {};
    if (!it->is_array())
        return Error::make(ErrorKind::Corrupt, "", where + ": \"learned\" is not a list of limit names");
    for (const auto& k : *it) {
        if (!k.is_string())
            return Error::make(ErrorKind::Corrupt, "", where + ": \"learned\" holds " + typeName(k) + ", not a name");
        out.push_back(k.get<std::string>());
    }
    return {};
}

json budgetJson(const Budget& b)
{
    json out = json::object();
    for (const auto& f : BUDGET_FIELDS) {
        if (const auto& v = b.*f.member)
            out[std::string(QuotaLimits::range(f.field).key)] = *v;
    }
    return out;
}

// "per_day" of a provider or class: an object of the four metrics (null: none).
Result<void> readBudget(const json& obj, const std::string& where, const std::string& path, Budget& out)
{
    auto it = obj.find("per_day");
    if (it == obj.end())
        return {};
    if (!it->is_object())
        return Error::make(ErrorKind::Corrupt, "", where + ": \"per_day\" is not an object");
    if (auto r = onlyKnownKeys(*it, path + "per_day.", BUDGET_KEYS, "a per_day's"); !r)
        return r;
    for (const auto& f : BUDGET_FIELDS) {
        if (auto r = readField(*it, where + " per_day", f.field, true, out.*f.member); !r)
            return r;
    }
    return {};
}

Result<void> readPatterns(const json& obj, const std::string& where, std::vector<std::string>& out)
{
    auto it = obj.find("match");
    if (it == obj.end())
        return {};
    if (!it->is_array() || it->empty())
        return Error::make(
            ErrorKind::Corrupt, "", where + ": \"match\" must be a non-empty array of model patterns");
    for (const auto& p : *it) {
        if (!p.is_string())
            return Error::make(
                ErrorKind::Corrupt, "", where + ": \"match\" holds " + typeName(p) + ", not a pattern");
        out.push_back(p.get<std::string>());
    }
    return {};
}

} // namespace

LimitRange QuotaLimits::range(LimitField field)
{
    switch (field) {
    case LimitField::Requests:
        return { "requests", 1, MAX_COUNT, true };
    case LimitField::Tokens:
        return { "tokens", 1, MAX_COUNT, true };
    case LimitField::InputTokens:
        return { "input_tokens", 1, MAX_COUNT, true };
    case LimitField::OutputTokens:
        return { "output_tokens", 1, MAX_COUNT, true };
    case LimitField::Parallel:
        return { "parallel", 1, MAX_PARALLEL, true };
    case LimitField::HeadroomPercent:
        return { "headroom_percent", 1, 100, true };
    case LimitField::WindowSeconds:
        return { "window_seconds", MIN_WINDOW_MS, MAX_WINDOW_MS, false };
    case LimitField::BackoffBaseSeconds:
        return { "backoff_base_seconds", 1, MAX_BACKOFF_MS, false };
    case LimitField::BackoffCapSeconds:
        return { "backoff_cap_seconds", 1, MAX_BACKOFF_MS, false };
    case LimitField::MaxHoldSeconds:
        return { "max_hold_seconds", MIN_HOLD_MS, MAX_HOLD_MS, false };
    }
    return { "?", 1, 1, true };
}

Result<std::int64_t> QuotaLimits::check(LimitField field, double given, std::string_view name)
{
    const LimitRange r = range(field);
    // Compared as given, before any conversion: 1e18 seconds must not wrap to a negative ms.
    // NaN fails every comparison, so it lands here too.
    if (!(given >= shown(r, r.min) && given <= shown(r, r.max)))
        return outOfRange(r, name, numberText(given));
    if (r.count) {
        if (given != std::floor(given))
            return outOfRange(r, name, numberText(given));
        return static_cast<std::int64_t>(given);
    }
    const std::int64_t ms = std::llround(given * 1000.0);
    return std::clamp(ms, r.min, r.max);
}

std::int64_t ProviderLimits::effective(std::int64_t given) const
{
    const std::int64_t e = given * headroomPercent / 100;
    return e < 1 ? 1 : e;
}

bool ModelLimits::matches(std::string_view className, std::string_view model) const
{
    if (model.empty())
        return false;
    if (match.empty())
        return model == className;
    const std::string name(model);
    for (const std::string& p : match) {
        if (::fnmatch(p.c_str(), name.c_str(), 0) == 0)
            return true;
    }
    return false;
}

std::vector<std::string> ProviderLimits::classesOf(std::string_view model) const
{
    std::vector<std::string> out;
    for (const auto& [name, m] : models) {
        if (m.matches(name, model))
            out.push_back(name);
    }
    return out;
}

const ProviderLimits* QuotaLimits::find(std::string_view provider) const
{
    auto it = m_providers.find(std::string(provider));
    return it == m_providers.end() ? nullptr : &it->second;
}

std::string QuotaLimits::knownProviders() const
{
    std::string out;
    for (const auto& [name, _] : m_providers) {
        if (!out.empty())
            out += ", ";
        out += name;
    }
    return out.empty() ? "none" : out;
}

Result<void> QuotaLimits::validateName(std::string_view kind, std::string_view name)
{
    if (name.empty() || name.size() > 64)
        return invalid(std::string(kind) + " names are 1 to 64 characters");
    for (char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.'
            || c == '_' || c == '-' || c == ':' || c == '@';
        if (!ok)
            return invalid(std::string(kind) + " name '" + std::string(name.substr(0, 64))
                + "' may only hold letters, digits and . _ - : @");
    }
    return {};
}

Result<void> QuotaLimits::validate(const std::string& provider, const ProviderLimits& l)
{
    if (auto r = validateName("provider", provider); !r)
        return r;
    const std::string where = "provider '" + provider + "'";
    for (auto r : { checkBudget(where, l.perWindow()), checkBudget(where + " per_day", l.perDay),
             checkDayAboveWindow(where, l.perWindow(), l.perDay), checkLearned(where, l.perWindow(), l.learned),
             checkStored(where, LimitField::WindowSeconds, l.windowMs),
             checkStored(where, LimitField::Parallel, l.parallel),
             checkStored(where, LimitField::HeadroomPercent, l.headroomPercent),
             checkStored(where, LimitField::BackoffBaseSeconds, l.backoffBaseMs),
             checkStored(where, LimitField::BackoffCapSeconds, l.backoffCapMs),
             checkStored(where, LimitField::MaxHoldSeconds, l.maxHoldMs) }) {
        if (!r)
            return r;
    }
    if (l.backoffBaseMs > l.backoffCapMs)
        return invalid(where + ": backoff_base_seconds (" + numberText(seconds(l.backoffBaseMs))
            + ") must not be above backoff_cap_seconds (" + numberText(seconds(l.backoffCapMs)) + ")");
    if (l.models.size() > MAX_MODELS)
        return invalid(where + ": at most " + std::to_string(MAX_MODELS) + " models");
    for (const auto& [model, m] : l.models) {
        if (auto r = validateName("model", model); !r)
            return invalid(where + ": " + r.error().message);
        const std::string mw = where + " model '" + model + "'";
        for (auto r : { checkBudget(mw, m.perWindow()), checkBudget(mw + " per_day", m.perDay),
                 checkDayAboveWindow(mw, m.perWindow(), m.perDay), checkPatterns(mw, m.match),
                 checkLearned(mw, m.perWindow(), m.learned),
                 checkStored(mw, LimitField::WindowSeconds, m.windowMs) }) {
            if (!r)
                return r;
        }
    }
    return {};
}

Result<void> QuotaLimits::set(const std::string& provider, ProviderLimits limits)
{
    if (auto r = validate(provider, limits); !r)
        return r;
    if (!m_providers.count(provider) && m_providers.size() >= MAX_PROVIDERS)
        return invalid("at most " + std::to_string(MAX_PROVIDERS) + " providers");
    m_providers[provider] = std::move(limits);
    return {};
}

std::string QuotaLimits::summary(const ProviderLimits& limits)
{
    std::string what;
    if (limits.requests)
        what += std::to_string(*limits.requests) + " requests";
    if (limits.tokens)
        what += (what.empty() ? "" : ", ") + std::to_string(*limits.tokens) + " tokens";
    if (limits.inputTokens)
        what += (what.empty() ? "" : ", ") + std::to_string(*limits.inputTokens) + " input tokens";
    if (limits.outputTokens)
        what += (what.empty() ? "" : ", ") + std::to_string(*limits.outputTokens) + " output tokens";
    if (limits.perWindow().any()) {
        char window[32];
        std::snprintf(window, sizeof window, "%g", static_cast<double>(limits.windowMs) / 1000.0);
        what += std::string(" per ") + window + " s";
    }
    if (limits.perDay.any()) {
        std::string day;
        for (const auto& f : BUDGET_FIELDS) {
            if (const auto& v = limits.perDay.*f.member) {
                std::string key(range(f.field).key);
                std::replace(key.begin(), key.end(), '_', ' ');
                day += (day.empty() ? "" : ", ") + std::to_string(*v) + " " + key;
            }
        }
        what += (what.empty() ? "" : ", ") + day + " per day"
            + (limits.dayReset.rolling() ? "" : " (resets " + limits.dayReset.text() + ")");
    }
    if (limits.parallel)
        what += ", " + std::to_string(*limits.parallel) + " parallel";
    if (limits.headroomPercent != 100)
        what += ", headroom " + std::to_string(limits.headroomPercent) + "%";
    if (limits.learn)
        what += ", learning the provider's limits";
    if (!limits.models.empty())
        what += ", " + std::to_string(limits.models.size()) + " model limit(s)";
    return what;
}

std::string QuotaLimits::toJson() const
{
    json root;
    root["version"] = 1;
    json providers = json::object();
    for (const auto& [name, l] : m_providers) {
        json p;
        if (l.requests)
            p["requests"] = *l.requests;
        if (l.tokens)
            p["tokens"] = *l.tokens;
        // The keys of this version are written only when set: a file that uses none of them
        // stays byte for byte what earlier versions wrote and read.
        if (l.inputTokens)
            p["input_tokens"] = *l.inputTokens;
        if (l.outputTokens)
            p["output_tokens"] = *l.outputTokens;
        p["window_seconds"] = seconds(l.windowMs);
        if (l.perDay.any())
            p["per_day"] = budgetJson(l.perDay);
        if (!l.dayReset.rolling())
            p["day_resets"] = l.dayReset.text();
        if (l.parallel)
            p["parallel"] = *l.parallel;
        p["headroom_percent"] = l.headroomPercent;
        p["backoff_base_seconds"] = seconds(l.backoffBaseMs);
        p["backoff_cap_seconds"] = seconds(l.backoffCapMs);
        p["max_hold_seconds"] = seconds(l.maxHoldMs);
        if (l.learn)
            p["learn"] = true;
        if (!l.learned.empty())
            p["learned"] = l.learned;
        json models = json::object();
        for (const auto& [mname, m] : l.models) {
            json mj;
            if (m.requests)
                mj["requests"] = *m.requests;
            if (m.tokens)
                mj["tokens"] = *m.tokens;
            if (m.inputTokens)
                mj["input_tokens"] = *m.inputTokens;
            if (m.outputTokens)
                mj["output_tokens"] = *m.outputTokens;
            mj["window_seconds"] = seconds(m.windowMs);
            if (m.perDay.any())
                mj["per_day"] = budgetJson(m.perDay);
            if (!m.match.empty())
                mj["match"] = m.match;
            if (!m.learned.empty())
                mj["learned"] = m.learned;
            models[mname] = mj;
        }
        if (!models.empty())
            p["models"] = models;
        providers[name] = p;
    }
    root["providers"] = providers;
    return root.dump(2) + "\n";
}

Result<QuotaLimits> QuotaLimits::fromJson(std::string_view text)
{
    DuplicateKeys duplicates;
    const json root = json::parse(text.begin(), text.end(), std::ref(duplicates), false);
    if (root.is_discarded())
        return Error::make(ErrorKind::Corrupt, "", "not valid JSON");
    if (!duplicates.first().empty()) {
        return Error::make(ErrorKind::Corrupt, "",
            "duplicate key " + duplicates.first()
                + " (each key may appear once: which value was meant is unclear)");
    }
    if (!root.is_object())
        return Error::make(ErrorKind::Corrupt, "", "the top level is not a JSON object");
    const auto version = intFrom(root, "version");
    if (!version || *version != 1)
        return Error::make(ErrorKind::Corrupt, "", "unknown or missing \"version\" (expected 1)");
    if (auto r = onlyKnownKeys(root, "", TOP_KEYS, "the top level's"); !r)
        return r.error();
    QuotaLimits out;
    auto it = root.find("providers");
    if (it == root.end())
        return out;
    if (!it->is_object())
        return Error::make(ErrorKind::Corrupt, "", "\"providers\" is not an object");
    for (const auto& [name, p] : it->items()) {
        if (auto r = validateName("provider", name); !r)
            return Error::make(ErrorKind::Corrupt, "", r.error().message);
        const std::string where = "provider '" + name + "'";
        if (!p.is_object())
            return Error::make(ErrorKind::Corrupt, "", where + " is not an object");
        if (auto r = onlyKnownKeys(p, "providers." + name + ".", PROVIDER_KEYS, "a provider's"); !r)
            return r.error();
        ProviderLimits l;
        for (auto r : { readField(p, where, LimitField::Requests, true, l.requests),
                 readField(p, where, LimitField::Tokens, true, l.tokens),
                 readField(p, where, LimitField::InputTokens, true, l.inputTokens),
                 readField(p, where, LimitField::OutputTokens, true, l.outputTokens),
                 readBudget(p, where, "providers." + name + ".", l.perDay),
                 readField(p, where, LimitField::Parallel, true, l.parallel),
                 readField(p, where, LimitField::WindowSeconds, l.windowMs),
                 readField(p, where, LimitField::HeadroomPercent, l.headroomPercent),
                 readField(p, where, LimitField::BackoffBaseSeconds, l.backoffBaseMs),
                 readField(p, where, LimitField::BackoffCapSeconds, l.backoffCapMs),
                 readField(p, where, LimitField::MaxHoldSeconds, l.maxHoldMs) }) {
            if (!r)
                return r.error();
        }
        if (auto d = p.find("day_resets"); d != p.end()) {
            if (!d->is_string())
                return Error::make(ErrorKind::Corrupt, "", where + ": \"day_resets\" is not a string");
            auto reset = DayReset::parse(d->get<std::string>());
            if (!reset)
                return Error::make(ErrorKind::Corrupt, "", where + ": " + reset.error().message);
            l.dayReset = *reset;
        }
        if (auto f = p.find("learn"); f != p.end()) {
            if (!f->is_boolean())
                return Error::make(ErrorKind::Corrupt, "", where + ": \"learn\" is not true or false");
            l.learn = f->get<bool>();
        }
        if (auto r = readLearned(p, where, l.learned); !r)
            return r.error();
        if (auto m = p.find("models"); m != p.end()) {
            if (!m->is_object())
                return Error::make(ErrorKind::Corrupt, "", where + ": \"models\" is not an object");
            for (const auto& [mname, mj] : m->items()) {
                if (auto r = validateName("model", mname); !r)
                    return Error::make(ErrorKind::Corrupt, "", where + ": " + r.error().message);
                const std::string mw = where + " model '" + mname + "'";
                if (!mj.is_object())
                    return Error::make(ErrorKind::Corrupt, "", mw + " is not an object");
                if (auto r = onlyKnownKeys(
                        mj, "providers." + name + ".models." + mname + ".", MODEL_KEYS, "a model's");
                    !r)
                    return r.error();
                ModelLimits ml;
                const std::string mpath = "providers." + name + ".models." + mname + ".";
                for (auto r : { readField(mj, mw, LimitField::Requests, true, ml.requests),
                         readField(mj, mw, LimitField::Tokens, true, ml.tokens),
                         readField(mj, mw, LimitField::InputTokens, true, ml.inputTokens),
                         readField(mj, mw, LimitField::OutputTokens, true, ml.outputTokens),
                         readBudget(mj, mw, mpath, ml.perDay), readPatterns(mj, mw, ml.match),
                         readLearned(mj, mw, ml.learned),
                         readField(mj, mw, LimitField::WindowSeconds, ml.windowMs) }) {
                    if (!r)
                        return r.error();
                }
                l.models[mname] = ml;
            }
        }
        if (auto r = out.set(name, std::move(l)); !r)
            return Error::make(ErrorKind::Corrupt, "", r.error().message);
    }
    return out;
}

} // namespace tollgate
