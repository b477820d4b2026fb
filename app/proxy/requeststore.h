#pragma once

// RequestStore: a request's lease and permit. Letting go of them is usually a mutex (the lease
// goes back to its pool), but may be store work: a permit still holding its slot releases it,
// a failed backend is closed, and one that owes its store a clean-up may be destroyed by the
// pool (see LimiterLease::lettingGoWaits). Then they go to a store thread to
// be let go of there, never on the event loop; a slot the store did not take back is owed
// (QuotaExchange::letGo).
//
// Invariant: however they go (here, on a store thread, or dropped unrun by a pool that stops),
// the permit is let go of before the lease it refers to (both live in one Held).

#include "exchange/quotaexchange.h"
#include "proxy/limiterlease.h"
#include "proxy/netcommon.h"

#include <memory>
#include <optional>

namespace tollgate::proxy {

class RequestStore
{
public:
    RequestStore(LimiterPool& pool, QuotaExchange& exchange, net::any_io_executor disposer)
        : m_held(std::make_unique<Held>(std::make_unique<LimiterLease>(pool), exchange))
        , m_disposer(std::move(disposer))
    {
    }
    ~RequestStore();
    RequestStore(const RequestStore&) = delete;
    RequestStore& operator=(const RequestStore&) = delete;

    LimiterLease& lease() { return *m_held->lease; }
    std::optional<Permit>& permit() { return m_held->permit; }

private:
    struct Held
    {
        Held(std::unique_ptr<LimiterLease> l, QuotaExchange& e)
            : lease(std::move(l))
            , exchange(e)
        {
        }
        ~Held();
        Held(const Held&) = delete;
        Held& operator=(const Held&) = delete;

        std::unique_ptr<LimiterLease> lease;
        std::optional<Permit> permit;
        QuotaExchange& exchange;
    };

    std::unique_ptr<Held> m_held;
    net::any_io_executor m_disposer;
};

} // namespace tollgate::proxy
