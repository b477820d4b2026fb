#include "backend/redisquotabackend.h"

#include "quota/limitmismatch.h"
#include "store/redisstatecodec.h"
#include "system/hostidentity.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <random>
#include <unistd.h>

namespace tollgate {

extern const char* const REDIS_QUOTA_SCRIPT;

using nlohmann::json;

const RedisLibrary& RedisQuotaBackend::library()
{
    static const RedisLibrary script { REDIS_QUOTA_SCRIPT };
    return script;
}

namespace {

std::string packed(const json& j)
{
    const std::vector<std::uint8_t> bytes = json::to_msgpack(j);
    return std::string(bytes.begin(), bytes.end());
}

std::int64_t msOf(const Clock& clock)
{
    return clock.unixMs();
}

std::int64_t intOf(const json& j, const char* key, std::int64_t fallback = 0)
{
    auto it = j.find(key);
    if (it == j.end() || !it->is_number())
        return fallback;
    return it->is_number_float() ? static_cast<std::int64_t>(it->get<double>()) : it->get<std::int64_t>();
}

bool boolOf(const json& j, const char* key)
{
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::string textOf(const json& j)
{
    if (j.is_string())
        return j.get<std::string>();
    if (j.is_binary())
        return std::string(j.get_binary().begin(), j.get_binary().end());
    return {};
}

std::vector<std::string> textsOf(const json& j, const char* key)
{
    std::vector<std::string> out;
    auto it = j.find(key);
    if (it != j.end() && it->is_array()) {
        for (const auto& v : *it)
            out.push_back(textOf(v));
    }
    return out;
}

} // namespace

std::vector<std::string> RedisQuotaBackend::keys(const RedisAddress& address)
{
    return { RedisConnection::key(address, "limits"), RedisConnection::key(address, "state"),
        RedisConnection::key(address, "history"), RedisConnection::key(address, "home"),
        RedisConnection::key(address, "corrupt") };
}

std::string RedisQuotaBackend::channelPrefix(const RedisAddress& address)
{
    return RedisConnection::key(address, "");
}

RedisQuotaBackend::RedisQuotaBackend(RedisAddress address, RedisConnection connection,
    const ProcessProbe& probe, const Clock* testClock, std::string host, std::chrono::milliseconds timeout)
    : m_address(std::move(address))
    , m_keys(keys(m_address))
    , m_channelPrefix(channelPrefix(m_address))
    , m_historyCap(std::to_string(HISTORY_CAP))
    , m_connection(std::move(connection))
    , m_probe(&probe)
    , m_testClock(testClock)
    , m_host(std::move(host))
    , m_timeout(timeout)
    , m_nextRequestId(std::random_device {}() & ((std::uint64_t(1) << 40) - 1))
{
    // Unique among the home's listeners: this process and a random part (two backends of one
    // process each have their own).
    std::random_device random;
    char key[48];
    std::snprintf(key, sizeof key, "%ld-%08x%08x", static_cast<long>(::getpid()), random(), random());
    m_wakeKey = key;
}

Result<void> RedisQuotaBackend::abandonUncertain(Budget budget)
{
    std::chrono::milliseconds timeout = std::max(m_timeout, RedisConnection::DEFAULT_TIMEOUT);
    if (budget == Budget::CleanUp) {
        auto t = cleanUpTimeout();
        if (!t)
            return t.error(); // kept in m_uncertain: tried again before the next operation
        timeout = *t;
    }
    json providers = json::array();
    json rids = json::array();
    for (const auto& [provider, rid] : m_uncertain) {
        providers.push_back(provider);
        rids.push_back(rid);
    }
    auto sent = std::move(m_uncertain);
    m_uncertain.clear();
    auto r = send("abandon", packed(json { { "providers", providers }, { "rids", rids } }), timeout);
    if (!r) {
        m_uncertain = std::move(sent); // tried again before the next operation
        return r.error();
    }
    return {};
}

Result<std::unique_ptr<RedisQuotaBackend>> RedisQuotaBackend::open(const RedisAddress& address,
    const ProcessProbe& probe, const Clock* testClock, std::chrono::milliseconds timeout)
{
    auto host = HostIdentity::current(probe.pidNamespace());
    if (!host)
        return Error::make(host.error().kind, host.error().path,
            "a Redis home needs this machine's identity to tell its holders from other hosts': "
                + host.error().message);
    auto connection = RedisConnection::open(address, timeout);
    if (!connection)
        return connection.error();
    // Opening the write side makes the home (as a directory home is created): readers then
    // see an empty home, not "nothing has run here".
    auto marked = connection->command({ "SET", RedisConnection::key(address, "home"),
        "{\"format\":" + std::to_string(HOME_FORMAT) + "}", "NX" });
    if (!marked)
        return marked.error();
    if (marked->type == RedisReply::Type::Error)
        return Error::make(ErrorKind::Io, address.url(), "Redis refused to create the home: " + marked->text);
    return std::unique_ptr<RedisQuotaBackend>(new RedisQuotaBackend(
        address, std::move(connection).value(), probe, testClock, std::move(host).value(), timeout));
}

RedisQuotaBackend::~RedisQuotaBackend()
{
    if (!m_uncertain.empty())
        (void)abandonUncertain(Budget::CleanUp);
}

Result<std::chrono::milliseconds> RedisQuotaBackend::cleanUpTimeout()
{
    const auto now = std::chrono::steady_clock::now();
    if (!m_cleanUpFrom)
        m_cleanUpFrom = now;
    const auto left
        = std::chrono::duration_cast<std::chrono::milliseconds>(*m_cleanUpFrom + CLEAN_UP_BUDGET - now);
    if (left.count() <= 0) {
        // Spent: this one is not sent. A later clean-up (a process that lives on) starts afresh.
        m_cleanUpFrom.reset();
        return Error::make(ErrorKind::Io, m_address.url(),
            "Redis did not answer in time (clean-up not sent: its time after the deadline is spent)");
    }
    return left;
}

Result<std::string> RedisQuotaBackend::send(
    const std::string& op, const std::string& args, std::chrono::milliseconds timeout)
{
    m_connection.setTimeout(timeout);
    const std::string now = m_testClock ? std::to_string(msOf(*m_testClock)) : std::string();
    auto r = m_connection.callFunction(
        library(), m_keys, { op, now, m_channelPrefix, m_historyCap, args, daysArgument() });
    if (!r) {
        Error e = r.error();
        if (e.kind == ErrorKind::Timeout) // not a refusal of the quota: the store is unreachable
            e.kind = ErrorKind::Io;
        return e;
    }
    if (r->type == RedisReply::Type::Error)
        return Error::make(ErrorKind::Io, m_address.url(), "Redis refused the operation: " + r->text);
    if (r->type != RedisReply::Type::String)
        return Error::make(
            ErrorKind::Corrupt, m_address.url(), "the Redis script answered with something else");
    return std::move(r->text);
}

Result<json> RedisQuotaBackend::call(
    const std::string& op, const std::string& args, Budget budget, std::chrono::milliseconds attempt)
{
    // Only an admission attempt is bounded by the caller's own --timeout, and the clean-up
    // after it by CLEAN_UP_BUDGET: what else follows one (a release, a report) must not be lost
    // to a short --timeout.
    if (!m_uncertain.empty()) {
        if (auto given = abandonUncertain(budget == Budget::CleanUp ? Budget::CleanUp : Budget::Normal);
            !given)
            return given.error();
    }
    std::chrono::milliseconds timeout = std::max(m_timeout, RedisConnection::DEFAULT_TIMEOUT);
    if (budget == Budget::Attempt)
        timeout = attempt;
    if (budget == Budget::CleanUp) {
        auto t = cleanUpTimeout();
        if (!t)
            return t.error();
        timeout = *t;
    }
    json j;
    // An operation that meets a calendar day the script was not given stops before it writes
    // and names it; each is learnt once (an operation may meet a few: import, release-stale).
    for (int round = 0;; ++round) {
        auto text = send(op, args, timeout);
        if (!text)
            return text.error();
        j = json::from_msgpack(text->begin(), text->end(), true, false);
        if (!j.is_object())
            return Error::make(
                ErrorKind::Corrupt, m_address.url(), "the Redis script answered with something else");
        if (textOf(j.value("err", json())) != "needday")
            break;
        if (round == 8)
            return Error::make(ErrorKind::Corrupt, m_address.url(),
                "the Redis script kept asking for calendar days (its clock and this host's differ by a "
                "day?)");
        if (auto learnt = learnDay(textOf(j.value("day", json()))); !learnt)
            return learnt.error();
    }
    if (auto err = j.find("err"); err != j.end()) {
        const std::string kind = textOf(*err);
        const std::string message = textOf(j.value("msg", json()));
        if (kind == "unknown")
            return unknownProvider(message, textsOf(j, "known"));
        if (kind == "usage")
            return Error::make(ErrorKind::Usage, "", message);
        if (kind == "busy")
            return Error::make(ErrorKind::Busy, "", message);
        if (kind == "denied")
            return Error::make(ErrorKind::Permission, m_address.url(), message);
        return Error::make(ErrorKind::Corrupt, m_address.url(), message);
    }
    if (auto warn = j.find("warn"); warn != j.end() && warn->is_string())
        m_warnings.push_back(Error::make(ErrorKind::Io, m_address.url(), warn->get<std::string>()));
    return j;
}

Error RedisQuotaBackend::unknownProvider(
    const std::string& provider, const std::vector<std::string>& known) const
{
    std::string list;
    for (const auto& k : known)
        list += (list.empty() ? "" : ", ") + k;
    if (list.empty())
        return Error::make(ErrorKind::Usage, "",
            "unknown provider '" + provider + "': the Redis home " + m_address.url()
                + " has no limits — it is new, or Redis lost its data (a restart without persistence, a "
                  "flush, "
                  "an eviction); set them with: tollgate limits set PROVIDER --requests N --window SECONDS, "
                  "or "
                  "restore an export with: tollgate limits import FILE");
    return Error::make(ErrorKind::Usage, "",
        "unknown provider '" + provider + "'; known providers: " + list
            + " (add one with: tollgate limits set PROVIDER --requests N --window SECONDS)");
}

Result<void> RedisQuotaBackend::learnDay(const std::string& dayReset)
{
    auto reset = DayReset::parse(dayReset);
    if (!reset || reset->rolling())
        return Error::make(ErrorKind::Corrupt, m_keys[0],
            "a day reset the script asked for does not parse: " + (reset ? dayReset : reset.error().message));
    const std::int64_t now = clientNowMs();
    const DayReset::Span today = reset->dayOf(now);
    m_days[dayReset] = { reset->dayOf(today.startMs - 1).startMs, today.startMs, today.endMs,
        reset->dayOf(today.endMs).endMs };
    return {};
}

std::string RedisQuotaBackend::daysArgument()
{
    if (m_days.empty())
        return {};
    const std::int64_t now = clientNowMs();
    json days = json::object();
    for (auto& [text, starts] : m_days) {
        if (now >= starts[2]) // today has ended here: the next call's "today" is another day
            (void)learnDay(text);
        days[text] = starts;
    }
    const auto packed = json::to_msgpack(days);
    return std::string(packed.begin(), packed.end());
}

std::int64_t RedisQuotaBackend::clientNowMs() const
{
    // How long a caller waited is measured by its own clock (where it started waiting), not
    // against the server's, which may be skewed from it.
    if (m_testClock)
        return msOf(*m_testClock);
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch())
        .count();
}

Result<AdmitOutcome> RedisQuotaBackend::admit(const AdmitStep& step)
{
    m_lookBy.reset(); // this look answers any ring that said when to look
    m_handed.erase(step.ticket); // and the server's answer, any ring that said we were handed a slot
    const AdmitRequest& r = step.request;
    const std::int64_t clientNow = clientNowMs();
    const std::int64_t deadlineIn = step.deadlineInMs
        ? *step.deadlineInMs
        : std::clamp(r.deadlineMs, clientNow - RedisStateCodec::NEVER, clientNow + RedisStateCodec::NEVER)
            - clientNow;
    // A field at its default (zero, false, empty) is left out: the script reads it as that
    // (ADMIT_DEFAULTS in redisquota.lua). Every call is an admission: unpacking 23 fields
    // where 9 are needed was a tenth of its server time.
    json a = { { "host", m_host }, { "provider", r.provider }, { "caller", r.caller }, { "pid", r.pid },
        { "wpid", r.waiterPid }, { "st", r.startTicks }, { "wst", r.waiterStartTicks } };
    const auto unlessZero = [&a](const char* key, auto value) {
        if (value != decltype(value) {})
            a[key] = value;
    };
    unlessZero("model", r.model);
    unlessZero("tokens", r.tokens);
    unlessZero("in", r.inputTokens);
    unlessZero("out", r.outputTokens);
    unlessZero("est", r.estimated);
    unlessZero("slot", r.wantsSlot);
    unlessZero("ho", r.takesHandOff);
    unlessZero("deadlineIn", deadlineIn);
    unlessZero("lease", r.leaseMs);
    unlessZero("ticket", step.ticket);
    unlessZero("enqueue", step.enqueue);
    unlessZero("waited", clientNow - step.startMs);
    if (step.firstReason != WaitReason::None)
        a["first"] = waitReasonName(step.firstReason);
    // Rung on its own channel only while it listens there (else it looks every MAX_SLEEP).
    if (m_subscription)
        a["wake"] = m_wakeKey;
    std::vector<std::uint64_t> deadF;
    std::vector<std::uint64_t> deadT;
    // The attempt ends by the caller's deadline (the last look, at the deadline, still gets one
    // round trip's room): a stopped server must not keep a waiter past it.
    m_cleanUpFrom.reset();
    std::chrono::milliseconds attempt = m_timeout;
    if (step.storeWait.deadline != std::chrono::steady_clock::time_point::max()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            step.storeWait.deadline - std::chrono::steady_clock::now());
        attempt = std::clamp(left, MIN_ATTEMPT, std::max(m_timeout, MIN_ATTEMPT));
    }
    // Each round names more dead holders or waiters of this host; the queue's head can only
    // be probed once it is the head, so a few rounds may be needed (bounded).
    for (int round = 0;; ++round) {
        if (!deadF.empty())
            a["deadF"] = deadF;
        if (!deadT.empty())
            a["deadT"] = deadT;
        // The acquire's id, kept with the slot or queue place it takes (any of its calls).
        const std::uint64_t rid
            = step.requestId != 0 ? step.requestId : (m_nextRequestId++ & ((std::uint64_t(1) << 53) - 1));
        a["rid"] = rid;
        auto reply = call("admit", packed(a), Budget::Attempt, attempt);
        if (!reply) {
            // A transport failure may come after the server ran the call: what it may have
            // taken is given back before the next operation (not re-sent: that could admit twice).
            if (reply.error().path == m_address.url() && reply.error().kind == ErrorKind::Io)
                m_uncertain.emplace_back(r.provider, rid);
            return reply.error();
        }
        const json& j = *reply;
        AdmitOutcome out;
        out.decision.admitted = boolOf(j, "admitted");
        out.decision.reason = static_cast<WaitReason>(std::clamp<std::int64_t>(intOf(j, "reason"), 0, 6));
        const std::int64_t retryAt = intOf(j, "retryAt", -1);
        out.decision.retryAtMs = retryAt < 0 ? INT64_MAX : retryAt;
        out.decision.fence = static_cast<std::uint64_t>(intOf(j, "fence"));
        out.decision.ticket = static_cast<std::uint64_t>(intOf(j, "ticket"));
        out.decision.slotTaken = boolOf(j, "slotTaken");
        out.leaseMs = intOf(j, "lease");
        out.nowMs = intOf(j, "now");
        out.lookAgainInMs = std::clamp<std::int64_t>(intOf(j, "lookIn", -1), -1, QUEUE_LOOK.count());
        bool named = false;
        if (auto s = j.find("suspects"); s != j.end() && s->is_array() && round < 8) {
            for (const auto& who : *s) {
                const std::int64_t pid = intOf(who, "pid");
                const auto start = static_cast<std::uint64_t>(intOf(who, "st"));
                if (pid <= 0 || m_probe->holderLiveness(pid, start) != Liveness::Dead)
                    continue;
                const auto id = static_cast<std::uint64_t>(intOf(who, "id"));
                (textOf(who.value("k", json())) == "s" ? deadF : deadT).push_back(id);
                named = true;
            }
        }
        if (!named)
            return out;
        a["ticket"] = out.decision.ticket; // kept (or newly queued) by this round
    }
}

Result<void> RedisQuotaBackend::leaveQueue(const AdmitStep& step, bool gaveUp, const std::string& why)
{
    const AdmitRequest& r = step.request;
    m_handed.erase(step.ticket); // a ring that came too late: the leave gives that slot back
    json a = { { "provider", r.provider }, { "ticket", step.ticket }, { "gaveUp", gaveUp }, { "why", why },
        { "caller", r.caller }, { "model", r.model }, { "pid", r.pid }, { "tokens", r.tokens },
        { "waited", clientNowMs() - step.startMs }, { "hh", m_host } };
    auto reply = call("leave", packed(a), Budget::CleanUp);
    if (!reply) {
        // The queue place stays unless given back later (its holder is alive: no one else
        // would take it away before its deadline).
        if (reply.error().path == m_address.url() && reply.error().kind == ErrorKind::Io
            && step.requestId != 0)
            m_uncertain.emplace_back(r.provider, step.requestId);
        return reply.error();
    }
    return {};
}

Result<std::int64_t> RedisQuotaBackend::report429(const std::string& provider, const std::string& caller,
    std::optional<std::int64_t> retryAfterMs, std::uint64_t jitterDraw, std::int64_t pid)
{
    json a = { { "provider", provider }, { "caller", caller }, { "ra", retryAfterMs.value_or(-1) },
        { "draw", jitterDraw >> 32 }, { "pid", pid > 0 ? pid : ProcessProbe::selfPid() } };
    auto reply = call("report429", packed(a));
    if (!reply)
        return reply.error();
    const json& j = *reply;
    return intOf(j, "backoff");
}

Result<void> RedisQuotaBackend::reportSuccess(const std::string& provider, const std::string& caller)
{
    auto reply = call("success", packed(json { { "provider", provider }, { "caller", caller } }));
    if (!reply)
        return reply.error();
    return {};
}

Result<QuotaLimits> RedisQuotaBackend::limits(const StoreWait& /*wait*/)
{
    // Through the script's look, which returns no value larger than a provider's limits may be
    // (a planted one is named with its size instead: never copied here, never decoded).
    auto text = send("snapshot", packed(json { { "limitsOnly", true } }),
        std::max(m_timeout, RedisConnection::DEFAULT_TIMEOUT));
    if (!text)
        return text.error();
    auto s = RedisStateCodec::decodeSnapshot(*text, m_keys[0], m_keys[1], "", 0);
    if (!s)
        return s.error();
    if (s->limitsCorrupt)
        return Error::make(ErrorKind::Corrupt, s->corruptKey, s->corruptReason);
    return std::move(s->limits);
}

namespace {

} // namespace

Result<bool> RedisQuotaBackend::setLimits(const std::string& provider,
    const std::optional<ProviderLimits>* expected, const ProviderLimits& limits, const std::string& who,
    std::optional<ProviderLimits>* found, const std::string& description)
{
    if (auto v = QuotaLimits::validate(provider, limits); !v)
        return v.error();
    json a = { { "provider", provider }, { "limits", RedisStateCodec::compactLimits(limits) },
        { "reason",
            HistoryEvent::byWhom(description.empty() ? QuotaLimits::summary(limits) : description, who) },
        { "expect", expected == nullptr ? 0 : (expected->has_value() ? 2 : 1) } };
    if (expected && expected->has_value())
        a["expected"] = RedisStateCodec::compactLimits(**expected);
    auto reply = call("setLimits", packed(a));
    if (!reply)
        return reply.error();
    const json& j = *reply;
    if (found) {
        const std::string text = textOf(j.value("found", json()));
        found->reset();
        if (!text.empty()) {
            auto l = RedisStateCodec::parseCompactLimits(provider, text, m_keys[0]);
            if (!l)
                return l.error();
            *found = *l;
        }
    }
    return boolOf(j, "set");
}

Result<void> RedisQuotaBackend::removeLimits(const std::string& provider, const std::string& who)
{
    auto reply = call("removeLimits", packed(json { { "provider", provider }, { "who", who } }));
    if (!reply)
        return reply.error();
    return {};
}

Result<std::vector<std::string>> RedisQuotaBackend::importLimits(
    const QuotaLimits& incoming, bool replace, const std::string& who, bool fresh)
{
    json names = json::array();
    json values = json::array();
    for (const auto& [name, l] : incoming.providers()) {
        if (auto v = QuotaLimits::validate(name, l); !v)
            return v.error();
        names.push_back(name);
        values.push_back(RedisStateCodec::compactLimits(l));
    }
    auto reply = call("importLimits",
        packed(json { { "replace", replace }, { "who", who }, { "names", names }, { "values", values },
            { "fresh", fresh } }));
    if (!reply)
        return reply.error();
    const json& j = *reply;
    return textsOf(j, "changed");
}

Result<void> RedisQuotaBackend::pause(
    const std::string& provider, const std::string& stored, const std::string& why, const std::string& who)
{
    auto reply = call("pause",
        packed(json {
            { "provider", provider }, { "stored", stored }, { "reason", HistoryEvent::byWhom(why, who) } }));
    if (!reply)
        return reply.error();
    return {};
}

Result<void> RedisQuotaBackend::resume(const std::string& provider, const std::string& who)
{
    auto reply = call(
        "resume", packed(json { { "provider", provider }, { "reason", who.empty() ? "" : "by " + who } }));
    if (!reply)
        return reply.error();
    return {};
}

Result<void> RedisQuotaBackend::resetBackoff(const std::string& provider, const std::string& who)
{
    auto reply = call("resetBackoff",
        packed(json { { "provider", provider }, { "reason", who.empty() ? "" : "by " + who } }));
    if (!reply)
        return reply.error();
    return {};
}

Result<void> RedisQuotaBackend::holdUntil(
    const std::string& provider, std::int64_t untilMs, const std::string& reason)
{
    // Sent as a distance from this host's now and placed on the server's clock there: a host
    // whose clock is off holds the provider for the time it meant, not more or less.
    const std::int64_t now = clientNowMs();
    const std::int64_t in
        = std::clamp(untilMs, now - RedisStateCodec::NEVER, now + RedisStateCodec::NEVER) - now;
    auto reply
        = call("hold", packed(json { { "provider", provider }, { "untilIn", in }, { "reason", reason } }));
    if (!reply)
        return reply.error();
    return {};
}

Result<void> RedisQuotaBackend::noteRemaining(const std::string& provider, const std::string& model,
    std::int64_t left, std::int64_t untilMs, std::uint64_t fence)
{
    // The reset as a distance from this host's now, placed on the server's clock (as holdUntil).
    const std::int64_t now = clientNowMs();
    const std::int64_t in
        = std::clamp(untilMs, now - RedisStateCodec::NEVER, now + RedisStateCodec::NEVER) - now;
    auto reply = call("remaining",
        packed(json { { "provider", provider }, { "model", model },
            { "left", std::clamp<std::int64_t>(left, 0, std::int64_t(1) << 40) }, { "untilIn", in },
            { "fence", std::min<std::uint64_t>(fence, std::uint64_t(1) << 53) } }));
    if (!reply)
        return reply.error();
    return {};
}

Result<void> RedisQuotaBackend::correctTokens(const std::string& provider, const std::string& model,
    std::int64_t admittedAtMs, std::int64_t estimated, std::int64_t used)
{
    auto reply = call("correctTokens",
        packed(json { { "provider", provider }, { "model", model }, { "at", admittedAtMs },
            { "estimated", std::clamp<std::int64_t>(estimated, 0, RollingWindow::MAX_BUCKET_COUNT) },
            { "used", std::clamp<std::int64_t>(used, 0, RollingWindow::MAX_BUCKET_COUNT) } }));
    if (!reply)
        return reply.error();
    return {};
}

Result<int> RedisQuotaBackend::releaseStale(bool overdue, const std::string& who)
{
    // Holders and waiters of this host are probed here first; the script judges the rest.
    auto snap = snapshot();
    if (!snap)
        return snap.error();
    std::vector<std::uint64_t> deadF;
    std::vector<std::uint64_t> deadT;
    for (const auto& p : snap->state.providers) {
        for (const auto& s : p.slots) {
            if (s.host == m_host && s.pid > 0
                && m_probe->holderLiveness(s.pid, s.startTicks) == Liveness::Dead)
                deadF.push_back(s.fence);
        }
        for (const auto& w : p.queue) {
            if (w.host == m_host && w.pid > 0
                && m_probe->holderLiveness(w.pid, w.startTicks) == Liveness::Dead)
                deadT.push_back(w.ticket);
        }
    }
    auto reply = call("releaseStale",
        packed(json { { "host", m_host }, { "overdue", overdue }, { "who", who }, { "deadF", deadF },
            { "deadT", deadT } }));
    if (!reply)
        return reply.error();
    const json& j = *reply;
    return static_cast<int>(intOf(j, "released"));
}

Result<bool> RedisQuotaBackend::releaseSlot(
    const std::string& provider, std::uint64_t fence, const std::string& who)
{
    auto reply = call("releaseSlot",
        packed(json { { "hh", m_host }, { "provider", provider }, { "fence", fence }, { "who", who } }));
    if (!reply)
        return reply.error();
    const json& j = *reply;
    return boolOf(j, "found");
}

Result<bool> RedisQuotaBackend::finishAdmission(const AdmissionEnd& end)
{
    auto reply = call("finishAdmission",
        packed(json { { "provider", end.provider }, { "fence", end.fence },
            { "used", end.usedTokens < 0 ? -1 : std::min(end.usedTokens, RollingWindow::MAX_BUCKET_COUNT) },
            { "ok", end.success }, { "at", std::max<std::int64_t>(0, end.admittedAtMs) },
            { "model", end.model },
            { "estimated", std::clamp<std::int64_t>(end.estimated, 0, RollingWindow::MAX_BUCKET_COUNT) },
            { "usedIn", std::min(end.usedInputTokens, RollingWindow::MAX_BUCKET_COUNT) },
            { "usedOut", std::min(end.usedOutputTokens, RollingWindow::MAX_BUCKET_COUNT) },
            { "estIn",
                std::clamp<std::int64_t>(end.estimatedInputTokens, 0, RollingWindow::MAX_BUCKET_COUNT) },
            { "estOut",
                std::clamp<std::int64_t>(end.estimatedOutputTokens, 0, RollingWindow::MAX_BUCKET_COUNT) },
            { "caller", end.caller }, { "hh", m_host } }));
    if (!reply)
        return reply.error();
    const json& j = *reply;
    return boolOf(j, "found");
}

Result<bool> RedisQuotaBackend::noteReportedLimits(const std::string& provider,
    const ReportedLimits& reported, const PlanUsage& plan, const std::string& caller)
{
    auto bound = [](std::int64_t v) { return v < 0 ? -1 : std::min(v, LimitMismatch::MAX_REPORTED); };
    json a { { "provider", provider }, { "requests", bound(reported.requests) },
        { "tokens", bound(reported.tokens) }, { "input", bound(reported.inputTokens) },
        { "output", bound(reported.outputTokens) }, { "scope", reported.scope }, { "caller", caller } };
    if (plan.atMs != 0)
        a["plan"] = json { { "s", static_cast<int>(plan.status) }, { "f", plan.fiveHourPermille },
            { "fr", plan.fiveHourResetMs }, { "v", plan.sevenDayPermille }, { "vr", plan.sevenDayResetMs } };
    auto reply = call("noteLimits", packed(a));
    if (!reply)
        return reply.error();
    const json& j = *reply;
    return boolOf(j, "written");
}

Result<bool> RedisQuotaBackend::renewSlot(
    const std::string& provider, std::uint64_t fence, std::int64_t leaseMs, const Slot* holder)
{
    json a { { "provider", provider }, { "fence", fence }, { "lease", leaseMs } };
    // Who holds it (a holder of this host: the script stores our host id with it), so that a
    // slot lost with the state is taken back from a placeholder in its name.
    if (holder)
        a["holder"] = json { { "pid", holder->pid }, { "a", holder->acquiredMs }, { "n", holder->tokens },
            { "c", holder->caller }, { "m", holder->model }, { "st", holder->startTicks } };
    a["host"] = m_host;
    auto reply = call("renewSlot", packed(a));
    if (!reply)
        return reply.error();
    const json& j = *reply;
    return boolOf(j, "found");
}

Result<LimiterSnapshot> RedisQuotaBackend::snapshot()
{
    // Read by the codec from the reply as sent (the snapshot's refusals are only transport ones).
    auto reply = send("snapshot", {}, std::max(m_timeout, RedisConnection::DEFAULT_TIMEOUT));
    if (!reply)
        return reply.error();
    auto s = RedisStateCodec::decodeSnapshot(*reply, m_keys[0], m_keys[1], m_host, m_probe->pidNamespace());
    if (!s)
        return s.error();
    if (!s->corruptKey.empty())
        return Error::make(ErrorKind::Corrupt, s->corruptKey, s->corruptReason);
    LimiterSnapshot out;
    out.limits = std::move(s->limits);
    if (s->state)
        out.state = std::move(*s->state);
    out.nowMs = s->nowMs;
    return out;
}

Result<void> RedisQuotaBackend::record(const std::vector<HistoryEvent>& events)
{
    json lines = json::array();
    for (const auto& e : events) {
        std::string line = e.toJsonLine();
        if (!line.empty() && line.back() == '\n')
            line.pop_back();
        lines.push_back(line);
    }
    auto reply = call("record", packed(json { { "lines", lines } }));
    if (!reply)
        return reply.error();
    return {};
}

std::uint32_t RedisQuotaBackend::changeMark() const
{
    if (!m_subscription && std::chrono::steady_clock::now() >= m_subscribeAfter) {
        // Wake-ups are a hint (waiters look again at least every MAX_SLEEP): a server that does
        // not answer costs one short try now and then, never a waiter's deadline.
        auto c = RedisConnection::open(m_address, std::min(m_timeout, MIN_ATTEMPT));
        if (c && c->subscribe({ m_channelPrefix + "w:" + m_wakeKey })) {
            m_subscription = std::make_unique<RedisConnection>(std::move(c).value());
            ++m_rings; // a new subscription may have missed rings: the mark moves
        } else {
            m_subscribeAfter = std::chrono::steady_clock::now() + SUBSCRIBE_RETRY;
        }
    }
    if (m_subscription) {
        std::vector<std::string> payloads;
        auto n = m_subscription->takeMessages(&payloads);
        if (!n) {
            m_subscription.reset(); // made again at the next look
            ++m_rings;
        } else {
            const auto now = std::chrono::steady_clock::now();
            for (const std::string& p : payloads) {
                if (p.rfind("a:", 0) == 0) {
                    takeHandedRing(p);
                    ++m_rings;
                    continue;
                }
                std::int64_t ms = -1;
                if (p.rfind("in:", 0) == 0) {
                    const char* last = p.data() + p.size();
                    if (auto [end, ec] = std::from_chars(p.data() + 3, last, ms);
                        ec != std::errc() || end != last)
                        ms = -1;
                }
                if (ms < 0) { // "now" (or anything else: a look too many costs only a call)
                    ++m_rings;
                    continue;
                }
                const auto by
                    = now + std::chrono::milliseconds(std::min<std::int64_t>(ms, QUEUE_LOOK.count()));
                if (!m_lookBy || by < *m_lookBy)
                    m_lookBy = by;
            }
            // A message whose payload was lost to the count (none: every message has one).
            if (payloads.size() < static_cast<std::size_t>(*n))
                m_rings += static_cast<std::uint32_t>(static_cast<std::size_t>(*n) - payloads.size());
        }
    }
    if (m_lookBy && std::chrono::steady_clock::now() >= *m_lookBy) {
        m_lookBy.reset();
        ++m_rings;
    }
    return m_rings;
}

// "a:<ticket>:<fence>:<lease>:<now>": the admission of a queued request of ours, by a
// release (W.handOff). One that does not parse is only a ring: the look finds the slot.
void RedisQuotaBackend::takeHandedRing(const std::string& payload) const
{
    std::array<std::int64_t, 4> v {};
    const char* at = payload.data() + 2;
    const char* last = payload.data() + payload.size();
    for (std::size_t i = 0; i < v.size(); ++i) {
        auto [end, ec] = std::from_chars(at, last, v[i]);
        if (ec != std::errc() || end == at || (i + 1 < v.size() ? (end == last || *end != ':') : end != last))
            return;
        at = end + 1;
    }
    if (v[0] < 1 || v[1] < 1 || v[2] < 0)
        return;
    if (m_handed.size() >= MAX_HANDED)
        m_handed.erase(m_handed.begin()); // the oldest ticket: long since answered by a look
    AdmitOutcome& o = m_handed[static_cast<std::uint64_t>(v[0])];
    o = AdmitOutcome {};
    o.decision.admitted = true;
    o.decision.ticket = static_cast<std::uint64_t>(v[0]);
    o.decision.fence = static_cast<std::uint64_t>(v[1]);
    o.decision.slotTaken = true;
    o.leaseMs = v[2];
    o.nowMs = v[3];
}

std::optional<AdmitOutcome> RedisQuotaBackend::takeHandOff(std::uint64_t ticket)
{
    const auto it = m_handed.find(ticket);
    if (ticket == 0 || it == m_handed.end())
        return std::nullopt;
    AdmitOutcome o = it->second;
    m_handed.erase(it);
    return o;
}

void RedisQuotaBackend::waitForChange(std::uint32_t mark, std::chrono::nanoseconds timeout) const
{
    using Clock = std::chrono::steady_clock;
    const auto end = Clock::now() + std::min<std::chrono::nanoseconds>(timeout, std::chrono::hours(24));
    // Messages that only say when to look (m_lookBy) do not end the wait: it goes on to that
    // time, or to a ring, or to the timeout.
    for (;;) {
        if (changeMark() != mark)
            return;
        auto until = end;
        if (m_lookBy && *m_lookBy < until) // told when to look: no later than that
            until = *m_lookBy;
        const auto left = until - Clock::now();
        if (left <= Clock::duration::zero())
            return;
        // Rounded up: a wait that ends a moment before the time it waits for would spin.
        const int ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
        // Without a subscription (Redis unreachable) this waits out the timeout: the next
        // operation reports the failure.
        // A signal (EINTR) ends the wait early, as a spurious wake-up may: the caller looks at its
        // cancel flag and deadline before it waits again.
        pollfd p { m_subscription ? m_subscription->fd() : -1, POLLIN, 0 };
        if (::poll(&p, 1, ms) < 0) {
            (void)changeMark();
            return;
        }
    }
}

} // namespace tollgate
