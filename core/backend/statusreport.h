#pragma once

// StatusReport: the quota of a home as `tollgate status --json` writes it — the one JSON shape
// that every front-end gives out (the CLI, and the C library's tollgate_status_json). Pure: it
// reads a QuotaView already taken and the time, never a store. Its field names are an
// interface (scripts read them): snake_case, null for "not set" / "not a matter of time".

#include "quota/capacity.h"
#include "quota/quotalimits.h"
#include "quota/quotastate.h"
#include "store/quotaview.h"
#include "system/processprobe.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tollgate {

class StatusReport
{
public:
    // What status shows of one provider: its limits, its settled state and core's Capacity of it.
    struct ProviderLook
    {
        const std::string& name;
        const ProviderLimits& limits;
        const ProviderState& state;
        const ProviderCapacity& capacity;
        std::int64_t now;
        bool stateLost = false; // shown as the next call restarts it (QuotaView::lostStates)
    };

    // A provider's limits (`limits show --json`, and each provider of status).
    [[nodiscard]] static nlohmann::json limitsJson(const std::string& name, const ProviderLimits& l);
    // Which host this is (machine id + pid namespace).
    [[nodiscard]] static nlohmann::json hostJson(const ProcessProbe& probe);
    [[nodiscard]] static nlohmann::json providerJson(const ProcessProbe& probe, const ProviderLook& look);
    // The whole document of a home: "home", "host", "home_exists", "paused_all", "pause_reason",
    // "data_lost", "providers". `view` null: the home does not exist yet. `view`'s state is
    // settled at `now` here (as the CLI shows it).
    [[nodiscard]] static nlohmann::json homeJson(
        const std::string& home, const QuotaView* view, std::int64_t now, const ProcessProbe& probe);
};

} // namespace tollgate
