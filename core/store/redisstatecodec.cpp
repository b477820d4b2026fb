#include "store/redisstatecodec.h"

#include "quota/limitmismatch.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <tuple>

namespace tollgate {

using nlohmann::json;

namespace {

constexpr std::int64_t NEVER = RedisStateCodec::NEVER;

// A field of an object as an integer; false when missing, of another type, or fractional.
bool integer(const json& o, const char* key, std::int64_t& out)
{
    auto it = o.find(key);
    if (it == o.end())
        return false;
    if (it->is_number_integer()) {
        if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
            return false;
        out = it->get<std::int64_t>();
        return true;
    }
    if (it->is_number_float()) {
        const double d = it->get<double>();
        if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9.0e15)
            return false;
        out = static_cast<std::int64_t>(d);
        return true;
    }
    return false;
}

bool text(const json& o, const char* key, std::string& out)
{
    auto it = o.find(key);
    if (it == o.end() || !it->is_string())
        return false;
    out = it->get<std::string>();
    return true;
}

bool flag(const json& o, const char* key, bool& out)
{
    auto it = o.find(key);
    if (it == o.end() || !it->is_boolean())
        return false;
    out = it->get<bool>();
    return true;
}

// The script's lists: an array, or (MessagePack of an empty Lua table) an empty map.
const json* list(const json& o, const char* key)
{
    auto it = o.find(key);
    if (it == o.end())
        return nullptr;
    if (it->is_array() || (it->is_object() && it->empty()))
        return &*it;
    return nullptr;
}

// Times from the script: NEVER back to what C++ means by it.
std::int64_t time(std::int64_t v)
{
    return v >= NEVER ? INT64_MAX : v;
}

json parseMsgpack(std::string_view blob)
{
    return json::from_msgpack(blob.begin(), blob.end(), true, false);
}

Error corrupt(const std::string& key, const std::string& what)
{
    return Error::make(ErrorKind::Corrupt, key, what);
}

} // namespace

std::string RedisStateCodec::compactLimits(const ProviderLimits& l)
{
    json j = json::object();
    if (l.requests)
        j["r"] = *l.requests;
    if (l.tokens)
        j["t"] = *l.tokens;
    j["w"] = l.windowMs;
    if (l.parallel)
        j["par"] = *l.parallel;
    j["h"] = l.headroomPercent;
    j["bb"] = l.backoffBaseMs;
    j["bc"] = l.backoffCapMs;
    j["mh"] = l.maxHoldMs;
    if (!l.models.empty()) {
        json models = json::object();
        for (const auto& [name, m] : l.models) {
            json mj = json::object();
            if (m.requests)
                mj["r"] = *m.requests;
            if (m.tokens)
                mj["t"] = *m.tokens;
            mj["w"] = m.windowMs;
            models[name] = mj;
        }
        j["m"] = models;
    }
    // nlohmann keeps object keys sorted: the same limits always give the same bytes.
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<ProviderLimits> RedisStateCodec::parseCompactLimits(
    const std::string& provider, std::string_view textIn, const std::string& key)
{
    const json j = json::parse(textIn.begin(), textIn.end(), nullptr, false);
    const std::string where = key + " field " + provider;
    if (!j.is_object())
        return corrupt(where, "the limits are not a JSON object");
    ProviderLimits l;
    std::int64_t v = 0;
    if (j.contains("r")) {
        if (!integer(j, "r", v))
            return corrupt(where, "requests is not a whole number");
        l.requests = v;
    }
    if (j.contains("t")) {
        if (!integer(j, "t", v))
            return corrupt(where, "tokens is not a whole number");
        l.tokens = v;
    }
    if (j.contains("par")) {
        if (!integer(j, "par", v))
            return corrupt(where, "parallel is not a whole number");
        l.parallel = v;
    }
    if (!integer(j, "w", l.windowMs) || !integer(j, "h", l.headroomPercent)
        || !integer(j, "bb", l.backoffBaseMs) || !integer(j, "bc", l.backoffCapMs)
        || !integer(j, "mh", l.maxHoldMs))
        return corrupt(where, "a window, headroom, backoff or hold time is missing or not a whole number");
    if (auto it = j.find("m"); it != j.end()) {
        if (!it->is_object())
            return corrupt(where, "the model limits are not an object");
        for (const auto& [name, mj] : it->items()) {
            ModelLimits m;
            if (!mj.is_object() || !integer(mj, "w", m.windowMs))
                return corrupt(where, "the limits of model '" + name + "' lack a window");
            if (mj.contains("r")) {
                if (!integer(mj, "r", v))
                    return corrupt(where, "model '" + name + "': requests is not a whole number");
                m.requests = v;
            }
            if (mj.contains("t")) {
                if (!integer(mj, "t", v))
                    return corrupt(where, "model '" + name + "': tokens is not a whole number");
                m.tokens = v;
            }
            l.models[name] = m;
        }
    }
    if (auto ok = QuotaLimits::validate(provider, l); !ok)
        return corrupt(where, ok.error().message);
    return l;
}

Result<ProviderState> RedisStateCodec::decodeProvider(
    std::string_view blob, const std::string& myHost, std::uint64_t myPidNs)
{
    const json j = parseMsgpack(blob);
    auto bad = [](const std::string& what) { return corrupt("", what); };
    if (!j.is_object())
        return bad("a provider state is not a MessagePack map");
    ProviderState p;
    std::int64_t c429 = 0;
    std::int64_t admitted = 0;
    std::int64_t limited = 0;
    if (!text(j, "n", p.name) || !flag(j, "pz", p.paused) || !text(j, "pr", p.pauseReason)
        || !integer(j, "pa", p.pausedAtMs) || !integer(j, "c", c429) || !integer(j, "bu", p.backoffUntilMs)
        || !integer(j, "l4", p.last429Ms) || !integer(j, "pu", p.paceUntilMs)
        || !integer(j, "la", p.lastAdmitMs) || !integer(j, "at", admitted) || !integer(j, "rt", limited))
        return bad("a provider state lacks a field or has one of the wrong type");
    p.consecutive429 = static_cast<std::int32_t>(std::clamp<std::int64_t>(c429, 0, 1 << 20));
    p.admittedTotal = static_cast<std::uint64_t>(std::max<std::int64_t>(0, admitted));
    p.rateLimitedTotal = static_cast<std::uint64_t>(std::max<std::int64_t>(0, limited));
    p.backoffUntilMs = time(p.backoffUntilMs);
    p.paceUntilMs = time(p.paceUntilMs);
    // The provider's reported limits: absent in a state from before them (then: not reported).
    // The bounds of the script's validProvider: a time up to 2^53, figures up to 2^40.
    for (auto [key, out, lo, hi] :
        { std::tuple { "ra", &p.reportedAtMs, std::int64_t(0), std::int64_t(1) << 53 },
            std::tuple { "rr", &p.reportedRequests, std::int64_t(-1), LimitMismatch::MAX_REPORTED },
            std::tuple { "rk", &p.reportedTokens, std::int64_t(-1), LimitMismatch::MAX_REPORTED } }) {
        if (!j.contains(key))
            continue;
        if (!integer(j, key, *out) || *out < lo || *out > hi)
            return bad("a provider state's reported limits are not whole numbers in range");
    }
    const json* scopes = list(j, "sc");
    const json* slots = list(j, "sl");
    const json* queue = list(j, "q");
    if (!scopes || !slots || !queue)
        return bad("a provider state lacks its windows, slots or queue");
    if (slots->size() > QuotaState::MAX_SLOTS || queue->size() > QuotaState::MAX_WAITERS)
        return bad("a provider state holds more slots or waiters than any state may");
    for (const json& sj : *scopes) {
        ScopeWindow sc;
        std::int64_t windowMs = 0;
        const json* b = sj.is_object() ? list(sj, "b") : nullptr;
        if (!b || !text(sj, "m", sc.model) || !integer(sj, "w", windowMs)
            || b->size() != 3 * static_cast<std::size_t>(RollingWindow::SLOTS))
            return bad("a rolling window is malformed");
        std::array<RollingWindow::Bucket, RollingWindow::SLOTS> buckets {};
        for (std::size_t i = 0; i < buckets.size(); ++i) {
            const json* cell[3] = { &(*b)[3 * i], &(*b)[3 * i + 1], &(*b)[3 * i + 2] };
            std::int64_t values[3] = {};
            for (int k = 0; k < 3; ++k) {
                if (!cell[k]->is_number_integer())
                    return bad("a rolling window's bucket is not a whole number");
                values[k] = cell[k]->get<std::int64_t>();
            }
            buckets[i] = RollingWindow::Bucket { values[0], values[1], values[2] };
        }
        if (!sc.window.restore(windowMs, buckets))
            return bad("a rolling window is out of bounds");
        p.scopes.push_back(std::move(sc));
    }
    for (const json& sj : *slots) {
        Slot s;
        std::int64_t fence = 0;
        std::int64_t start = 0;
        if (!sj.is_object() || !integer(sj, "f", fence) || !integer(sj, "pid", s.pid)
            || !integer(sj, "a", s.acquiredMs) || !integer(sj, "n", s.tokens) || !text(sj, "c", s.caller)
            || !text(sj, "m", s.model) || !text(sj, "h", s.host) || !integer(sj, "st", start)
            || !integer(sj, "lu", s.leaseUntilMs))
            return bad("a slot is malformed");
        s.fence = static_cast<std::uint64_t>(std::max<std::int64_t>(0, fence));
        s.startTicks = static_cast<std::uint64_t>(std::max<std::int64_t>(0, start));
        s.leaseUntilMs = time(s.leaseUntilMs);
        s.pidNs = !s.host.empty() && s.host == myHost ? myPidNs : 0;
        p.slots.push_back(std::move(s));
    }
    for (const json& wj : *queue) {
        Waiter w;
        std::int64_t ticket = 0;
        std::int64_t start = 0;
        std::int64_t reason = 0;
        if (!wj.is_object() || !integer(wj, "tk", ticket) || !integer(wj, "pid", w.pid)
            || !integer(wj, "e", w.enqueuedMs) || !integer(wj, "d", w.deadlineMs)
            || !integer(wj, "n", w.tokens) || !text(wj, "c", w.caller) || !text(wj, "m", w.model)
            || !flag(wj, "s", w.wantsSlot) || !integer(wj, "r", reason) || !text(wj, "h", w.host)
            || !integer(wj, "st", start) || !integer(wj, "lu", w.leaseUntilMs))
            return bad("a waiter is malformed");
        w.ticket = static_cast<std::uint64_t>(std::max<std::int64_t>(0, ticket));
        w.startTicks = static_cast<std::uint64_t>(std::max<std::int64_t>(0, start));
        w.reason = static_cast<WaitReason>(std::clamp<std::int64_t>(reason, 0, 6));
        w.pidNs = !w.host.empty() && w.host == myHost ? myPidNs : 0;
        p.queue.push_back(std::move(w));
    }
    return p;
}

Result<RedisSnapshot> RedisStateCodec::decodeSnapshot(std::string_view reply, const std::string& limitsKey,
    const std::string& stateKey, const std::string& myHost, std::uint64_t myPidNs)
{
    const json j = parseMsgpack(reply);
    RedisSnapshot out;
    const json* limits = j.is_object() ? list(j, "limits") : nullptr;
    const json* state = j.is_object() ? list(j, "state") : nullptr;
    std::int64_t home = 0;
    if (!limits || !state || !integer(j, "now", out.nowMs) || !integer(j, "home", home))
        return corrupt(stateKey, "the Redis script answered a snapshot with something else");
    out.homeExists = home != 0;
    for (std::size_t i = 0; i + 1 < limits->size(); i += 2) {
        const json& name = (*limits)[i];
        const json& value = (*limits)[i + 1];
        if (!name.is_binary() && !name.is_string())
            continue;
        const std::string provider = name.is_string()
            ? name.get<std::string>()
            : std::string(name.get_binary().begin(), name.get_binary().end());
        const std::string text = value.is_string() ? value.get<std::string>()
            : value.is_binary() ? std::string(value.get_binary().begin(), value.get_binary().end())
                                : std::string();
        auto l = parseCompactLimits(provider, text, limitsKey);
        if (!l) {
            out.corruptKey = l.error().path;
            out.corruptReason = l.error().message;
            out.limitsCorrupt = true;
            continue;
        }
        if (auto set = out.limits.set(provider, *l); !set) {
            out.corruptKey = limitsKey;
            out.corruptReason = set.error().message;
            out.limitsCorrupt = true;
        }
    }
    if (state->empty())
        return out;
    QuotaState s;
    for (std::size_t i = 0; i + 1 < state->size(); i += 2) {
        const json& name = (*state)[i];
        const json& value = (*state)[i + 1];
        if (!name.is_string() || !(value.is_string() || value.is_binary()))
            continue;
        const std::string field = name.get<std::string>();
        const std::string blob = value.is_string()
            ? value.get<std::string>()
            : std::string(value.get_binary().begin(), value.get_binary().end());
        if (field == "g") {
            const json g = parseMsgpack(blob);
            std::int64_t nf = 0;
            std::int64_t nt = 0;
            if (!g.is_object() || !integer(g, "nf", nf) || !integer(g, "nt", nt)
                || !flag(g, "pz", s.pausedAll) || !text(g, "pr", s.pauseReason)
                || !integer(g, "pat", s.pausedAtMs)) {
                out.corruptKey = stateKey + " field g";
                out.corruptReason = "the global state does not decode";
                continue;
            }
            s.nextFence = static_cast<std::uint64_t>(std::max<std::int64_t>(1, nf));
            s.nextTicket = static_cast<std::uint64_t>(std::max<std::int64_t>(1, nt));
        } else if (field.rfind("p:", 0) == 0) {
            auto p = decodeProvider(blob, myHost, myPidNs);
            if (!p) {
                out.corruptKey = stateKey + " field " + field;
                out.corruptReason = p.error().message;
                continue;
            }
            if (s.providers.size() < QuotaState::MAX_PROVIDERS)
                s.providers.push_back(std::move(p).value());
        }
    }
    out.state = std::move(s);
    return out;
}

} // namespace tollgate
