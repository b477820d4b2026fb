#pragma once

// QuotaLimits: what the user set, per provider (one API key's quota) and optionally per model.
// Lives in limits.json in the home directory, apart from the hot state, so a corrupt or
// deleted state never loses it. Numbers are stored as given; headroom is applied on use.

#include "result.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate {

struct ModelLimits {
    std::optional<std::int64_t> requests; // per window
    std::optional<std::int64_t> tokens; // per window
    std::int64_t windowMs = 60000;

    bool operator==(const ModelLimits&) const = default;
};

struct ProviderLimits {
    std::optional<std::int64_t> requests;
    std::optional<std::int64_t> tokens;
    std::int64_t windowMs = 60000;
    std::optional<std::int64_t> parallel;
    std::int64_t headroomPercent = 100; // effective = floor(given * headroom / 100), at least 1
    std::int64_t backoffBaseMs = 60000;
    std::int64_t backoffCapMs = 15 * 60000;
    std::int64_t maxHoldMs = 10 * 60000; // a slot held longer is reported as overdue
    std::map<std::string, ModelLimits> models;

    [[nodiscard]] std::int64_t effective(std::int64_t given) const;
    bool operator==(const ProviderLimits&) const = default;
};

class QuotaLimits {
public:
    static constexpr std::int64_t MAX_PARALLEL = 256;
    static constexpr std::size_t MAX_PROVIDERS = 64;
    static constexpr std::size_t MAX_MODELS = 32;
    static constexpr std::int64_t MIN_WINDOW_MS = 100;
    static constexpr std::int64_t MAX_WINDOW_MS = 7LL * 24 * 3600 * 1000;

    [[nodiscard]] const std::map<std::string, ProviderLimits>& providers() const { return m_providers; }
    [[nodiscard]] const ProviderLimits* find(std::string_view provider) const;
    // Validates before storing; the error says which value is wrong and why.
    [[nodiscard]] Result<void> set(const std::string& provider, ProviderLimits limits);
    bool remove(const std::string& provider) { return m_providers.erase(provider) != 0; }
    [[nodiscard]] std::string knownProviders() const; // "a, b, c" or "none"

    [[nodiscard]] std::string toJson() const;
    [[nodiscard]] static Result<QuotaLimits> fromJson(std::string_view text);

    [[nodiscard]] static Result<void> validateName(std::string_view kind, std::string_view name);
    [[nodiscard]] static Result<void> validate(const std::string& provider, const ProviderLimits& limits);

    bool operator==(const QuotaLimits&) const = default;

private:
    std::map<std::string, ProviderLimits> m_providers;
};

} // namespace tollgate
