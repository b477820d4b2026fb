#pragma once

// CapiCall: one call of the C library (tollgate_call), from what it asks for to how it ended:
//   New       asked for (its AdmitRequest, made as the proxy's QuotaExchange::askFor makes it)
//   Admitted  a permit, and the home's connection its permit refers to, held until the end
//   Done      settled, reported or released: the slot back, the connection given back
// An admission that fails leaves it New (it may be admitted again). The end of a call is the
// proxy's: QuotaExchange::settle (real usage, a 429, what the answer's headers said) or abandon
// (no answer: the estimate stands); a slot the store did not take back is owed (letGo) and
// given back by a later admission on the same home.
//
// Invariants: used by one thread at a time, except cancel() (an atomic flag the limiter's wait
// looks at). Nothing is done in a process other than the home's owner (CapiHome::forked): there
// the permit is dropped without giving back the slot, which is the parent's.

#include "capihome.h"
#include "capistatus.h"
#include "exchange/exchangestore.h"
#include "provider/ratelimitheaders.h"
#include "provider/usagemeter.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate::capi {

class CapiCall
{
public:
    enum class Stage { New, Admitted, Done };

    // `ask`: its caller already sanitised. `promptTokens`: the prompt as estimated (what the
    // prompt estimator learns the counted share of; 0: none).
    CapiCall(std::shared_ptr<CapiHome> home, AdmitRequest ask, std::int64_t promptTokens);
    ~CapiCall();
    CapiCall(const CapiCall&) = delete;
    CapiCall& operator=(const CapiCall&) = delete;

    [[nodiscard]] CapiStatus admit(std::int64_t timeoutMs);
    void cancel() { m_cancel.store(true); }
    [[nodiscard]] CapiStatus settle(std::int64_t inputTokens, std::int64_t outputTokens);
    [[nodiscard]] CapiStatus report429(std::int64_t retryAfterMs);
    [[nodiscard]] CapiStatus release();
    [[nodiscard]] CapiStatus headers(int status, HttpHeaders headers);
    [[nodiscard]] CapiStatus body(std::string_view chunk);
    [[nodiscard]] CapiStatus finish(bool brokenOff);

    [[nodiscard]] std::uint64_t fence() const { return m_permit ? m_permit->fence() : 0; }
    [[nodiscard]] bool holdsSlot() const { return m_permit && m_permit->holdsSlot(); }
    [[nodiscard]] std::int64_t waitedMs() const { return m_permit ? m_permit->waitedMs() : 0; }
    [[nodiscard]] std::int64_t tokens() const { return m_ask.tokens; }

private:
    // Why the call cannot go on now (closed, forked, in the wrong stage); ok when it can.
    [[nodiscard]] CapiStatus usable(Stage expected, const char* what) const;
    // Settles with `answer` (the proxy's QuotaExchange::settle), then ends the call.
    [[nodiscard]] CapiStatus end(const QuotaExchange::Answer& answer);
    // Gives back the permit (owed when the store did not take it) and the connection.
    void close();

    std::shared_ptr<CapiHome> m_home;
    QuotaExchange* m_exchange; // the home's, for the provider
    AdmitRequest m_ask;
    std::int64_t m_promptTokens;
    Stage m_stage = Stage::New;
    std::atomic<bool> m_cancel { false };
    std::unique_ptr<CapiHome::Connection> m_connection; // while admitted
    std::optional<ExchangeStore> m_store; // over m_connection
    std::optional<Permit> m_permit; // refers to m_connection's limiter
    // The answer, when it is given as HTTP (headers, body, finish).
    bool m_answered = false;
    QuotaExchange::Answer m_answer;
    std::optional<UsageMeter> m_meter;
};

} // namespace tollgate::capi
