#include "backend/permit.h"

#include "backend/quotalimiter.h"

namespace tollgate {

Permit::~Permit()
{
    if (holdsSlot())
        (void)release();
}

Permit::Permit(Permit&& other) noexcept
    : m_limiter(other.m_limiter)
    , m_provider(std::move(other.m_provider))
    , m_fence(other.m_fence)
    , m_slot(other.m_slot)
    , m_waitedMs(other.m_waitedMs)
    , m_leaseMs(other.m_leaseMs)
    , m_admittedAtMs(other.m_admittedAtMs)
    , m_model(std::move(other.m_model))
    , m_tokens(other.m_tokens)
    , m_inputTokens(other.m_inputTokens)
    , m_outputTokens(other.m_outputTokens)
    , m_caller(std::move(other.m_caller))
    , m_holderPid(other.m_holderPid)
    , m_holderPidNs(other.m_holderPidNs)
    , m_holderStartTicks(other.m_holderStartTicks)
{
    other.m_limiter = nullptr;
}

Permit& Permit::operator=(Permit&& other) noexcept
{
    if (this != &other) {
        if (holdsSlot())
            (void)release();
        m_limiter = other.m_limiter;
        m_provider = std::move(other.m_provider);
        m_fence = other.m_fence;
        m_slot = other.m_slot;
        m_waitedMs = other.m_waitedMs;
        m_leaseMs = other.m_leaseMs;
        m_admittedAtMs = other.m_admittedAtMs;
        m_model = std::move(other.m_model);
        m_tokens = other.m_tokens;
        m_inputTokens = other.m_inputTokens;
        m_outputTokens = other.m_outputTokens;
        m_caller = std::move(other.m_caller);
        m_holderPid = other.m_holderPid;
        m_holderPidNs = other.m_holderPidNs;
        m_holderStartTicks = other.m_holderStartTicks;
        other.m_limiter = nullptr;
    }
    return *this;
}

Result<void> Permit::release()
{
    if (!holdsSlot())
        return {};
    // Given up only once the store took it back: a release that failed (the store was
    // unreachable) can be tried again — else a long-lived caller would keep the slot taken for
    // as long as it lives, since its pid stays alive (the destructor tries once more).
    auto r = m_limiter->releaseSlot(m_provider, m_fence, "");
    if (!r)
        return r.error();
    m_limiter = nullptr;
    return {};
}

Result<void> Permit::finish(std::int64_t usedTokens, bool success)
{
    return finish(usedTokens, -1, -1, success);
}

Result<void> Permit::finish(
    std::int64_t usedTokens, std::int64_t usedInputTokens, std::int64_t usedOutputTokens, bool success)
{
    if (!m_limiter)
        return {}; // finished, released or detached: the call's end is someone else's
    AdmissionEnd end;
    end.provider = m_provider;
    end.fence = m_fence;
    end.usedTokens = usedTokens;
    end.usedInputTokens = usedInputTokens;
    end.usedOutputTokens = usedOutputTokens;
    end.success = success;
    end.admittedAtMs = m_admittedAtMs;
    end.model = m_model;
    end.estimated = m_tokens;
    end.estimatedInputTokens = m_inputTokens;
    end.estimatedOutputTokens = m_outputTokens;
    end.caller = m_caller;
    auto r = m_limiter->finishAdmission(end);
    if (!r)
        return r.error();
    m_limiter = nullptr;
    return {};
}

Result<bool> Permit::renew()
{
    if (!holdsSlot())
        return false;
    Slot holder;
    holder.fence = m_fence;
    holder.pid = m_holderPid;
    holder.acquiredMs = m_admittedAtMs;
    holder.tokens = m_tokens;
    holder.caller = m_caller;
    holder.model = m_model;
    holder.pidNs = m_holderPidNs;
    holder.startTicks = m_holderStartTicks;
    holder.inputTokens = m_inputTokens;
    holder.outputTokens = m_outputTokens;
    return m_limiter->renewSlot(m_provider, m_fence, m_leaseMs, &holder);
}

} // namespace tollgate
