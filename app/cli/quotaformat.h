#pragma once

// QuotaFormat: how more than one command family writes the same things: a duration in
// seconds ("60s", "1.5s"), seconds given as an option in milliseconds, and a provider's
// limits as JSON (limits set and show, status), a subscription plan's use in words (status
// and status --watch).

#include "quota/capacity.h"
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
    // "5h 42% (resets in 3600s), 7d 63%; nearly used up", and when no window it named has reset
    // since, or " (stated 2h ago, before a reset)"; empty when the plan stated nothing to show.
    [[nodiscard]] static std::string planWords(const ProviderCapacity& cap, std::int64_t nowMs);
};

} // namespace tollgate::cli
