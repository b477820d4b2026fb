// redisquotaprelude: a build-time host tool that prints the constants redisquota.lua shares
// with the C++ policy, as Lua `local` lines, from the C++ definitions themselves.
//
// The hazard: the Redis script re-implements QuotaPolicy and RollingWindow in Lua. Constants
// copied into it by hand (bucket counts, leases, caps, defaults, the wait-reason numbers, the
// history's event names) drift the day one side changes, and the drift shows only as a
// decision that differs between a file home and a Redis home.
// The remedy: the script defines none of them. This program is compiled against the core's
// headers and prints each one from its constexpr (or default-constructed) value; CMake runs it
// and splices its output into the script at the marker line before the script is compiled
// into the library (cmake/embedredisscript.cmake). Enumerations are walked with switches
// without a default, compiled with -Werror=switch: a new enumerator breaks the build until it
// is named here, so the script can never lack one.
//
// Usage: redisquotaprelude OUTPUT (writes the prelude to OUTPUT).

#include "backend/redisquotabackend.h"
#include "history/historyevent.h"
#include "quota/limitmismatch.h"
#include "quota/quotalimits.h"
#include "quota/quotapolicy.h"
#include "quota/quotastate.h"
#include "quota/rollingwindow.h"
#include "store/redisstatecodec.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

using namespace tollgate;

namespace {

// The script's name for each wait reason, and the enumerator's (None is 0: "no reason",
// never named).
struct Named
{
    const char* lua;
    const char* cpp;
};
Named luaName(WaitReason r)
{
    switch (r) {
    case WaitReason::None:
        return { nullptr, "None" };
    case WaitReason::Paused:
        return { "R_PAUSED", "WaitReason::Paused" };
    case WaitReason::Backoff:
        return { "R_BACKOFF", "WaitReason::Backoff" };
    case WaitReason::Queue:
        return { "R_QUEUE", "WaitReason::Queue" };
    case WaitReason::Window:
        return { "R_WINDOW", "WaitReason::Window" };
    case WaitReason::Tokens:
        return { "R_TOKENS", "WaitReason::Tokens" };
    case WaitReason::Slots:
        return { "R_SLOTS", "WaitReason::Slots" };
    }
    return { nullptr, nullptr };
}

// The script's key for each history event type in its EVENT table (EVENT.ADMIT == "admit").
const char* luaName(EventType t)
{
    switch (t) {
    case EventType::Admit:
        return "ADMIT";
    case EventType::RateLimited:
        return "RATE_LIMITED";
    case EventType::Ok:
        return "OK";
    case EventType::GaveUp:
        return "GAVE_UP";
    case EventType::Pause:
        return "PAUSE";
    case EventType::Resume:
        return "RESUME";
    case EventType::Limits:
        return "LIMITS";
    case EventType::Release:
        return "RELEASE";
    case EventType::Reclaim:
        return "RECLAIM";
    case EventType::BackoffReset:
        return "BACKOFF_RESET";
    case EventType::Reset:
        return "RESET";
    case EventType::LockRelease:
        return "LOCK_RELEASE";
    case EventType::LockClean:
        return "LOCK_CLEAN";
    case EventType::Gap:
        return "GAP";
    case EventType::Hold:
        return "HOLD";
    case EventType::Overloaded:
        return "OVERLOADED";
    case EventType::LimitMismatch:
        return "LIMIT_MISMATCH";
    case EventType::QuotaWarning:
        return "QUOTA_WARNING";
    case EventType::BrokenOff:
        return "BROKEN_OFF";
    case EventType::Other:
        return nullptr; // a name this version does not know: never written
    }
    return nullptr;
}

// Every number the script handles must be exact in a Lua double (its invariant: integers
// below 2^53, NEVER being 2^53 itself).
constexpr bool exactInLua(std::int64_t v)
{
    return v >= -(std::int64_t(1) << 53) && v <= (std::int64_t(1) << 53);
}

class Prelude
{
public:
    void number(std::string_view name, std::int64_t value, std::string_view source)
    {
        if (!exactInLua(value)) {
            std::fprintf(stderr, "redisquotaprelude: %s (%s) is not exact in a Lua number\n",
                std::string(name).c_str(), std::string(source).c_str());
            m_failed = true;
        }
        m_text += "local " + std::string(name) + " = " + std::to_string(value) + " -- " + std::string(source)
            + "\n";
    }
    void text(std::string_view line) { m_text += std::string(line) + "\n"; }
    [[nodiscard]] bool failed() const { return m_failed; }
    [[nodiscard]] const std::string& str() const { return m_text; }

private:
    std::string m_text;
    bool m_failed = false;
};

} // namespace

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: redisquotaprelude OUTPUT\n");
        return 2;
    }
    Prelude p;
    p.text("-- Generated at build time by core/backend/redisquotaprelude.cpp from the C++ headers named");
    p.text("-- on each line: edit those, not this block.");
    p.number("BUCKETS", RollingWindow::BUCKETS, "RollingWindow::BUCKETS");
    p.number("SLOTS", RollingWindow::SLOTS, "RollingWindow::SLOTS");
    p.number("MAX_WINDOW_MS", RollingWindow::MAX_WINDOW_MS, "RollingWindow::MAX_WINDOW_MS");
    p.number("MAX_BUCKET_COUNT", RollingWindow::MAX_BUCKET_COUNT, "RollingWindow::MAX_BUCKET_COUNT");
    p.number("GHOST_GRACE_MS", QuotaPolicy::GHOST_GRACE_MS, "QuotaPolicy::GHOST_GRACE_MS");
    p.number("HEAD_LOOK_MS", RedisQuotaBackend::HEAD_LOOK.count(), "RedisQuotaBackend::HEAD_LOOK");
    p.number("HEAD_GRACE_MS", RedisQuotaBackend::HEAD_GRACE.count(), "RedisQuotaBackend::HEAD_GRACE");
    p.number("QUEUE_LOOK_MS", RedisQuotaBackend::QUEUE_LOOK.count(), "RedisQuotaBackend::QUEUE_LOOK");
    p.number("WAITER_LEASE_MS", RedisQuotaBackend::QUEUE_LEASE.count(), "RedisQuotaBackend::QUEUE_LEASE");
    p.number("MAX_JITTER_MS", QuotaPolicy::MAX_JITTER_MS, "QuotaPolicy::MAX_JITTER_MS");
    p.number("MAX_STOP_MS", QuotaPolicy::MAX_STOP_MS, "QuotaPolicy::MAX_STOP_MS");
    p.number("HOLD_NOTE_MS", QuotaPolicy::HOLD_NOTE_MS, "QuotaPolicy::HOLD_NOTE_MS");
    p.number("POST_HOLD_MS", QuotaPolicy::POST_HOLD_MS, "QuotaPolicy::POST_HOLD_MS");
    p.number("RENEWED_LEASE_MS", QuotaPolicy::RENEWED_LEASE_MS, "QuotaPolicy::RENEWED_LEASE_MS");
    p.number("MAX_BACKOFF_MS", QuotaLimits::MAX_BACKOFF_MS, "QuotaLimits::MAX_BACKOFF_MS");
    p.number("MAX_HOLD_MS", QuotaLimits::MAX_HOLD_MS, "QuotaLimits::MAX_HOLD_MS");
    // The ranges of a provider's limits the script checks before it enforces them (limitsProblem).
    p.number("LIMIT_MAX_COUNT", QuotaLimits::MAX_COUNT, "QuotaLimits::MAX_COUNT");
    p.number("LIMIT_MAX_PARALLEL", QuotaLimits::MAX_PARALLEL, "QuotaLimits::MAX_PARALLEL");
    p.number("LIMIT_MIN_WINDOW_MS", QuotaLimits::MIN_WINDOW_MS, "QuotaLimits::MIN_WINDOW_MS");
    p.number("LIMIT_MAX_WINDOW_MS", QuotaLimits::MAX_WINDOW_MS, "QuotaLimits::MAX_WINDOW_MS");
    p.number("LIMIT_MIN_HOLD_MS", QuotaLimits::MIN_HOLD_MS, "QuotaLimits::MIN_HOLD_MS");
    p.number(
        "LIMIT_MAX_MODELS", static_cast<std::int64_t>(QuotaLimits::MAX_MODELS), "QuotaLimits::MAX_MODELS");
    p.number("LIMIT_MAX_PATTERNS", static_cast<std::int64_t>(QuotaLimits::MAX_PATTERNS),
        "QuotaLimits::MAX_PATTERNS");
    p.number(
        "LIMIT_MAX_PATTERN", static_cast<std::int64_t>(QuotaLimits::MAX_PATTERN), "QuotaLimits::MAX_PATTERN");
    p.number("LIMIT_MAX_STARS", static_cast<std::int64_t>(QuotaLimits::MAX_STARS), "QuotaLimits::MAX_STARS");
    p.number(
        "MAX_PROVIDERS", static_cast<std::int64_t>(QuotaLimits::MAX_PROVIDERS), "QuotaLimits::MAX_PROVIDERS");
    p.number("MAX_WAITERS", static_cast<std::int64_t>(QuotaState::MAX_WAITERS), "QuotaState::MAX_WAITERS");
    p.number("MAX_SLOTS", static_cast<std::int64_t>(QuotaState::MAX_SLOTS), "QuotaState::MAX_SLOTS");
    p.number("MAX_REPORTED", LimitMismatch::MAX_REPORTED, "LimitMismatch::MAX_REPORTED");
    p.number("MAX_PERMILLE", PlanUsage::MAX_PERMILLE, "PlanUsage::MAX_PERMILLE");
    p.number("REPORT_REFRESH_MS", LimitMismatch::REFRESH_MS, "LimitMismatch::REFRESH_MS");
    p.number("NEVER", RedisStateCodec::NEVER, "RedisStateCodec::NEVER (2^53: no time)");
    p.number("MAX_LIMITS_BYTES", RedisStateCodec::MAX_LIMITS_BYTES, "RedisStateCodec::MAX_LIMITS_BYTES");
    p.number("MAX_STATE_BYTES", RedisStateCodec::MAX_STATE_BYTES, "RedisStateCodec::MAX_STATE_BYTES");
    p.number("MAX_HASH_FIELDS", RedisStateCodec::MAX_HASH_FIELDS, "RedisStateCodec::MAX_HASH_FIELDS");
    p.number("MAX_STATE_FIELDS", RedisStateCodec::MAX_STATE_FIELDS, "RedisStateCodec::MAX_STATE_FIELDS");
    p.number("QUEUE_TICKET_DIGITS", static_cast<std::int64_t>(RedisStateCodec::QUEUE_TICKET_DIGITS),
        "RedisStateCodec::QUEUE_TICKET_DIGITS");
    p.number("HOME_FORMAT", RedisQuotaBackend::HOME_FORMAT, "RedisQuotaBackend::HOME_FORMAT");

    // The defaults of a provider's limits (the script's DEFAULT_LIMITS).
    const ProviderLimits defaults;
    p.number("DEFAULT_WINDOW_MS", defaults.windowMs, "ProviderLimits::windowMs");
    p.number("DEFAULT_HEADROOM_PERCENT", defaults.headroomPercent, "ProviderLimits::headroomPercent");
    p.number("DEFAULT_BACKOFF_BASE_MS", defaults.backoffBaseMs, "ProviderLimits::backoffBaseMs");
    p.number("DEFAULT_BACKOFF_CAP_MS", defaults.backoffCapMs, "ProviderLimits::backoffCapMs");
    p.number("DEFAULT_MAX_HOLD_MS", defaults.maxHoldMs, "ProviderLimits::maxHoldMs");

    // WaitReason, by number: the reply's `reason` is read back as the enum's value.
    // The enumerators are numbered from 0 without gaps; the first number that is none of them
    // ends the walk, so one added at the end is printed too.
    for (int i = 0; i <= 255; ++i) {
        const Named n = luaName(static_cast<WaitReason>(i));
        if (!n.cpp)
            break;
        if (n.lua)
            p.number(n.lua, i, n.cpp);
    }

    // EventType, by the name history.jsonl carries (a misspelt EVENT.X is nil, which event()
    // refuses: no metatable, Redis's function sandbox has no setmetatable).
    p.text("local EVENT = {");
    for (EventType t : allEventTypes()) {
        const char* name = luaName(t);
        if (!name)
            continue;
        p.text("    " + std::string(name) + " = '" + std::string(eventTypeName(t)) + "',");
    }
    p.text("}");

    if (p.failed())
        return 1;
    std::FILE* out = std::fopen(argv[1], "wb");
    if (!out) {
        std::perror(argv[1]);
        return 1;
    }
    const std::string& s = p.str();
    const bool written = std::fwrite(s.data(), 1, s.size(), out) == s.size();
    if (std::fclose(out) != 0 || !written) {
        std::perror(argv[1]);
        return 1;
    }
    return 0;
}
