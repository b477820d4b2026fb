#pragma once

// ReportedLimitsMemo: the provider's limits as this process last passed them to the store.
// Every answer repeats them, and a store operation per answer would cost a locked
// transaction each; the store is told only when they change or LimitMismatch::REFRESH_MS has
// passed (the store's own rule again, QuotaBackend::noteReportedLimits).
//
// Invariants: thread-safe. The figures are under m_mutex, never held across a store
// operation, so due() never waits for one; note() holds m_telling across its store operation,
// so two answers with other figures reach the store in the order the memo records them (a
// call is rare: a change, or once a minute). What the store did not take is tried again with
// the next answer. -1 stands for "not in this answer": what is kept stays.

#include <cstdint>
#include <functional>
#include <mutex>

namespace tollgate {

class ReportedLimitsMemo
{
public:
    // Tells the store (`tell`: true when it took them) of (requests, tokens) when worth it.
    void note(
        std::int64_t requests, std::int64_t tokens, std::int64_t nowMs, const std::function<bool()>& tell);
    // Whether note() would tell the store now: asked before the figures are handed to a store
    // thread (most answers repeat what the store has).
    [[nodiscard]] bool due(std::int64_t requests, std::int64_t tokens, std::int64_t nowMs);

private:
    [[nodiscard]] bool dueLocked(std::int64_t requests, std::int64_t tokens, std::int64_t nowMs) const;

    std::mutex m_telling; // held across tell(): the store gets the figures in the memo's order
    std::mutex m_mutex; // the figures below
    std::int64_t m_requests = -1;
    std::int64_t m_tokens = -1;
    std::int64_t m_atMs = 0; // 0: never told
};

} // namespace tollgate
