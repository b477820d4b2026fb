#include "quotalimits.h"

#include <nlohmann/json.hpp>

namespace tollgate {

namespace {

using nlohmann::json;

Error invalid(const std::string& message)
{
    return Error::make(ErrorKind::Usage, "", message);
}

Result<void> checkWindow(const std::string& where, std::int64_t windowMs)
{
    if (windowMs < QuotaLimits::MIN_WINDOW_MS || windowMs > QuotaLimits::MAX_WINDOW_MS)
        return invalid(where + ": the window must be between 0.1 seconds and 7 days");
    return {};
}

Result<void> checkCount(const std::string& where, const char* what, const std::optional<std::int64_t>& v)
{
    if (v && (*v < 1 || *v > (std::int64_t(1) << 40)))
        return invalid(where + ": " + what + " must be a whole number of at least 1");
    return {};
}

// JSON numbers of seconds to whole milliseconds.
std::optional<std::int64_t> msFrom(const json& obj, const char* key)
{
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number())
        return std::nullopt;
    const double s = it->get<double>();
    if (!(s >= 0) || s > 1e12)
        return std::nullopt;
    return static_cast<std::int64_t>(s * 1000.0 + 0.5);
}

std::optional<std::int64_t> intFrom(const json& obj, const char* key)
{
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number_integer())
        return std::nullopt;
    return it->get<std::int64_t>();
}

bool hasNonInteger(const json& obj, const char* key)
{
    auto it = obj.find(key);
    return it != obj.end() && !it->is_null() && !it->is_number_integer();
}

bool hasNonNumber(const json& obj, const char* key)
{
    auto it = obj.find(key);
    return it != obj.end() && !it->is_number();
}

double seconds(std::int64_t ms)
{
    return static_cast<double>(ms) / 1000.0;
}

} // namespace

std::int64_t ProviderLimits::effective(std::int64_t given) const
{
    const std::int64_t e = given * headroomPercent / 100;
    return e < 1 ? 1 : e;
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
    if (auto r = checkWindow(where, l.windowMs); !r)
        return r;
    if (auto r = checkCount(where, "requests", l.requests); !r)
        return r;
    if (auto r = checkCount(where, "tokens", l.tokens); !r)
        return r;
    if (l.parallel && (*l.parallel < 1 || *l.parallel > MAX_PARALLEL))
        return invalid(where + ": parallel must be between 1 and " + std::to_string(MAX_PARALLEL));
    if (l.headroomPercent < 1 || l.headroomPercent > 100)
        return invalid(where + ": headroom must be a percentage from 1 to 100");
    if (l.backoffBaseMs < 1 || l.backoffCapMs < l.backoffBaseMs)
        return invalid(where + ": the backoff base must be positive and not above the cap");
    if (l.maxHoldMs < 1000)
        return invalid(where + ": the maximum hold time must be at least 1 second");
    if (l.models.size() > MAX_MODELS)
        return invalid(where + ": at most " + std::to_string(MAX_MODELS) + " models");
    for (const auto& [model, m] : l.models) {
        if (auto r = validateName("model", model); !r)
            return r;
        const std::string mw = where + " model '" + model + "'";
        if (auto r = checkWindow(mw, m.windowMs); !r)
            return r;
        if (auto r = checkCount(mw, "requests", m.requests); !r)
            return r;
        if (auto r = checkCount(mw, "tokens", m.tokens); !r)
            return r;
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
        p["window_seconds"] = seconds(l.windowMs);
        if (l.parallel)
            p["parallel"] = *l.parallel;
        p["headroom_percent"] = l.headroomPercent;
        p["backoff_base_seconds"] = seconds(l.backoffBaseMs);
        p["backoff_cap_seconds"] = seconds(l.backoffCapMs);
        p["max_hold_seconds"] = seconds(l.maxHoldMs);
        json models = json::object();
        for (const auto& [mname, m] : l.models) {
            json mj;
            if (m.requests)
                mj["requests"] = *m.requests;
            if (m.tokens)
                mj["tokens"] = *m.tokens;
            mj["window_seconds"] = seconds(m.windowMs);
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
    const json root = json::parse(text.begin(), text.end(), nullptr, false);
    if (root.is_discarded())
        return Error::make(ErrorKind::Corrupt, "", "not valid JSON");
    if (!root.is_object())
        return Error::make(ErrorKind::Corrupt, "", "the top level is not a JSON object");
    const auto version = intFrom(root, "version");
    if (!version || *version != 1)
        return Error::make(ErrorKind::Corrupt, "", "unknown or missing \"version\" (expected 1)");
    QuotaLimits out;
    auto it = root.find("providers");
    if (it == root.end())
        return out;
    if (!it->is_object())
        return Error::make(ErrorKind::Corrupt, "", "\"providers\" is not an object");
    for (const auto& [name, p] : it->items()) {
        const std::string where = "provider '" + name + "'";
        if (!p.is_object())
            return Error::make(ErrorKind::Corrupt, "", where + " is not an object");
        for (const char* key : { "requests", "tokens", "parallel", "headroom_percent" }) {
            if (hasNonInteger(p, key))
                return Error::make(ErrorKind::Corrupt, "", where + ": \"" + key + "\" is not a whole number");
        }
        for (const char* key : { "window_seconds", "backoff_base_seconds", "backoff_cap_seconds", "max_hold_seconds" }) {
            if (hasNonNumber(p, key) && p.contains(key))
                return Error::make(ErrorKind::Corrupt, "", where + ": \"" + key + "\" is not a number");
        }
        ProviderLimits l;
        l.requests = intFrom(p, "requests");
        l.tokens = intFrom(p, "tokens");
        l.parallel = intFrom(p, "parallel");
        l.windowMs = msFrom(p, "window_seconds").value_or(l.windowMs);
        l.headroomPercent = intFrom(p, "headroom_percent").value_or(l.headroomPercent);
        l.backoffBaseMs = msFrom(p, "backoff_base_seconds").value_or(l.backoffBaseMs);
        l.backoffCapMs = msFrom(p, "backoff_cap_seconds").value_or(l.backoffCapMs);
        l.maxHoldMs = msFrom(p, "max_hold_seconds").value_or(l.maxHoldMs);
        if (auto m = p.find("models"); m != p.end()) {
            if (!m->is_object())
                return Error::make(ErrorKind::Corrupt, "", where + ": \"models\" is not an object");
            for (const auto& [mname, mj] : m->items()) {
                if (!mj.is_object() || hasNonInteger(mj, "requests") || hasNonInteger(mj, "tokens")
                    || (mj.contains("window_seconds") && hasNonNumber(mj, "window_seconds")))
                    return Error::make(ErrorKind::Corrupt, "", where + " model '" + mname + "' is malformed");
                ModelLimits ml;
                ml.requests = intFrom(mj, "requests");
                ml.tokens = intFrom(mj, "tokens");
                ml.windowMs = msFrom(mj, "window_seconds").value_or(ml.windowMs);
                l.models[mname] = ml;
            }
        }
        if (auto r = out.set(name, std::move(l)); !r)
            return Error::make(ErrorKind::Corrupt, "", r.error().message);
    }
    return out;
}

} // namespace tollgate
