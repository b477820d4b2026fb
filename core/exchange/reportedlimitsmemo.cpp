#include "exchange/reportedlimitsmemo.h"

#include "quota/limitmismatch.h"

namespace tollgate {

void ReportedLimitsMemo::note(
    std::int64_t requests, std::int64_t tokens, std::int64_t nowMs, const std::function<bool()>& tell)
{
    std::lock_guard order(m_telling);
    std::int64_t r = 0;
    std::int64_t t = 0;
    {
        std::lock_guard lock(m_mutex);
        r = requests < 0 ? m_requests : requests;
        t = tokens < 0 ? m_tokens : tokens;
        if (!dueLocked(r, t, nowMs))
            return;
    }
    if (!tell())
        return;
    std::lock_guard lock(m_mutex);
    m_requests = r;
    m_tokens = t;
    m_atMs = nowMs;
}

bool ReportedLimitsMemo::due(std::int64_t requests, std::int64_t tokens, std::int64_t nowMs)
{
    std::lock_guard lock(m_mutex);
    return dueLocked(requests < 0 ? m_requests : requests, tokens < 0 ? m_tokens : tokens, nowMs);
}

bool ReportedLimitsMemo::dueLocked(std::int64_t r, std::int64_t t, std::int64_t nowMs) const
{
    // A clock that went back (nowMs < m_atMs) tells again: the kept time would say "still
    // reported" for longer than it was.
    return m_atMs == 0 || r != m_requests || t != m_tokens || nowMs < m_atMs
        || nowMs - m_atMs >= LimitMismatch::REFRESH_MS;
}

} // namespace tollgate
