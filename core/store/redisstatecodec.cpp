#include "store/redisstatecodec.h"

#include "base/intmath.h"
#include "base/textsanitizer.h"
#include "quota/limitmismatch.h"
#include "quota/quotapolicy.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>
#include <vector>

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

// The bytes of a MessagePack string or binary (Lua's strings come as either); none otherwise.
std::optional<std::string> bytesOf(const json& v)
{
    if (v.is_string())
        return v.get<std::string>();
    if (v.is_binary())
        return std::string(v.get_binary().begin(), v.get_binary().end());
    return std::nullopt;
}

Error corrupt(const std::string& key, const std::string& what)
{
    return Error::make(ErrorKind::Corrupt, key, what);
}

// "holds 10485760 bytes, more than the 262144 a provider's limits may have; refused unread".
std::string tooLarge(std::size_t bytes, std::int64_t max, const char* what)
{
    return "holds " + std::to_string(bytes) + " bytes, more than the " + std::to_string(max) + " " + what
        + " may have; refused unread";
}

// One window of the script's state: w, b (SLOTS × index, requests, tokens) and, while its
// scope splits tokens, x (SLOTS × input, output). false: malformed or out of bounds.
bool windowOf(const json& o, RollingWindow& window, bool& split)
{
    std::int64_t windowMs = 0;
    const json* b = list(o, "b");
    constexpr auto slots = static_cast<std::size_t>(RollingWindow::SLOTS);
    if (!b || !integer(o, "w", windowMs) || b->size() != 3 * slots)
        return false;
    const json* x = o.contains("x") ? list(o, "x") : nullptr;
    split = x != nullptr;
    if (o.contains("x") && (!x || x->size() != 2 * slots))
        return false;
    auto cell = [](const json& v, std::int64_t& out) {
        if (!v.is_number_integer())
            return false;
        out = v.get<std::int64_t>();
        return true;
    };
    std::array<RollingWindow::Bucket, RollingWindow::SLOTS> buckets {};
    for (std::size_t i = 0; i < slots; ++i) {
        auto& bk = buckets[i];
        if (!cell((*b)[3 * i], bk.index) || !cell((*b)[3 * i + 1], bk.requests)
            || !cell((*b)[3 * i + 2], bk.tokens))
            return false;
        if (x && (!cell((*x)[2 * i], bk.input) || !cell((*x)[2 * i + 1], bk.output)))
            return false;
    }
    return window.restore(windowMs, buckets);
}

// A fnmatch(3) pattern (flags 0: * ? [...] [!...] and \ escapes) as the anchored Lua pattern
// the server script matches model names with (string.find): the same names match. A bracket
// without its closing ] is a plain [, as fnmatch reads it.
std::string luaPatternOf(const std::string& glob)
{
    auto literal = [](char c) {
        const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        return alnum ? std::string(1, c) : std::string("%") + c;
    };
    std::string out = "^";
    for (std::size_t i = 0; i < glob.size(); ++i) {
        const char c = glob[i];
        if (c == '*') {
            if (out.size() < 2 || out.compare(out.size() - 2, 2, ".*") != 0)
                out += ".*";
        } else if (c == '?') {
            out += ".";
        } else if (c == '\\' && i + 1 < glob.size()) {
            out += literal(glob[++i]);
        } else if (c == '[') {
            std::size_t j = i + 1;
            const bool negate = j < glob.size() && (glob[j] == '!' || glob[j] == '^');
            if (negate)
                ++j;
            const std::size_t first = j;
            if (j < glob.size() && glob[j] == ']')
                ++j;
            while (j < glob.size() && glob[j] != ']')
                ++j;
            if (j >= glob.size()) {
                out += "%[";
                continue;
            }
            out += negate ? "[^" : "[";
            for (std::size_t k = first; k < j; ++k) {
                const char m = glob[k];
                const bool range = m == '-' && k > first && k + 1 < j;
                out += range ? std::string("-") : literal(m);
            }
            out += "]";
            i = j;
        } else {
            out += literal(c);
        }
    }
    return out + "$";
}

} // namespace

std::string RedisStateCodec::compactLimits(const ProviderLimits& l)
{
    json j = json::object();
    if (l.requests)
        j["r"] = *l.requests;
    if (l.tokens)
        j["t"] = *l.tokens;
    // The keys of issue 25's metrics only when set: limits stored before them compare equal.
    auto budget
        = [](json& to, const std::optional<std::int64_t>& in, const std::optional<std::int64_t>& out) {
              if (in)
                  to["it"] = *in;
              if (out)
                  to["ot"] = *out;
          };
    auto perDay = [](json& to, const Budget& d) {
        if (!d.any())
            return;
        json dj = json::object();
        if (d.requests)
            dj["r"] = *d.requests;
        if (d.tokens)
            dj["t"] = *d.tokens;
        if (d.inputTokens)
            dj["it"] = *d.inputTokens;
        if (d.outputTokens)
            dj["ot"] = *d.outputTokens;
        to["d"] = dj;
    };
    budget(j, l.inputTokens, l.outputTokens);
    perDay(j, l.perDay);
    if (!l.dayReset.rolling())
        j["dz"] = l.dayReset.text();
    j["w"] = l.windowMs;
    if (l.parallel)
        j["par"] = *l.parallel;
    j["h"] = l.headroomPercent;
    j["bb"] = l.backoffBaseMs;
    j["bc"] = l.backoffCapMs;
    j["mh"] = l.maxHoldMs;
    // Learning is the proxy's business, not the script's: it reads neither key.
    if (l.learn)
        j["ln"] = true;
    if (!l.learned.empty())
        j["ld"] = l.learned;
    if (!l.models.empty()) {
        json models = json::object();
        for (const auto& [name, m] : l.models) {
            json mj = json::object();
            if (m.requests)
                mj["r"] = *m.requests;
            if (m.tokens)
                mj["t"] = *m.tokens;
            budget(mj, m.inputTokens, m.outputTokens);
            perDay(mj, m.perDay);
            if (!m.match.empty()) {
                // g: the user's patterns (read back); p: the same as Lua patterns (the script's).
                mj["g"] = m.match;
                json lua = json::array();
                for (const auto& glob : m.match)
                    lua.push_back(luaPatternOf(glob));
                mj["p"] = lua;
            }
            mj["w"] = m.windowMs;
            if (!m.learned.empty())
                mj["ld"] = m.learned;
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
    const std::string where = key + " field " + provider;
    if (static_cast<std::int64_t>(textIn.size()) > MAX_LIMITS_BYTES)
        return corrupt(where, tooLarge(textIn.size(), MAX_LIMITS_BYTES, "a provider's limits"));
    const json j = json::parse(textIn.begin(), textIn.end(), nullptr, false);
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
    auto optional = [&](const json& o, const char* key, std::optional<std::int64_t>& out) {
        if (!o.contains(key))
            return true;
        if (!integer(o, key, v))
            return false;
        out = v;
        return true;
    };
    auto readBudget
        = [&](const json& o, std::optional<std::int64_t>& in, std::optional<std::int64_t>& out, Budget& day) {
              if (!optional(o, "it", in) || !optional(o, "ot", out))
                  return false;
              auto d = o.find("d");
              if (d == o.end())
                  return true;
              return d->is_object() && optional(*d, "r", day.requests) && optional(*d, "t", day.tokens)
                  && optional(*d, "it", day.inputTokens) && optional(*d, "ot", day.outputTokens);
          };
    if (!readBudget(j, l.inputTokens, l.outputTokens, l.perDay))
        return corrupt(where, "an input, output or per-day limit is not a whole number");
    if (auto dz = j.find("dz"); dz != j.end()) {
        auto reset = dz->is_string() ? DayReset::parse(dz->get<std::string>()) : Result<DayReset>(DayReset());
        if (!dz->is_string() || !reset || reset->rolling())
            return corrupt(where, "the day reset is not one this version reads");
        l.dayReset = *reset;
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
    auto readLearned = [](const json& o, std::vector<std::string>& out) {
        auto ld = o.find("ld");
        if (ld == o.end())
            return true;
        if (!ld->is_array())
            return false;
        for (const auto& k : *ld) {
            if (!k.is_string())
                return false;
            out.push_back(k.get<std::string>());
        }
        return true;
    };
    if (auto ln = j.find("ln"); ln != j.end()) {
        if (!ln->is_boolean())
            return corrupt(where, "learn is not true or false");
        l.learn = ln->get<bool>();
    }
    if (!readLearned(j, l.learned))
        return corrupt(where, "the learned limits are not a list of names");
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
            if (!readBudget(mj, m.inputTokens, m.outputTokens, m.perDay))
                return corrupt(
                    where, "model '" + name + "': an input, output or per-day limit is not a whole number");
            if (auto g = mj.find("g"); g != mj.end()) {
                if (!g->is_array())
                    return corrupt(where, "model '" + name + "': its patterns are not a list");
                for (const auto& pattern : *g) {
                    if (!pattern.is_string())
                        return corrupt(where, "model '" + name + "': a pattern is not a string");
                    m.match.push_back(pattern.get<std::string>());
                }
                // The script matches with p: it must be what these patterns give, or the class
                // would pool other models than the limits say.
                json lua = json::array();
                for (const auto& glob : m.match)
                    lua.push_back(luaPatternOf(glob));
                if (mj.value("p", json()) != lua)
                    return corrupt(where, "model '" + name + "': its patterns and the script's do not agree");
            } else if (mj.contains("p")) {
                return corrupt(where, "model '" + name + "': script patterns without the patterns");
            }
            if (!readLearned(mj, m.learned))
                return corrupt(where, "model '" + name + "': its learned limits are not a list of names");
            l.models[name] = m;
        }
    }
    if (auto ok = QuotaLimits::validate(provider, l); !ok)
        return corrupt(where, ok.error().message);
    // Only the bytes compactLimits writes: the script reads the value with cjson, which takes
    // what JSON does not allow (0x2, +2, 02, 2.) and cannot tell [] from {}; it refuses any
    // other bytes (LK.canonical in redisquota.lua), and so does this, so that the two never
    // disagree on a value (nor on a key twice, or one this version does not know).
    if (compactLimits(l) != textIn)
        return corrupt(where,
            "not as Tollgate writes them (a number, list or object JSON does not allow, a key twice or unknown, "
            "or keys out of order)");
    return l;
}

Result<ProviderState> RedisStateCodec::decodeProvider(std::string_view blob, const std::string& myHost,
    std::uint64_t myPidNs, std::int64_t stallNowMs, const WaiterRecords& waiters)
{
    if (static_cast<std::int64_t>(blob.size()) > MAX_STATE_BYTES)
        return corrupt("", tooLarge(blob.size(), MAX_STATE_BYTES, "a provider's state"));
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
            std::tuple { "rk", &p.reportedTokens, std::int64_t(-1), LimitMismatch::MAX_REPORTED },
            std::tuple { "ri", &p.reportedInputTokens, std::int64_t(-1), LimitMismatch::MAX_REPORTED },
            std::tuple { "ro", &p.reportedOutputTokens, std::int64_t(-1), LimitMismatch::MAX_REPORTED } }) {
        if (!j.contains(key))
            continue;
        if (!integer(j, key, *out) || *out < lo || *out > hi)
            return bad("a provider state's reported limits are not whole numbers in range");
    }
    if (j.contains("rs")
        && (!text(j, "rs", p.reportedScope)
            || (!p.reportedScope.empty() && !QuotaLimits::validateName("model", p.reportedScope))))
        return bad("a provider state's reported scope is not a class name");
    // What the provider said remains until its reset (ops.remaining, ops.hold): absent until said.
    if (j.contains("qu")) {
        if (!integer(j, "qu", p.remainingUntilMs) || !integer(j, "ql", p.remainingRequests)
            || p.remainingUntilMs < 0 || p.remainingUntilMs > (std::int64_t(1) << 53)
            || p.remainingRequests < 0 || p.remainingRequests > (std::int64_t(1) << 40))
            return bad("a provider state's stated remainder is not whole numbers in range");
        if (j.contains("qs")
            && (!text(j, "qs", p.remainingScope)
                || (!p.remainingScope.empty() && !QuotaLimits::validateName("model", p.remainingScope))))
            return bad("a provider state's stated remainder names no class");
    }
    // A subscription plan's usage (noteLimits): absent until one is stated.
    if (auto pl = j.find("pl"); pl != j.end()) {
        std::int64_t status = 0;
        PlanUsage& u = p.plan;
        if (!pl->is_object() || !integer(*pl, "a", u.atMs) || !integer(*pl, "s", status)
            || !integer(*pl, "f", u.fiveHourPermille) || !integer(*pl, "fr", u.fiveHourResetMs)
            || !integer(*pl, "v", u.sevenDayPermille) || !integer(*pl, "vr", u.sevenDayResetMs) || u.atMs < 1
            || u.atMs > (std::int64_t(1) << 53) || status < 0
            || status > static_cast<std::int64_t>(PlanUsage::Status::Rejected) || u.fiveHourPermille < -1
            || u.fiveHourPermille > PlanUsage::MAX_PERMILLE || u.sevenDayPermille < -1
            || u.sevenDayPermille > PlanUsage::MAX_PERMILLE || u.fiveHourResetMs < 0
            || u.fiveHourResetMs > (std::int64_t(1) << 53) || u.sevenDayResetMs < 0
            || u.sevenDayResetMs > (std::int64_t(1) << 53))
            return bad("a provider state's plan usage is not whole numbers in range");
        u.status = static_cast<PlanUsage::Status>(status);
    }
    // The gap since a call last served the provider (redisquota.lua, "Stalls"): what of it is
    // longer than a third of a lease is not counted against that lease, as the script does
    // before it judges; a reader shows what the next call will act on.
    std::int64_t gap = 0;
    if (std::int64_t served = 0;
        stallNowMs > 0 && integer(j, "sv", served) && served > 0 && served < stallNowMs)
        gap = stallNowMs - served;
    auto discounted = [gap](std::int64_t leaseUntilMs, std::int64_t leaseMs) {
        const std::int64_t more = gap - leaseMs / 3;
        return leaseUntilMs == 0 || more <= 0 ? leaseUntilMs : IntMath::plusSaturated(leaseUntilMs, more);
    };
    const json* scopes = list(j, "sc");
    const json* slots = list(j, "sl");
    if (!scopes || !slots)
        return bad("a provider state lacks its windows or slots");
    // The queue: a string of tickets (QUEUE_TICKET_DIGITS digits each) whose waiters are fields
    // of their own ("q:<ticket>"), or (a state from before that layout) a list of the waiters.
    // A ticket that is not digits, or whose record is missing or malformed, is a ghost that the
    // script drops when it meets it: not shown.
    std::vector<json> queued;
    bool ownFields = false;
    const auto q = j.find("q");
    if (auto ticketBytes = q != j.end() ? bytesOf(*q) : std::nullopt) {
        const std::string& tickets = *ticketBytes;
        constexpr std::size_t width = QUEUE_TICKET_DIGITS;
        if (tickets.size() % width != 0 || tickets.size() / width > QuotaState::MAX_WAITERS)
            return bad("a provider state's queue is not a string of tickets");
        ownFields = true;
        for (std::size_t at = 0; at < tickets.size(); at += width) {
            std::int64_t tk = 0;
            const char* first = tickets.data() + at;
            if (auto [end, ec] = std::from_chars(first, first + width, tk);
                ec != std::errc() || end != first + width || tk < 1)
                continue;
            auto it = waiters.find(tk);
            if (it == waiters.end())
                continue;
            json record = parseMsgpack(it->second);
            std::int64_t own = 0;
            if (record.is_object() && integer(record, "tk", own) && own == tk)
                queued.push_back(std::move(record));
        }
    } else if (const json* waitersInline = list(j, "q")) {
        if (waitersInline->size() > QuotaState::MAX_WAITERS)
            return bad("a provider state holds more waiters than any state may");
        queued.assign(waitersInline->begin(), waitersInline->end());
    } else {
        return bad("a provider state lacks its queue");
    }
    if (slots->size() > QuotaState::MAX_SLOTS)
        return bad("a provider state holds more slots than any state may");
    for (const json& sj : *scopes) {
        ScopeWindow sc;
        if (!sj.is_object() || !text(sj, "m", sc.model) || !windowOf(sj, sc.window, sc.split))
            return bad("a rolling window is malformed or out of bounds");
        // The day (a window of 24 h, split as its scope): absent in a state from before it.
        if (auto dy = sj.find("dy"); dy != sj.end()) {
            bool daySplit = false;
            if (!dy->is_object() || !windowOf(*dy, sc.rollingDay, daySplit) || daySplit != sc.split
                || sc.rollingDay.windowMs() != ScopeWindow::DAY_MS)
                return bad("a scope's day is malformed or out of bounds");
            sc.day = ScopeWindow::Day::Rolling;
        }
        if (sj.contains("cs") || sj.contains("cu")) {
            const json* cu = list(sj, "cu");
            auto& u = sc.dayUsed;
            auto count = [](const json& v, std::int64_t& out) {
                if (!v.is_number_integer())
                    return false;
                out = v.get<std::int64_t>();
                return out >= 0 && out <= RollingWindow::MAX_BUCKET_COUNT;
            };
            if (sc.day != ScopeWindow::Day::None || !cu || cu->size() != 4
                || !integer(sj, "cs", sc.dayStartMs) || sc.dayStartMs < 0
                || sc.dayStartMs > RollingWindow::MAX_TIME_MS || !count((*cu)[0], u.requests)
                || !count((*cu)[1], u.tokens) || !count((*cu)[2], u.input) || !count((*cu)[3], u.output))
                return bad("a scope's calendar day is malformed or out of bounds");
            sc.day = ScopeWindow::Day::Calendar;
        }
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
        if (gap > 0) {
            std::int64_t length = 0;
            if (s.pid == 0 || !sj.contains("ll") || !integer(sj, "ll", length) || length < 1)
                length = QuotaPolicy::RENEWED_LEASE_MS; // a placeholder stands for renewing holders
            s.leaseUntilMs = discounted(s.leaseUntilMs, length);
        }
        s.pidNs = !s.host.empty() && s.host == myHost ? myPidNs : 0;
        // The estimate's split: absent in a slot without one (and in every state before it).
        for (auto [key, out] : { std::pair { "ei", &s.inputTokens }, std::pair { "eo", &s.outputTokens } }) {
            if (sj.contains(key)
                && (!integer(sj, key, *out) || *out < 0 || *out > RollingWindow::MAX_BUCKET_COUNT))
                return bad("a slot's estimate split is not a whole number in range");
        }
        // The ticket of the waiter a release handed it to (absent: admitted by its own look).
        if (sj.contains("tk")) {
            std::int64_t tk = 0;
            if (!integer(sj, "tk", tk) || tk < 1)
                return bad("a slot's waiter ticket is not a whole number in range");
            s.ticket = static_cast<std::uint64_t>(tk);
        }
        p.slots.push_back(std::move(s));
    }
    for (const json& wj : queued) {
        Waiter w;
        std::int64_t ticket = 0;
        std::int64_t start = 0;
        std::int64_t reason = 0;
        if (!wj.is_object() || !integer(wj, "tk", ticket) || !integer(wj, "pid", w.pid)
            || !integer(wj, "e", w.enqueuedMs) || !integer(wj, "d", w.deadlineMs)
            || !integer(wj, "n", w.tokens) || !text(wj, "c", w.caller) || !text(wj, "m", w.model)
            || !flag(wj, "s", w.wantsSlot) || !integer(wj, "r", reason) || !text(wj, "h", w.host)
            || !integer(wj, "st", start) || !integer(wj, "lu", w.leaseUntilMs)) {
            if (ownFields)
                continue; // a record of its own: a ghost, as above
            return bad("a waiter is malformed");
        }
        w.ticket = static_cast<std::uint64_t>(std::max<std::int64_t>(0, ticket));
        w.startTicks = static_cast<std::uint64_t>(std::max<std::int64_t>(0, start));
        w.reason = static_cast<WaitReason>(std::clamp<std::int64_t>(reason, 0, 6));
        w.leaseUntilMs = discounted(w.leaseUntilMs, WAITER_LEASE_MS);
        w.pidNs = !w.host.empty() && w.host == myHost ? myPidNs : 0;
        // What a release needs to hand it a slot (each absent at its default), checked as the
        // script checks it (W.validRecord): a record that fails is malformed.
        const json hd = wj.value("hd", json());
        const json x = wj.value("x", json());
        bool handOffOk = (hd.is_null() || hd == json(true)) && (x.is_null() || x == json(true));
        w.holds = hd == json(true);
        w.estimated = x == json(true);
        std::int64_t hst = 0;
        for (auto [key, out, lo, hi] :
            { std::tuple { "i", &w.inputTokens, std::int64_t(0), RollingWindow::MAX_BUCKET_COUNT },
                std::tuple { "o", &w.outputTokens, std::int64_t(0), RollingWindow::MAX_BUCKET_COUNT },
                std::tuple { "ls", &w.leaseMs, std::int64_t(1), RedisStateCodec::NEVER },
                std::tuple { "hp", &w.holderPid, std::int64_t(1), RedisStateCodec::NEVER },
                std::tuple { "hst", &hst, std::int64_t(0), RedisStateCodec::NEVER } }) {
            if (wj.contains(key) && (!integer(wj, key, *out) || *out < lo || *out > hi))
                handOffOk = false;
        }
        if (!handOffOk) {
            if (ownFields)
                continue; // a ghost, as above
            return bad("a waiter's hand-off fields are malformed");
        }
        w.holderStartTicks = static_cast<std::uint64_t>(hst);
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
    // Values the script would not return, being larger than a value may be (or a hash with more
    // fields than a home has): named with their size, the limits then counting as corrupt.
    if (const json* oversize = list(j, "oversize")) {
        for (const json& o : *oversize) {
            std::string key;
            std::string field;
            std::int64_t n = 0;
            if (!o.is_object() || !text(o, "k", key) || !text(o, "f", field) || !integer(o, "n", n))
                return corrupt(stateKey, "the Redis script answered a snapshot with something else");
            const bool isLimits = key == limitsKey;
            bool longName = false;
            if (o.contains("nm") && !flag(o, "nm", longName))
                return corrupt(stateKey, "the Redis script answered a snapshot with something else");
            out.corruptKey = field.empty() ? key
                                           : key + " field " + TextSanitizer::clean(field, 64)
                    + (longName ? "..." : "");
            out.corruptReason = longName
                ? "has a field name of " + std::to_string(n) + " bytes, longer than any Tollgate writes; refused unread"
                : field.empty()
                ? "has " + std::to_string(n) + " fields, more than the "
                    + std::to_string(isLimits ? MAX_HASH_FIELDS : MAX_STATE_FIELDS)
                    + " a home's hash may have; refused unread"
                : tooLarge(static_cast<std::size_t>(n), isLimits ? MAX_LIMITS_BYTES : MAX_STATE_BYTES,
                    isLimits ? "a provider's limits" : "a field of the state");
            if (isLimits)
                out.limitsCorrupt = true;
        }
    }
    // Taken on the server's own clock (not a test's): its gaps are stalls (decodeProvider).
    bool serverClock = false;
    if (j.contains("stall") && !flag(j, "stall", serverClock))
        serverClock = false;
    for (std::size_t i = 0; i + 1 < limits->size(); i += 2) {
        const json& name = (*limits)[i];
        const json& value = (*limits)[i + 1];
        const auto provider = bytesOf(name);
        if (!provider)
            continue;
        const std::string text = bytesOf(value).value_or(std::string());
        auto l = parseCompactLimits(*provider, text, limitsKey);
        if (!l) {
            out.corruptKey = l.error().path;
            out.corruptReason = l.error().message;
            out.limitsCorrupt = true;
            continue;
        }
        if (auto set = out.limits.set(*provider, *l); !set) {
            out.corruptKey = limitsKey;
            out.corruptReason = set.error().message;
            out.limitsCorrupt = true;
        }
    }
    if (state->empty())
        return out;
    // The waiters' records ("q:<ticket>"), for the providers' queues to find by ticket.
    WaiterRecords waiters;
    for (std::size_t i = 0; i + 1 < state->size(); i += 2) {
        const json& name = (*state)[i];
        const json& value = (*state)[i + 1];
        if (!name.is_string() || !(value.is_string() || value.is_binary()))
            continue;
        const std::string& field = name.get_ref<const std::string&>();
        if (field.rfind("q:", 0) != 0)
            continue;
        std::int64_t tk = 0;
        const char* first = field.data() + 2;
        const char* last = field.data() + field.size();
        if (auto [end, ec] = std::from_chars(first, last, tk); ec != std::errc() || end != last || tk < 1)
            continue; // not a waiter's field: nothing of the script's
        waiters.emplace(tk, *bytesOf(value));
    }
    QuotaState s;
    for (std::size_t i = 0; i + 1 < state->size(); i += 2) {
        const json& name = (*state)[i];
        const json& value = (*state)[i + 1];
        if (!name.is_string() || !(value.is_string() || value.is_binary()))
            continue;
        const std::string& field = name.get_ref<const std::string&>();
        if (field.rfind("q:", 0) == 0)
            continue; // a waiter's record, read above with its provider's queue
        const std::string blob = *bytesOf(value);
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
            auto p = decodeProvider(blob, myHost, myPidNs, serverClock ? out.nowMs : 0, waiters);
            if (!p) {
                out.corruptKey = stateKey + " field " + field;
                out.corruptReason = p.error().message;
                continue;
            }
            if (s.providers.size() < QuotaState::MAX_PROVIDERS)
                s.providers.push_back(std::move(p).value());
        } else if (field == "lost") {
            // JSON {"at": ms, "reason": text} (markLost). Shown, never trusted: one that does not
            // read is left out, not a reason to refuse the rest.
            const json m = json::parse(blob, nullptr, false);
            std::int64_t at = 0;
            std::string reason;
            if (m.is_object() && integer(m, "at", at) && text(m, "reason", reason) && at > 0 && at < NEVER) {
                out.dataLostAtMs = at;
                out.dataLostReason = TextSanitizer::clean(reason, 512);
            }
        }
    }
    out.state = std::move(s);
    return out;
}

} // namespace tollgate
