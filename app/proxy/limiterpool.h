#pragma once

// LimiterPool: store connections kept between requests: a backend (the home's files, or a
// Redis link) with its limiter. Opening one resolves the home and opens its files or
// connects, which costs more than a short exchange, so a connection (a curl request, the
// first request of an SDK's connection) takes a kept one.
//
// Invariants: a request holds its lease (LimiterLease) for its whole life — the permit refers
// to the limiter — and one limiter serves one request at a time, so a limiter is never used
// by two threads at once (the lease hands it over under the mutex). A lease that met a store
// failure is not kept, and none opened more than MAX_AGE ago is taken again, so a home that
// was replaced is opened afresh by the requests that start MAX_AGE later (one already
// running finishes with what it has).

#include "backend/quotabackend.h"
#include "backend/quotalimiter.h"
#include "base/result.h"
#include "base/systemclock.h"
#include "system/processprobe.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tollgate::proxy {

class LimiterPool
{
public:
    using Steady = std::chrono::steady_clock;
    static constexpr std::size_t MAX_IDLE = 64;
    static constexpr std::chrono::seconds MAX_AGE { 10 };

    struct Entry
    {
        SystemClock clock;
        ProcessProbe probe;
        std::unique_ptr<QuotaBackend> backend;
        std::unique_ptr<QuotaLimiter> limiter;
        Steady::time_point opened;
        bool directory = false; // a directory home
    };

    void setHome(std::string home);
    // A kept entry, else a new one; the error says why the shared quota cannot be reached.
    [[nodiscard]] Result<std::unique_ptr<Entry>> take();
    // Never allocates (it runs in a destructor): room for MAX_IDLE was reserved by setHome.
    // An entry not kept (the pool is full) is destroyed after the mutex is let go of.
    void give(std::unique_ptr<Entry> e);
    // A store failure with one entry (its home gone, its server away): the idle entries opened
    // on the same home are as likely stale, so they are closed, rather than each failing a
    // request of its own first (the proxy keeps more than one when operations overlap: a
    // request's and a remaining-requests word's). Never allocates; each is destroyed outside
    // the mutex (see take).
    void forgetIdle();

    // The kind of home last opened (a directory home's operations go one at a time).
    [[nodiscard]] bool directory() const { return m_directory.load(); }

private:
    std::atomic<bool> m_directory { true };
    std::string m_home; // as given: resolved for every new entry, as the CLI does
    std::mutex m_mutex;
    std::vector<std::unique_ptr<Entry>> m_idle; // most recently used last
};

} // namespace tollgate::proxy
