#include "proxy/requeststore.h"

namespace tollgate::proxy {

RequestStore::~RequestStore()
{
    if (!(m_held->permit && m_held->permit->holdsSlot()) && !m_held->lease->lettingGoWaits())
        return; // the permit, then the lease: a mutex at most
    try {
        // One capture: however the job ends — run, or dropped unrun by a pool that stops —
        // ~Held lets go of the permit before the lease it refers to. A post that throws
        // (no memory) destroys the job here: let go of late, but not lost.
        net::post(m_disposer, [held = std::move(m_held)]() mutable { held.reset(); });
    } catch (...) {
    }
}

RequestStore::Held::~Held()
{
    if (permit)
        exchange.letGo(*permit); // a slot the store does not take back is owed
    permit.reset(); // before the lease it refers to
    lease.reset();
}

} // namespace tollgate::proxy
