#pragma once

// RedisQuotaReader: the read side of a Redis home (QuotaReader). A snapshot is one call of the
// home's script (its read-only "snapshot" operation: limits, state and the server's time of
// one instant); the history cursor reads the capped stream with XRANGE after the last entry
// it returned; the change feed is a pub/sub subscription to the home's "changed" channel, so a
// dashboard at idle puts no load on Redis. Nothing here writes to Redis.

#include "store/homespec.h"
#include "store/quotareader.h"
#include "store/redisconnection.h"

#include <chrono>
#include <memory>

namespace tollgate {

class RedisQuotaReader final : public QuotaReader
{
public:
    explicit RedisQuotaReader(
        RedisAddress address, std::chrono::milliseconds timeout = RedisConnection::DEFAULT_TIMEOUT);

    [[nodiscard]] Result<QuotaView> snapshot() override;
    [[nodiscard]] std::unique_ptr<HistoryCursor> history() const override;
    [[nodiscard]] Result<std::unique_ptr<ChangeFeed>> subscribe() const override;
    [[nodiscard]] std::string describe() const override { return m_address.url(); }

private:
    RedisAddress m_address;
    std::chrono::milliseconds m_timeout;
    std::string m_host; // this process's host id ("" when unknown: no holder is ours)
    std::uint64_t m_pidNs = 0;
    std::unique_ptr<RedisConnection> m_connection; // made on first use, again after a failure
};

} // namespace tollgate
