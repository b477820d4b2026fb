#pragma once

// ExchangeStore: the store connection one proxied request uses from its admission to its
// settling — a limiter (with its backend) and the process probe that judges its holders —
// and whether a store operation failed with it.
//
// Invariants:
// - Used by one thread at a time (the request's), never shared between requests: the proxy
//   leases a limiter to one request at a time, and this wraps the lease.
// - failed() becomes true at the first failure of the store itself (unreachable, broken, an
//   I/O error) and stays true; a refusal (Usage), a deadline (Timeout) or contention (Busy) is
//   an answer of a working store and leaves it false. A connection that failed is not kept
//   for the next request (it is closed, and the next one opens a new one).

#include "backend/quotalimiter.h"
#include "base/result.h"
#include "system/processprobe.h"

#include <utility>

namespace tollgate {

class ExchangeStore
{
public:
    ExchangeStore(QuotaLimiter& limiter, const ProcessProbe& probe)
        : m_limiter(&limiter)
        , m_probe(&probe)
    {
    }

    [[nodiscard]] QuotaLimiter& limiter() { return *m_limiter; }
    [[nodiscard]] const ProcessProbe& probe() const { return *m_probe; }
    // Whether a store operation failed with this connection (see the invariants).
    [[nodiscard]] bool failed() const { return m_failed; }

    // One store operation on the limiter, its failure noted (check).
    template <class Op> auto quick(Op op) { return check(op(*m_limiter)); }
    // Notes what a store operation returned and hands it back unchanged.
    template <class T> Result<T> check(Result<T>&& r)
    {
        if (!r && isStoreFailure(r.error()))
            m_failed = true;
        return std::move(r);
    }
    // A failure of the store itself, not an answer of a working one.
    [[nodiscard]] static bool isStoreFailure(const Error& error);

private:
    QuotaLimiter* m_limiter; // not owned: the lease's
    const ProcessProbe* m_probe; // not owned: the lease's
    bool m_failed = false;
};

} // namespace tollgate
