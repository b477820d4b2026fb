#pragma once

// UpstreamPool: upstream connections kept between exchanges (keep-alive to the provider): a
// request on a kept connection saves the TCP (and TLS) handshake.
//
// Invariants: a connection is kept only after an answer that ended properly, that both sides
// let go on, and whose client took it whole; it is taken again only if it is younger than
// IDLE_LIMIT and the upstream has neither closed it nor sent anything since (poll).
// Connections take and give under the mutex; a link is used by one exchange at a time.

#include "proxy/netcommon.h"

#include <memory>
#include <mutex>
#include <vector>

namespace tollgate::proxy {

// One connection to the upstream, plain or TLS (the TLS stream owns its socket).
struct UpstreamLink
{
    std::unique_ptr<tcp::socket> plain;
    std::unique_ptr<ssl::stream<tcp::socket>> tls;
    Steady::time_point idleSince;
    int fd() { return tls ? tls->next_layer().native_handle() : plain->native_handle(); }
};

class UpstreamPool
{
public:
    static constexpr std::size_t MAX_IDLE = 32;
    static constexpr std::chrono::seconds IDLE_LIMIT { 30 };

    // A kept connection still fit for a request, else nullptr.
    [[nodiscard]] std::unique_ptr<UpstreamLink> take();
    void give(std::unique_ptr<UpstreamLink> link);

private:
    std::mutex m_mutex;
    std::vector<std::unique_ptr<UpstreamLink>> m_idle; // most recently used last
};

} // namespace tollgate::proxy
