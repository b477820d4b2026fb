#pragma once

// QuotaFormat: how more than one command family writes the same things: a duration in
// seconds ("60s", "1.5s"), seconds given as an option in milliseconds, and a provider's
// limits as JSON (limits set and show, status).

#include "quota/quotalimits.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace tollgate::cli {

class QuotaFormat
{
public:
    // "60s" for whole seconds, else one decimal: "1.5s".
    [[nodiscard]] static std::string seconds(std::int64_t ms);
    // Saturating: llround of a value beyond int64 is undefined, and `--since 1e300` is valid input.
    [[nodiscard]] static std::int64_t toMs(double seconds);
    [[nodiscard]] static nlohmann::json limitsJson(const std::string& name, const ProviderLimits& l);
};

} // namespace tollgate::cli
