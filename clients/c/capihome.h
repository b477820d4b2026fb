#pragma once

// CapiHome: an open home of the C library (tollgate_home). It keeps store connections between
// calls — a backend (the home's files, or a Redis link) with its limiter, as the proxy's
// LimiterPool does — and one QuotaExchange per provider (the proxy's exchange logic: its
// reported-limits memo, its prompt estimator and the slots it owes).
//
// Invariants:
// - Thread-safe: the pool and the exchanges' map are guarded by one mutex; a connection is
//   used by one call at a time (a call takes one for its admission and gives it back when it
//   ends), so a limiter is never used by two threads at once. A QuotaExchange is thread-safe.
// - It belongs to the process that opened it (m_ownerPid): after a fork the child uses nothing
//   of it (forked()), and frees it without store work (its connections are the parent's: a
//   Redis backend's destructor may talk to the server, a permit would give back the parent's
//   slot).
// - Shared (std::shared_ptr) with its calls: closing it (closed()) leaves what a call needs to
//   give its slot back.
// - A kept connection of a directory home is taken again only while the home's path still
//   names the directory it opened (an lstat per call): a home moved away and re-created, or
//   replaced by something else, would otherwise go on being counted in the old directory, a
//   quota of its own beside the new one. Then every kept connection is dropped and a new one
//   opens the path as it is now (refused if it is no home). A call already admitted ends
//   with the connection it has.

#include "backend/quotabackend.h"
#include "backend/quotalimiter.h"
#include "base/result.h"
#include "base/systemclock.h"
#include "exchange/quotaexchange.h"
#include "store/homespec.h"
#include "system/processprobe.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tollgate::capi {

class CapiHome
{
public:
    struct Connection
    {
        SystemClock clock;
        ProcessProbe probe;
        std::unique_ptr<QuotaBackend> backend;
        std::unique_ptr<QuotaLimiter> limiter;
        // A directory home: the directory it opened (device, inode), so a kept connection is
        // never used once the path names another directory (moved and re-created) or none.
        std::uint64_t dev = 0;
        std::uint64_t ino = 0;
    };

    // Connections kept idle at most (more are closed when given back).
    static constexpr std::size_t MAX_IDLE = 16;

    // `text` empty: TOLLGATE_HOME, else the default home (HomeSpec::resolve, as the CLI).
    // Opens one connection at once: a home that cannot be reached is refused here.
    [[nodiscard]] static Result<std::shared_ptr<CapiHome>> open(std::string_view text);
    ~CapiHome();
    CapiHome(const CapiHome&) = delete;
    CapiHome& operator=(const CapiHome&) = delete;

    [[nodiscard]] const std::string& text() const { return m_text; }
    [[nodiscard]] const Clock& clock() const { return m_clock; }
    [[nodiscard]] bool forked() const { return ProcessProbe::selfPid() != m_ownerPid; }
    [[nodiscard]] std::int64_t ownerPid() const { return m_ownerPid; }
    void close() { m_closed.store(true); }
    [[nodiscard]] bool closed() const { return m_closed.load(); }

    // A kept connection, else a new one.
    [[nodiscard]] Result<std::unique_ptr<Connection>> take();
    // `broken`: a store operation failed with it: closed, not kept.
    void give(std::unique_ptr<Connection> c, bool broken);
    // The provider's exchange (made on first use; lives as long as the home).
    [[nodiscard]] QuotaExchange& exchange(const std::string& provider);
    // `tollgate status --json` of the home.
    [[nodiscard]] Result<std::string> statusJson();

private:
    explicit CapiHome(HomeSpec spec);
    [[nodiscard]] Result<std::unique_ptr<Connection>> connect() const;
    // A directory home's (device, inode) now; (0, 0) when it is not a directory (or missing).
    [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> homeIdentity() const;

    HomeSpec m_spec;
    std::string m_text;
    std::int64_t m_ownerPid;
    SystemClock m_clock;
    ProcessProbe m_probe;
    std::atomic<bool> m_closed { false };
    std::mutex m_mutex; // guards m_idle and m_exchanges
    std::vector<std::unique_ptr<Connection>> m_idle; // most recently used last
    std::map<std::string, std::unique_ptr<QuotaExchange>> m_exchanges;
};

} // namespace tollgate::capi
