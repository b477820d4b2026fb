#include "capicall.h"

#include "tollgate.h"

#include <algorithm>
#include <chrono>

namespace tollgate::capi {

namespace {
// A non-2xx body is kept this far, for what the answer means (a spend cap, an overload), as
// the proxy keeps it.
constexpr std::size_t MAX_ERROR_BODY = 65536;
// A timeout beyond this is this (a deadline far enough to be "forever", that cannot overflow).
constexpr std::int64_t MAX_TIMEOUT_MS = 365LL * 24 * 3600 * 1000;

const char* stageName(CapiCall::Stage s)
{
    switch (s) {
    case CapiCall::Stage::New:
        return "not admitted yet";
    case CapiCall::Stage::Admitted:
        return "admitted";
    case CapiCall::Stage::Done:
        return "already ended (settled, reported or released)";
    }
    return "?";
}
} // namespace

CapiCall::CapiCall(std::shared_ptr<CapiHome> home, AdmitRequest ask, std::int64_t promptTokens)
    : m_home(std::move(home))
    , m_exchange(&m_home->exchange(ask.provider))
    , m_ask(std::move(ask))
    , m_promptTokens(promptTokens)
{
}

CapiCall::~CapiCall()
{
    if (m_home->forked()) {
        // The parent's permit and connection (see the invariants): dropped, not given back.
        if (m_permit)
            m_permit->detach();
        m_store.reset();
        (void)m_connection.release();
        return;
    }
    if (m_stage == Stage::Admitted && m_permit)
        m_exchange->abandon(*m_store, *m_permit);
    close();
}

CapiStatus CapiCall::usable(Stage expected, const char* what) const
{
    if (m_home->forked())
        return CapiStatus::make(TOLLGATE_E_FORKED,
            m_home->text() + ": the home was opened by process " + std::to_string(m_home->ownerPid())
                + ", not this one (after fork(), open the home again in the child)");
    if (m_home->closed())
        return CapiStatus::make(
            TOLLGATE_E_CLOSED, m_home->text() + ": " + what + " after the home was closed");
    if (m_stage != expected)
        return CapiStatus::make(TOLLGATE_E_STATE,
            m_home->text() + ": " + what + " of a call that is " + stageName(m_stage) + " (provider '"
                + m_ask.provider + "')");
    return {};
}

CapiStatus CapiCall::admit(std::int64_t timeoutMs)
{
    if (auto s = usable(Stage::New, "admit"); !s.ok())
        return s;
    if (timeoutMs < 0)
        return CapiStatus::make(
            TOLLGATE_E_USAGE, "the timeout is negative (" + std::to_string(timeoutMs) + " ms)");
    auto connection = m_home->take();
    if (!connection)
        return CapiStatus::of(connection.error());
    m_connection = std::move(connection).value();
    m_store.emplace(*m_connection->limiter, m_connection->probe);
    // Slots this home's earlier calls could not give back (their store failed) go first.
    if (m_exchange->owesSlots())
        m_exchange->giveBackOwed(&*m_store);
    const Clock& clock = m_connection->clock;
    const auto deadline = clock.now() + std::chrono::milliseconds(std::min(timeoutMs, MAX_TIMEOUT_MS));
    auto permit = m_store->check(m_store->limiter().acquire(m_ask, deadline, &m_cancel));
    if (permit) {
        m_permit.emplace(std::move(permit).value());
        m_stage = Stage::Admitted;
        return {};
    }
    const Error& why = permit.error();
    CapiStatus s = CapiStatus::of(why);
    if (why.kind == ErrorKind::Timeout && why.path.empty()) {
        const QuotaLimiter::Refusal& refusal = m_store->limiter().lastRefusal();
        s.code = m_cancel.load()              ? TOLLGATE_E_CANCELLED
            : refusal.early || refusal.paused ? TOLLGATE_E_REFUSED
                                              : TOLLGATE_E_TIMEOUT;
        if (refusal.earliestMs)
            s.retryAfterMs = std::max<std::int64_t>(0, *refusal.earliestMs - clock.unixMs());
        if (refusal.paused && !refusal.pauseReason.empty())
            s.message += " (paused: " + refusal.pauseReason + ")";
    }
    close();
    return s;
}

CapiStatus CapiCall::end(const QuotaExchange::Answer& answer)
{
    m_exchange->settle(*m_store, *m_permit, answer, m_ask.caller, m_promptTokens);
    const bool failed = m_store->failed();
    m_stage = Stage::Done;
    close();
    if (failed)
        return CapiStatus::make(TOLLGATE_E_IO,
            m_home->text()
                + ": the store failed while the call ended (its slot, if any, is given back by a "
                  "later call of this home; its usage is not counted)");
    return {};
}

CapiStatus CapiCall::settle(std::int64_t inputTokens, std::int64_t outputTokens)
{
    if (auto s = usable(Stage::Admitted, "settle"); !s.ok())
        return s;
    if (inputTokens < -1 || outputTokens < -1)
        return CapiStatus::make(TOLLGATE_E_USAGE,
            "a usage below -1 (input " + std::to_string(inputTokens) + ", output "
                + std::to_string(outputTokens) + "; -1 is 'not known')");
    QuotaExchange::Answer answer;
    answer.answered = true;
    answer.status = 200;
    if (inputTokens >= 0 && outputTokens >= 0)
        answer.usage = TokenUsage { inputTokens, outputTokens };
    return end(answer);
}

CapiStatus CapiCall::report429(std::int64_t retryAfterMs)
{
    if (auto s = usable(Stage::Admitted, "report_429"); !s.ok())
        return s;
    if (retryAfterMs < -1)
        return CapiStatus::make(TOLLGATE_E_USAGE,
            "a Retry-After below -1 ms (" + std::to_string(retryAfterMs) + "; -1 is 'none')");
    QuotaExchange::Answer answer;
    answer.answered = true;
    answer.status = 429;
    if (retryAfterMs >= 0)
        answer.retryAfterMs = retryAfterMs;
    return end(answer);
}

CapiStatus CapiCall::release()
{
    if (auto s = usable(Stage::Admitted, "release"); !s.ok())
        return s;
    m_exchange->abandon(*m_store, *m_permit);
    const bool failed = m_store->failed();
    m_stage = Stage::Done;
    close();
    if (failed)
        return CapiStatus::make(TOLLGATE_E_IO,
            m_home->text()
                + ": the store failed while releasing (the slot is given back by a later call of this home)");
    return {};
}

CapiStatus CapiCall::headers(int status, HttpHeaders headers)
{
    if (auto s = usable(Stage::Admitted, "headers"); !s.ok())
        return s;
    if (m_answered)
        return CapiStatus::make(
            TOLLGATE_E_STATE, m_home->text() + ": the answer's headers were given already");
    if (status < 100 || status > 999)
        return CapiStatus::make(
            TOLLGATE_E_USAGE, "an HTTP status out of range (" + std::to_string(status) + ")");
    QuotaExchange::HeaderLesson lesson = m_exchange->readHeaders(headers, m_ask.model);
    lesson.fence = m_permit->fence();
    m_answered = true;
    m_answer.answered = true;
    m_answer.status = static_cast<unsigned>(status);
    m_answer.retryAfterMs = lesson.retryAfterMs;
    m_answer.planRejected = lesson.planRejected;
    std::string contentType;
    for (const auto& [name, value] : headers) {
        if (name.size() == 12 && std::equal(name.begin(), name.end(), "content-type", [](char a, char b) {
                return std::tolower(static_cast<unsigned char>(a)) == b;
            }))
            contentType = value;
    }
    m_meter.emplace(contentType);
    // Before the body: a hold must be in place before the slot goes back (as the proxy does).
    if (lesson.needsStore())
        m_exchange->learnFromHeaders(*m_store, lesson, m_ask.caller);
    return {};
}

CapiStatus CapiCall::body(std::string_view chunk)
{
    if (auto s = usable(Stage::Admitted, "body"); !s.ok())
        return s;
    if (!m_answered)
        return CapiStatus::make(TOLLGATE_E_STATE, m_home->text() + ": a body before the answer's headers");
    if (m_answer.status >= 200 && m_answer.status < 300)
        m_meter->feed(chunk);
    else if (m_answer.errorBody.size() < MAX_ERROR_BODY)
        m_answer.errorBody.append(chunk.substr(0, MAX_ERROR_BODY - m_answer.errorBody.size()));
    return {};
}

CapiStatus CapiCall::finish(bool brokenOff)
{
    if (auto s = usable(Stage::Admitted, "finish"); !s.ok())
        return s;
    if (!m_answered)
        return CapiStatus::make(TOLLGATE_E_STATE,
            m_home->text() + ": finish without the answer's headers (release a call that got no answer)");
    if (m_answer.status >= 200 && m_answer.status < 300)
        m_answer.usage = m_meter->finish();
    m_answer.brokenOff = brokenOff;
    return end(m_answer);
}

void CapiCall::close()
{
    if (m_permit) {
        m_exchange->letGo(*m_permit); // a slot the store did not take back is owed
        m_permit.reset();
    }
    const bool broken = m_store && m_store->failed();
    m_store.reset();
    m_home->give(std::move(m_connection), broken);
}

} // namespace tollgate::capi
