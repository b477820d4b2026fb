#pragma once

// HolderStatus: who holds a parallel slot, judged by the rule every transaction applies
// (QuotaPolicy::whyHolderGone): a pid is probed only from its own pid namespace; a holder in
// another (or an unknown) namespace holds the slot while its lease runs. One judgement for
// `status`, `status --json` and the dashboard's holders, so they never disagree with the
// limiter about a slot.

#include "quota/quotalimits.h"
#include "quota/quotastate.h"
#include "system/processprobe.h"

#include <cstdint>
#include <string>

namespace tollgate {

enum class HolderState : std::uint8_t {
    Placeholder, // a slot kept taken after a lost state (no pid), until it expires
    Alive, // a holder of our pid namespace that lives
    Leased, // a holder of another pid namespace, within its lease
    Overdue, // alive or leased, but held past the provider's maximum hold time
    Gone, // the next transaction frees it (died, lease or placeholder expired)
};
enum class HolderNamespace : std::uint8_t { Ours, Other, Unknown };

[[nodiscard]] const char* holderStateName(HolderState s); // "placeholder", "alive", ...
[[nodiscard]] const char* holderNamespaceName(HolderNamespace n); // "ours", "other", "unknown"

struct HolderStatus
{
    HolderState state = HolderState::Alive;
    HolderNamespace ns = HolderNamespace::Unknown;
    std::int64_t heldMs = 0; // ≥ 0
    std::int64_t leaseLeftMs = 0; // for a holder outside our namespace, ≥ 0
    std::string whyGone; // set when Gone
    // A holder of another host on a Redis home, for people: "host build-box/3f2a9c1e0b7d"
    // (HostIdentity::describe); empty for our own holders and on a directory home.
    std::string host;

    // cheap: only kill(pid, 0), no /proc reads (see QuotaPolicy::whyHolderGone).
    [[nodiscard]] static HolderStatus judge(const Slot& s, const ProviderLimits& l, std::int64_t nowMs,
        const ProcessProbe& probe, bool cheap = false);
};

} // namespace tollgate
