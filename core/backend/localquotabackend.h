#pragma once

// LocalQuotaBackend: the quota's operations (QuotaBackend) as QuotaPolicy run inside one
// QuotaStore transaction each — for the stores whose state this process can read and write
// under the store's exclusion: the file store (state.lock) and the memory store. Every
// transaction function here is pure in the sense of quotastore.h (it may run twice): it reads
// its inputs, writes the transaction and plain outputs it overwrites, nothing else.
// Time is the injected clock; liveness is the injected process probe.
//
// A leave that failed (the store did not answer in time) is kept and done again inside this
// backend's next transaction, of any operation: a waiter that gave up may have been handed a
// slot by a release meanwhile (QuotaPolicy::handOff), and a live process would otherwise hold
// it until it exits. Kept in this object only: a process that exits first leaves its slot to
// the probe, as any dead holder does; an object destroyed while its process lives on (the
// proxy's pool drops the backends it no longer keeps) tries them once more, for at most the
// store's shortest wait, as the Redis home's clean-up does. The list stays short: an entry
// needs a ticket, which only a committed transaction gives, and every committed transaction
// empties it (so it holds at most the waiters this object had queued when the store stopped
// answering).

#include "backend/quotabackend.h"
#include "base/clock.h"
#include "store/quotastore.h"
#include "system/processprobe.h"

#include <memory>
#include <optional>
#include <vector>

namespace tollgate {

class LocalQuotaBackend final : public QuotaBackend
{
public:
    LocalQuotaBackend(QuotaStore& store, const Clock& clock, const ProcessProbe& probe)
        : m_store(&store)
        , m_clock(&clock)
        , m_probe(&probe)
    {
    }
    // Owning the store (what StoreFactory::openBackend gives for a directory home).
    LocalQuotaBackend(std::unique_ptr<QuotaStore> store, const Clock& clock, const ProcessProbe& probe)
        : m_owned(std::move(store))
        , m_store(m_owned.get())
        , m_clock(&clock)
        , m_probe(&probe)
    {
    }

    ~LocalQuotaBackend() override;
    LocalQuotaBackend(const LocalQuotaBackend&) = delete;
    LocalQuotaBackend& operator=(const LocalQuotaBackend&) = delete;

    [[nodiscard]] Result<AdmitOutcome> admit(const AdmitStep& step) override;
    [[nodiscard]] Result<void> leaveQueue(
        const AdmitStep& step, bool gaveUp, const std::string& why) override;
    [[nodiscard]] Result<std::int64_t> report429(const std::string& provider, const std::string& caller,
        std::optional<std::int64_t> retryAfterMs, std::uint64_t jitterDraw, std::int64_t pid) override;
    [[nodiscard]] Result<void> reportSuccess(const std::string& provider, const std::string& caller) override;
    using QuotaBackend::limits;
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

    [[nodiscard]] std::uint32_t changeMark() const override { return m_store->changeMark(); }
    void waitForChange(std::uint32_t mark, std::chrono::nanoseconds timeout) const override
    {
        m_store->waitForChange(mark, timeout);
    }
    [[nodiscard]] std::string describe() const override { return m_store->describe(); }
    [[nodiscard]] bool owesCleanUp() const override { return !m_pendingLeaves.empty(); }
    [[nodiscard]] std::vector<Error> takeWarnings() override { return m_store->takeWarnings(); }

    // Leaves not done yet (see above), for tests and status.
    [[nodiscard]] std::size_t pendingLeaves() const { return m_pendingLeaves.size(); }

private:
    struct PendingLeave
    {
        std::string provider;
        std::uint64_t ticket = 0;
        std::int64_t pid = 0; // the holder's (a slot handed to it)
        std::int64_t waiterPid = 0; // the queue entry's
        std::optional<HistoryEvent> gaveUp; // made when the leave failed; stamped when done
    };

    [[nodiscard]] std::int64_t nowMs() const;
    // The store's transaction, with the pending leaves done first in the same transaction;
    // committed, they are forgotten.
    [[nodiscard]] Result<void> transact(const StoreWait& wait, const QuotaStore::TxFunction& fn);
    [[nodiscard]] Result<void> transact(const QuotaStore::TxFunction& fn)
    {
        return transact(StoreWait {}, fn);
    }
    // The store's limits update, with the pending leaves done first likewise.
    [[nodiscard]] Result<void> updateLimits(const QuotaStore::LimitsFunction& fn);
    void leavePending(QuotaTransaction& tx) const;
    // Takes the waiter `ticket` of `waiterPid` out of p's queue, or gives back the slot a
    // release handed it for `pid` (on to the next in line). Pure: it changes tx and p only.
    void leave(QuotaTransaction& tx, ProviderState& p, std::uint64_t ticket, std::int64_t pid,
        std::int64_t waiterPid) const;

    std::vector<PendingLeave> m_pendingLeaves;

    std::unique_ptr<QuotaStore> m_owned;
    QuotaStore* m_store; // not owned (or m_owned)
    const Clock* m_clock; // not owned
    const ProcessProbe* m_probe; // not owned
};

} // namespace tollgate
