#pragma once

// RedisStateCodec: the C++ side of the data the Redis script (redisquota.lua) keeps — limits
// in a compact JSON (times in ms, the form the script reads and compares), the state in
// MessagePack — converted with nlohmann's readers only. Everything read from Redis is input
// from outside the process: a value that does not parse or is out of bounds is an error
// naming the key, never a default.

#include "base/result.h"
#include "quota/quotalimits.h"
#include "quota/quotastate.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tollgate {

// One look at a Redis home, as the script's snapshot operation returns it.
struct RedisSnapshot
{
    std::int64_t nowMs = 0; // the server's time
    QuotaLimits limits;
    std::optional<QuotaState> state; // nullopt: no state yet
    bool homeExists = false; // the home's marker is there (limits were set at some point)
    std::string corruptKey; // what did not parse, and why (empty: all did)
    std::string corruptReason;
    bool limitsCorrupt = false;
    // The script's marker of the last loss it found (field `lost` of the state hash): when, and
    // what it found. 0: none kept (never lost, or lost again with the marker).
    std::int64_t dataLostAtMs = 0;
    std::string dataLostReason;
};

class RedisStateCodec
{
public:
    // The script's "no time" (INT64_MAX in C++): 2^53, beyond which a Lua number no longer
    // holds every integer; no real time comes near it.
    static constexpr std::int64_t NEVER = std::int64_t(1) << 53;
    // A waiter's lease on a Redis home (RedisQuotaBackend::QUEUE_LEASE): a reader discounts a
    // stall by a third of it, as the script does.
    static constexpr std::int64_t WAITER_LEASE_MS = 180000;
    // A provider state's queue is a string of tickets of this many digits each (redisquota.lua,
    // W.WIDTH: a ticket is at most NEVER, 16 digits).
    static constexpr std::size_t QUEUE_TICKET_DIGITS = 16;

    // The most bytes a stored value may have (issue 27: a 10 MB value planted in the limits key
    // made every call decode it, 1.7 s of Redis each). Larger ones are refused by name and size
    // before anything decodes them: here, and in the script (redisquota.lua checks the length
    // before it decodes; a snapshot names them instead of returning them). The largest real
    // values lie far below: one provider's limits with every class and pattern ~80 KiB, one
    // provider's state with every slot and waiter well under 1 MiB (what a state file holds for
    // all providers together).
    static constexpr std::int64_t MAX_LIMITS_BYTES = 256 * 1024; // one provider's limits (JSON)
    static constexpr std::int64_t MAX_STATE_BYTES = 2 * 1024 * 1024; // one field of the state hash
    // Fields of the limits hash a look reads at most (real ones: 64 providers).
    static constexpr std::int64_t MAX_HASH_FIELDS = 1024;
    // Fields of the state hash a look reads at most: "g", "lost", a state per provider and a
    // field per waiter (redisquota.lua, "Waiters, each in a field of its own").
    static constexpr std::int64_t MAX_STATE_FIELDS
        = MAX_HASH_FIELDS + static_cast<std::int64_t>(QuotaState::MAX_PROVIDERS * QuotaState::MAX_WAITERS);

    // The limits as the script stores and compares them: deterministic (same limits, same
    // bytes), so a compare-and-set is a string comparison on the server.
    [[nodiscard]] static std::string compactLimits(const ProviderLimits& limits);
    [[nodiscard]] static Result<ProviderLimits> parseCompactLimits(
        const std::string& provider, std::string_view text, const std::string& key);

    // A provider state as stored by the script. Slots and waiters of `myHost` get `myPidNs`
    // (so QuotaPolicy probes them here); those of other hosts get none (judged by lease).
    // stallNowMs (> 0: the server's own time): leases are moved on over the gap since the
    // provider was last served, as the script does before it judges (redisquota.lua, "Stalls").
    // waiters: the state hash's waiter records by ticket (field "q:<ticket>"), which the
    // provider's queue names.
    using WaiterRecords = std::unordered_map<std::int64_t, std::string>;
    [[nodiscard]] static Result<ProviderState> decodeProvider(std::string_view blob,
        const std::string& myHost, std::uint64_t myPidNs, std::int64_t stallNowMs = 0,
        const WaiterRecords& waiters = {});

    // The reply of the script's snapshot operation.
    [[nodiscard]] static Result<RedisSnapshot> decodeSnapshot(std::string_view reply,
        const std::string& limitsKey, const std::string& stateKey, const std::string& myHost,
        std::uint64_t myPidNs);
};

} // namespace tollgate
