#pragma once

// RedisQuotaBackend: the quota's operations (QuotaBackend) on a Redis home, for callers on
// many machines. Each operation is one call of the home's Lua script (redisquota.lua), which
// applies the policy on the server atomically, in one round trip, with the server's clock:
// no client-side read-modify-write, nothing a client that dies mid-call can leave half-done.
//
// Invariants:
// - Fail closed: when Redis cannot be reached, every operation is an error naming the URL
//   (exit 3 in the CLI); nothing is admitted. The connection reconnects by itself on the next
//   operation. An operation is never re-sent after it may have reached the server.
// - Liveness: the script judges holders and waiters of other hosts by their leases; those of
//   this host (HostIdentity: machine id + pid namespace) it reports back when they stand in
//   the way, this process probes them, and names the dead ones in a second call.
// - Waking: waiters subscribe to the home's "ring" channel (pub/sub), published by every
//   operation after which capacity may have appeared; their computed retry time is the
//   fallback, and they look again at least every MAX_SLEEP (which also renews their lease).
// - Time: the server's TIME; a test may pass a clock whose time is sent with every call.

#include "backend/quotabackend.h"
#include "base/clock.h"
#include "store/homespec.h"
#include "store/redisconnection.h"
#include "system/processprobe.h"

#include <array>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>

namespace tollgate {

class RedisQuotaBackend final : public QuotaBackend
{
public:
    // Waiters look again at least this often without a ring (and so renew their lease).
    static constexpr std::chrono::milliseconds MAX_SLEEP { 5000 };
    // Events kept in the history stream (XADD MAXLEN ~: a little more may stay).
    static constexpr std::int64_t HISTORY_CAP = 100000;
    // The "format" of the home's marker key, written here and by the script (markHome).
    static constexpr std::int64_t HOME_FORMAT = 1;

    // Connects (fails closed, naming the URL). `testClock`: decisions use its time instead of
    // the server's (tests only). `timeout` bounds the connect and each admission attempt (a
    // caller's --timeout); every other operation (leaving the queue, releases, reports, the
    // giving back of lost replies) gets at least DEFAULT_TIMEOUT.
    [[nodiscard]] static Result<std::unique_ptr<RedisQuotaBackend>> open(const RedisAddress& address,
        const ProcessProbe& probe, const Clock* testClock = nullptr,
        std::chrono::milliseconds timeout = RedisConnection::DEFAULT_TIMEOUT);

    // Gives back, as best it can, what admissions whose reply was lost may have taken (a
    // caller that exits after a timed-out admit must not leave a slot behind).
    ~RedisQuotaBackend() override;

    [[nodiscard]] Result<AdmitOutcome> admit(const AdmitStep& step) override;
    [[nodiscard]] Result<void> leaveQueue(
        const AdmitStep& step, bool gaveUp, const std::string& why) override;
    [[nodiscard]] Result<std::int64_t> report429(const std::string& provider, const std::string& caller,
        std::optional<std::int64_t> retryAfterMs, std::uint64_t jitterDraw, std::int64_t pid) override;
    [[nodiscard]] Result<void> reportSuccess(const std::string& provider, const std::string& caller) override;
    using QuotaBackend::limits;
    // Each operation has its own deadline (the connection's): `wait` is not needed.
    [[nodiscard]] Result<QuotaLimits> limits(const StoreWait& wait) override;
    [[nodiscard]] Result<bool> setLimits(const std::string& provider,
        const std::optional<ProviderLimits>* expected, const ProviderLimits& limits, const std::string& who,
        std::optional<ProviderLimits>* found, const std::string& description) override;
    [[nodiscard]] Result<void> removeLimits(const std::string& provider, const std::string& who) override;
    [[nodiscard]] Result<std::vector<std::string>> importLimits(
        const QuotaLimits& incoming, bool replace, const std::string& who) override;
    [[nodiscard]] Result<void> pause(const std::string& provider, const std::string& stored,
        const std::string& why, const std::string& who) override;
    [[nodiscard]] Result<void> resume(const std::string& provider, const std::string& who) override;
    [[nodiscard]] Result<void> resetBackoff(const std::string& provider, const std::string& who) override;
    [[nodiscard]] Result<void> holdUntil(
        const std::string& provider, std::int64_t untilMs, const std::string& reason) override;
    [[nodiscard]] Result<void> correctTokens(const std::string& provider, const std::string& model,
        std::int64_t admittedAtMs, std::int64_t estimated, std::int64_t used) override;
    [[nodiscard]] Result<bool> finishAdmission(const AdmissionEnd& end) override;
    [[nodiscard]] Result<bool> noteReportedLimits(const std::string& provider, const ReportedLimits& reported,
        const PlanUsage& plan, const std::string& caller) override;
    [[nodiscard]] Result<int> releaseStale(bool overdue, const std::string& who) override;
    [[nodiscard]] Result<bool> releaseSlot(
        const std::string& provider, std::uint64_t fence, const std::string& who) override;
    [[nodiscard]] Result<bool> renewSlot(
        const std::string& provider, std::uint64_t fence, std::int64_t leaseMs, const Slot* holder) override;
    [[nodiscard]] Result<LimiterSnapshot> snapshot() override;
    [[nodiscard]] Result<void> record(const std::vector<HistoryEvent>& events) override;

    [[nodiscard]] std::uint32_t changeMark() const override;
    void waitForChange(std::uint32_t mark, std::chrono::nanoseconds timeout) const override;
    [[nodiscard]] std::chrono::milliseconds maxSleep() const override { return MAX_SLEEP; }
    [[nodiscard]] std::string describe() const override { return m_address.url(); }
    [[nodiscard]] std::vector<Error> takeWarnings() override { return {}; }

    [[nodiscard]] const std::string& host() const { return m_host; }

    // The keys and channels of a home (shared with the reader).
    [[nodiscard]] static std::vector<std::string> keys(const RedisAddress& address);
    [[nodiscard]] static std::string channelPrefix(const RedisAddress& address);

private:
    struct Call;
    RedisQuotaBackend(RedisAddress address, RedisConnection connection, const ProcessProbe& probe,
        const Clock* testClock, std::string host, std::chrono::milliseconds timeout);

    // Runs one operation (after giving back what lost replies took): the reply map, or the
    // script's refusal as an Error.
    [[nodiscard]] Result<nlohmann::json> call(const std::string& op, const std::string& args);
    // One call of the script, as sent: its MessagePack reply, or a transport error.
    [[nodiscard]] Result<std::string> send(const std::string& op, const std::string& args);
    [[nodiscard]] std::int64_t clientNowMs() const;
    [[nodiscard]] Result<void> abandonUncertain();
    // A calendar day the script asked for (needday: it has no time-zone database): four
    // consecutive day starts around this host's clock, kept for the next calls.
    [[nodiscard]] Result<void> learnDay(const std::string& dayReset);
    // The days known, as the script's ARGV[6]; days that ended are computed again.
    [[nodiscard]] std::string daysArgument();
    [[nodiscard]] Error unknownProvider(
        const std::string& provider, const std::vector<std::string>& known) const;

    RedisAddress m_address;
    std::vector<std::string> m_keys; // keys(m_address), made once
    std::string m_channelPrefix;
    std::string m_historyCap;
    mutable RedisConnection m_connection;
    const ProcessProbe* m_probe; // not owned
    const Clock* m_testClock; // not owned; null: the server's clock
    std::string m_host;
    std::chrono::milliseconds m_timeout;
    // The subscription waiters wait on (made on first use), and how many rings it has seen.
    // Admissions sent whose reply was lost (provider, request id): given back before the
    // next operation (see the script's "abandon").
    std::vector<std::pair<std::string, std::uint64_t>> m_uncertain;
    std::uint64_t m_nextRequestId;
    std::map<std::string, std::array<std::int64_t, 4>> m_days; // day reset text -> day starts
    mutable std::unique_ptr<RedisConnection> m_subscription;
    mutable std::uint32_t m_rings = 0;
};

} // namespace tollgate
