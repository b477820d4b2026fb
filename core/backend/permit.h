#pragma once

// Permit: one admission. Holds the fencing token and, when a parallel slot was taken, gives
// the slot back when released or destroyed (RAII). detach() keeps the slot for a holder that
// outlives this object (the CLI's `acquire --slot`, whose slot belongs to the calling script
// and is reclaimed when that process dies or is released with `tollgate release`). Seen from
// another pid namespace, the slot lasts as long as its lease: a long holder calls renew().

#include "base/result.h"

#include <cstdint>
#include <string>

namespace tollgate {

class QuotaLimiter;

class Permit
{
public:
    Permit() = default;
    ~Permit();
    Permit(Permit&& other) noexcept;
    Permit& operator=(Permit&& other) noexcept;
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;

    [[nodiscard]] std::uint64_t fence() const { return m_fence; }
    [[nodiscard]] const std::string& provider() const { return m_provider; }
    [[nodiscard]] bool holdsSlot() const { return m_limiter && m_slot; }
    [[nodiscard]] std::int64_t waitedMs() const { return m_waitedMs; }
    // The backend's time of the admission (unix ms): where a later token correction lands.
    [[nodiscard]] std::int64_t admittedAtMs() const { return m_admittedAtMs; }
    // The model the admission counted in ("" when none).
    [[nodiscard]] const std::string& model() const { return m_model; }

    // How long each lease (renew()) lasts.
    [[nodiscard]] std::int64_t leaseMs() const { return m_leaseMs; }

    // Gives the slot back now; the error says why it could not.
    [[nodiscard]] Result<void> release();
    // The end of the call: gives the slot back (if it took one) with what the call really used
    // in tokens (-1: unknown, the estimate stands) and whether it succeeded — one store
    // operation (QuotaBackend::finishAdmission). Once only; then as released.
    [[nodiscard]] Result<void> finish(std::int64_t usedTokens, bool success);
    // The same with the split the provider counts (CountingRule): input and output are
    // corrected too, in every scope that limits them. -1: not known.
    [[nodiscard]] Result<void> finish(
        std::int64_t usedTokens, std::int64_t usedInputTokens, std::int64_t usedOutputTokens, bool success);
    // Extends the slot's lease by leaseMs() from now; a holder that may be judged from another
    // pid namespace calls this well within each lease. false: the slot is gone (released by
    // hand or reclaimed) — the caller no longer holds it.
    [[nodiscard]] Result<bool> renew();
    void detach() { m_limiter = nullptr; }

private:
    friend class QuotaLimiter;
    Permit(QuotaLimiter* limiter, std::string provider, std::uint64_t fence, bool slot, std::int64_t waitedMs,
        std::int64_t leaseMs, std::int64_t admittedAtMs)
        : m_limiter(limiter)
        , m_provider(std::move(provider))
        , m_fence(fence)
        , m_slot(slot)
        , m_waitedMs(waitedMs)
        , m_leaseMs(leaseMs)
        , m_admittedAtMs(admittedAtMs)
    {
    }

    QuotaLimiter* m_limiter = nullptr; // not owned; null once released or detached
    std::string m_provider;
    std::uint64_t m_fence = 0;
    bool m_slot = false;
    std::int64_t m_waitedMs = 0;
    std::int64_t m_leaseMs = 0;
    std::int64_t m_admittedAtMs = 0;
    // What the admission counted (finish() corrects it when the call took no slot).
    std::string m_model;
    std::int64_t m_tokens = 0;
    std::int64_t m_inputTokens = 0; // its split, when it had one (AdmitRequest)
    std::int64_t m_outputTokens = 0;
    std::string m_caller;
    // The slot's holder (AdmitRequest::pid, its namespace and start), for renew(): a slot the
    // state lost is taken back in its name.
    std::int64_t m_holderPid = 0;
    std::uint64_t m_holderPidNs = 0;
    std::uint64_t m_holderStartTicks = 0;
};

} // namespace tollgate
