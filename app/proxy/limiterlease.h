#pragma once

// LimiterLease: one request's entry of the LimiterPool, from its first store operation to its
// last. Given back when the request is done, unless a store operation failed with it (then it
// is closed, and so are the pool's idle entries: the next request opens a new one).
//
// Invariants: used by one thread at a time (the request's); store() exists once open()
// succeeded and refers to the entry, so it goes first when the entry goes back.

#include "exchange/exchangestore.h"
#include "proxy/limiterpool.h"

#include <memory>
#include <optional>
#include <string>

namespace tollgate::proxy {

class LimiterLease
{
public:
    explicit LimiterLease(LimiterPool& pool)
        : m_pool(pool)
    {
    }
    ~LimiterLease();
    LimiterLease(const LimiterLease&) = delete;
    LimiterLease& operator=(const LimiterLease&) = delete;

    // Takes an entry; false with `why` when the shared quota cannot be reached.
    [[nodiscard]] bool open(std::string& why);
    QuotaLimiter& limiter() { return *m_entry->limiter; }
    // The request's store connection as QuotaExchange uses it: it notes a failure of the store
    // itself (not a refusal, a deadline or a bad value), and then this backend is not kept.
    // Its operations run on the event loop's behalf on the store strand
    // (Server::storeExecutor): the proxy's operations on a directory home go one at a time
    // rather than all racing for its lock.
    ExchangeStore& store() { return *m_store; }
    // Whether letting go of it may do store work: a failed backend is closed, not kept, and
    // closing one may talk to its store (a Redis backend gives back an admission whose reply
    // it lost: a round trip of up to 2 s).
    [[nodiscard]] bool failed() const { return m_entry && m_store && m_store->failed(); }
    // Whether letting go of it may wait for the store: a failed backend is closed, and one that
    // owes its store a clean-up (QuotaBackend::owesCleanUp) does it when it is next used or
    // destroyed, which the pool may do at once (full, or the entry too old to keep).
    [[nodiscard]] bool lettingGoWaits() const
    {
        return failed() || (m_entry && m_entry->backend && m_entry->backend->owesCleanUp());
    }

private:
    LimiterPool& m_pool;
    std::unique_ptr<LimiterPool::Entry> m_entry;
    std::optional<ExchangeStore> m_store; // over m_entry, once open
};

} // namespace tollgate::proxy
