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
// - Waking: each backend subscribes to a channel of its own ("w:" and its wake key) and
//   sends the key with its admissions. The queue is strict FIFO, so after an operation that
//   may have freed capacity the script wakes only the head of the queue and the waiter after
//   it (the watcher): the cost of an admission does not grow with the crowd. The head looks
//   again every HEAD_LOOK, the watcher when the head would go stale, the rest every
//   QUEUE_LOOK (renewing a lease of 3 × QUEUE_LOOK); without a subscription every MAX_SLEEP.
//   A ring says when to look: now ("1"), or within a time ("in:<ms>": a head that cannot go
//   yet, a watcher), so that a crowd's admission costs no looks that change nothing; or that
//   a release handed the head its slot ("a:…", QuotaPolicy::handOff): the head is admitted
//   by the ring, without a call (it also finds the slot by its ticket when it looks).
// - A dead head is passed, not removed: one of another host not seen for HEAD_GRACE, or one
//   whose wake-up reached no subscriber, no longer blocks the queue; it keeps its place, and
//   is the head again as soon as it looks (a live but slow head loses nothing).
// - Time: the server's TIME; a test may pass a clock whose time is sent with every call.

#include "backend/quotabackend.h"
#include "base/clock.h"
#include "store/homespec.h"
#include "store/redisconnection.h"
#include "store/redisstatecodec.h"
#include "system/processprobe.h"

#include <array>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <utility>

namespace tollgate {

class RedisQuotaBackend final : public QuotaBackend
{
public:
    // Waiters without a wake-up subscription look again at least this often.
    static constexpr std::chrono::milliseconds MAX_SLEEP { 5000 };
    // The head of a queue looks again at least this often (it may go at any ring; the watcher
    // judges it by these looks); a head of another host not seen for HEAD_GRACE is passed.
    static constexpr std::chrono::milliseconds HEAD_LOOK { 1000 };
    static constexpr std::chrono::milliseconds HEAD_GRACE { 3000 };
    // Waiters behind the head look this often (rung when their turn comes); their lease is
    // three looks, so a dead one leaves the queue within QUEUE_LEASE.
    static constexpr std::chrono::milliseconds QUEUE_LOOK { 60000 };
    static constexpr std::chrono::milliseconds QUEUE_LEASE { 3 * QUEUE_LOOK };
    static_assert(QUEUE_LEASE.count() == RedisStateCodec::WAITER_LEASE_MS, "the reader's copy");
    static_assert(HEAD_LOOK * 2 < HEAD_GRACE, "a live head is seen twice within its grace");
    // Events kept in the history stream (XADD MAXLEN ~: a little more may stay).
    static constexpr std::int64_t HISTORY_CAP = 100000;
    // The "format" of the home's marker key, written here and by the script (markHome).
    static constexpr std::int64_t HOME_FORMAT = 1;
    // A waiter's whole life is bounded by its --timeout plus WAITER_GRACE, even while the
    // server is stopped (SIGSTOP, a stall) or gone. What may run past the deadline, each bounded:
    // one attempt at the wake-up subscription (MIN_ATTEMPT, at most once per SUBSCRIBE_RETRY),
    // the last admission attempt (at least MIN_ATTEMPT: one round trip's room, also for a try),
    // and the clean-up after it — leaving the queue and giving back what an unanswered attempt
    // may have taken — which share CLEAN_UP_BUDGET. Whatever clean-up does not get done in
    // time the server undoes by itself: a queue place ends at its deadline, a slot at its
    // holder's death (probed) or lease.
    static constexpr std::chrono::milliseconds MIN_ATTEMPT { 500 };
    static constexpr std::chrono::milliseconds SUBSCRIBE_RETRY { 1000 };
    static constexpr std::chrono::milliseconds CLEAN_UP_BUDGET { 500 };
    static constexpr std::chrono::milliseconds WAITER_GRACE { 2000 };
    static_assert(
        2 * MIN_ATTEMPT + CLEAN_UP_BUDGET < WAITER_GRACE, "room for starting and exiting the process");

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
        const QuotaLimits& incoming, bool replace, const std::string& who, bool fresh) override;
    [[nodiscard]] Result<void> pause(const std::string& provider, const std::string& stored,
        const std::string& why, const std::string& who) override;
    [[nodiscard]] Result<void> resume(const std::string& provider, const std::string& who) override;
    [[nodiscard]] Result<void> resetBackoff(const std::string& provider, const std::string& who) override;
    [[nodiscard]] Result<void> holdUntil(
        const std::string& provider, std::int64_t untilMs, const std::string& reason) override;
    [[nodiscard]] Result<void> noteRemaining(const std::string& provider, const std::string& model,
        std::int64_t left, std::int64_t untilMs, std::uint64_t fence) override;
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
    [[nodiscard]] std::optional<AdmitOutcome> takeHandOff(std::uint64_t ticket) override;
    [[nodiscard]] std::chrono::milliseconds maxSleep() const override
    {
        return m_subscription ? QUEUE_LOOK : MAX_SLEEP;
    }
    [[nodiscard]] std::string describe() const override { return m_address.url(); }
    [[nodiscard]] bool owesCleanUp() const override { return !m_uncertain.empty(); }
    // What failed after an operation's commit (its history, a wake-up): the operation happened.
    [[nodiscard]] std::vector<Error> takeWarnings() override { return std::exchange(m_warnings, {}); }

    [[nodiscard]] const std::string& host() const { return m_host; }

    // The keys and channels of a home (shared with the reader).
    [[nodiscard]] static std::vector<std::string> keys(const RedisAddress& address);
    // The server script (core/backend/redisquota.lua) with its names, made once per process.
    [[nodiscard]] static const RedisLibrary& library();
    [[nodiscard]] static std::string channelPrefix(const RedisAddress& address);

private:
    struct Call;
    RedisQuotaBackend(RedisAddress address, RedisConnection connection, const ProcessProbe& probe,
        const Clock* testClock, std::string host, std::chrono::milliseconds timeout);

    // How long one operation may wait for its answer (the connection's deadline).
    enum class Budget {
        Normal, // at least DEFAULT_TIMEOUT: not lost to a short --timeout
        Attempt, // an admission attempt: the `attempt` given
        CleanUp, // leaving the queue, giving back: what remains of CLEAN_UP_BUDGET
    };
    // Runs one operation (after giving back what lost replies took): the reply map, or the
    // script's refusal as an Error.
    [[nodiscard]] Result<nlohmann::json> call(const std::string& op, const std::string& args,
        Budget budget = Budget::Normal, std::chrono::milliseconds attempt = {});
    // One call of the script, as sent: its MessagePack reply, or a transport error.
    [[nodiscard]] Result<std::string> send(
        const std::string& op, const std::string& args, std::chrono::milliseconds timeout);
    // The time a clean-up operation may take: what remains of CLEAN_UP_BUDGET, counted from the
    // first clean-up since the last admission attempt; none left: an error (not sent).
    [[nodiscard]] Result<std::chrono::milliseconds> cleanUpTimeout();
    [[nodiscard]] std::int64_t clientNowMs() const;
    // Keeps the admission a ring carried (takeHandOff's source).
    void takeHandedRing(const std::string& payload) const;
    [[nodiscard]] Result<void> abandonUncertain(Budget budget);
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
    std::vector<Error> m_warnings; // the script's `warn`s, until taken
    // When the clean-up after the last admission attempt began (CLEAN_UP_BUDGET counts from it).
    std::optional<std::chrono::steady_clock::time_point> m_cleanUpFrom;
    // No new wake-up subscription is tried before this (one that failed is not tried at once again).
    mutable std::chrono::steady_clock::time_point m_subscribeAfter {};
    mutable std::unique_ptr<RedisConnection> m_subscription;
    std::string m_wakeKey; // this backend's channel is m_channelPrefix + "w:" + m_wakeKey
    mutable std::uint32_t m_rings = 0;
    // A ring that said when to look ("in:<ms>": the script's W.publish) rather than "now": the
    // mark moves when that time comes, unless a look (admit) came first.
    mutable std::optional<std::chrono::steady_clock::time_point> m_lookBy;
    // Admissions rings carried ("a:<ticket>:<fence>:<lease>:<now>", the script's W.handOff), by
    // ticket, until taken (a few at most: one per queued request of this process).
    mutable std::map<std::uint64_t, AdmitOutcome> m_handed;
    static constexpr std::size_t MAX_HANDED = 64;
};

} // namespace tollgate
