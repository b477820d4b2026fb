#pragma once

// StoreFactory: the one place that turns a home (HomeSpec) into a store and a reader, so the
// CLI and the dashboard name no concrete store and a new kind of home is a change here.

#include "backend/quotabackend.h"
#include "base/clock.h"
#include "store/filequotareader.h"
#include "store/homespec.h"
#include "store/quotareader.h"
#include "store/quotastore.h"
#include "store/redisconnection.h"
#include "system/processprobe.h"

#include <chrono>
#include <memory>
#include <string_view>

namespace tollgate {

class StoreFactory
{
public:
    // The write side: the quota's operations on the home. A directory home is created (0700)
    // when missing: the default home with its parents, a named one only as its last directory
    // (a missing parent is ErrorKind::NotFound; see HomeSpec::isDefault). A Redis home is
    // connected to (an unreachable one is an error naming the URL). `clock`: the decisions' time on a
    // directory home; on Redis the server's TIME, unless `redisTestClock` (tests) is given. `redisTimeout`:
    // the deadline of each Redis operation (connect, command and whole reply), from its start.
    [[nodiscard]] static Result<std::unique_ptr<QuotaBackend>> openBackend(const HomeSpec& home,
        const Clock& clock, const ProcessProbe& probe, const Clock* redisTestClock = nullptr,
        std::chrono::milliseconds redisTimeout = RedisConnection::DEFAULT_TIMEOUT);
    [[nodiscard]] static Result<std::unique_ptr<QuotaBackend>> openBackend(
        std::string_view home, const Clock& clock, const ProcessProbe& probe);
    // The store of a directory home (its transactions; tests and tools that need them).
    [[nodiscard]] static Result<std::unique_ptr<QuotaStore>> openStore(
        const HomeSpec& home, const Clock& clock);
    // The read side: never creates anything. A home that does not exist yet is
    // ErrorKind::NotFound (a front-end says "nothing has run here yet"); an unsafe one is
    // refused as the store would refuse it.
    [[nodiscard]] static Result<std::unique_ptr<QuotaReader>> openReader(
        const HomeSpec& home, const FileQuotaReader::Options& options = {});
    // The same from a home string (parsed with HomeSpec::parse; its refusal is the error).
    [[nodiscard]] static Result<std::unique_ptr<QuotaStore>> openStore(
        std::string_view home, const Clock& clock);
    [[nodiscard]] static Result<std::unique_ptr<QuotaReader>> openReader(
        std::string_view home, const FileQuotaReader::Options& options = {});
};

} // namespace tollgate
