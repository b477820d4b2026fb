#pragma once

#include "quota/quotalimits.h"
#include "quota/quotastate.h"

#include <optional>
#include <string>
#include <vector>

namespace tollgate {

// The limits and state of a home as of one instant, as a reader sees them.
struct QuotaView
{
    QuotaLimits limits; // empty when there are no limits
    std::optional<QuotaState> state; // nullopt: no state yet
    // Something that does not parse (a file name, or a key for other stores) and why; it is
    // left as it is (the next transaction sets it aside). Empty when none.
    std::string corruptFile;
    std::string corruptReason;
    bool limitsCorrupt = false; // what does not parse is the limits (else the state)
    // Providers with limits whose state is missing (a Redis home that lost its state key or a
    // provider's field: a restart without persistence, a flush, an eviction). `state` shows them
    // as the next operation will restart them (QuotaPolicy::fillConservatively at the server's
    // time), not as the empty windows the missing data suggests.
    std::vector<std::string> lostStates;
    // When the home last lost data, and what was found (a Redis home's marker); 0: not known.
    std::int64_t dataLostAtMs = 0;
    std::string dataLostReason;
};

} // namespace tollgate
