#include "quota/holderstatus.h"

#include "quota/quotapolicy.h"
#include "system/hostidentity.h"

#include <algorithm>

namespace tollgate {

const char* holderStateName(HolderState s)
{
    switch (s) {
    case HolderState::Placeholder:
        return "placeholder";
    case HolderState::Alive:
        return "alive";
    case HolderState::Leased:
        return "leased";
    case HolderState::Overdue:
        return "overdue";
    case HolderState::Gone:
        return "gone";
    }
    return "gone";
}

const char* holderNamespaceName(HolderNamespace n)
{
    switch (n) {
    case HolderNamespace::Ours:
        return "ours";
    case HolderNamespace::Other:
        return "other";
    case HolderNamespace::Unknown:
        return "unknown";
    }
    return "unknown";
}

HolderStatus HolderStatus::judge(
    const Slot& s, const ProviderLimits& l, std::int64_t nowMs, const ProcessProbe& probe, bool cheap)
{
    HolderStatus h;
    h.heldMs = std::max<std::int64_t>(0, nowMs - s.acquiredMs);
    const bool ours = QuotaPolicy::sameNamespace(s.pidNs, probe);
    // A holder recorded with a host that is not ours (a Redis home) is of another pid namespace
    // for sure: the host id includes it.
    const bool elsewhere = !ours && !s.host.empty();
    h.ns = ours ? HolderNamespace::Ours
                : (s.pidNs != 0 || elsewhere ? HolderNamespace::Other : HolderNamespace::Unknown);
    if (elsewhere)
        h.host = HostIdentity::describe(s.host);
    h.whyGone = QuotaPolicy::whyHolderGone(s, l, nowMs, probe, cheap);
    if (!ours && s.pid != 0)
        h.leaseLeftMs = std::max<std::int64_t>(0, QuotaPolicy::leaseEnd(s, l) - nowMs);
    if (!h.whyGone.empty())
        h.state = HolderState::Gone;
    else if (s.pid == 0)
        h.state = HolderState::Placeholder;
    else if (h.heldMs > l.maxHoldMs)
        h.state = HolderState::Overdue;
    else
        h.state = ours ? HolderState::Alive : HolderState::Leased;
    return h;
}

} // namespace tollgate
