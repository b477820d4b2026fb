#include "quota/quotastate.h"

#include "base/textsanitizer.h"
#include "quota/quotalimits.h"

#include <bit>
#include <cstring>

namespace tollgate {

namespace {

constexpr std::uint32_t PAYLOAD_MAGIC = 0x53514754; // "TGQS" little-endian

class Writer
{
public:
    Writer() { m_out.reserve(512); }
    void u8(std::uint8_t v) { m_out.push_back(static_cast<char>(v)); }
    void u16(std::uint16_t v) { raw(&v, 2); }
    void u32(std::uint32_t v) { raw(&v, 4); }
    void u64(std::uint64_t v) { raw(&v, 8); }
    void i32(std::int32_t v) { raw(&v, 4); }
    void i64(std::int64_t v) { raw(&v, 8); }
    void str(std::string_view s)
    {
        s = s.substr(0, QuotaState::MAX_TEXT);
        u16(static_cast<std::uint16_t>(s.size()));
        m_out.append(s);
    }
    std::string take() { return std::move(m_out); }

private:
    void raw(const void* p, std::size_t n) { m_out.append(static_cast<const char*>(p), n); }
    std::string m_out;
};

static_assert(std::endian::native == std::endian::little, "the state format is little-endian");

class Reader
{
public:
    explicit Reader(std::string_view in)
        : m_in(in)
    {
    }
    bool u8(std::uint8_t& v) { return raw(&v, 1); }
    bool u16(std::uint16_t& v) { return raw(&v, 2); }
    bool u32(std::uint32_t& v) { return raw(&v, 4); }
    bool u64(std::uint64_t& v) { return raw(&v, 8); }
    bool i32(std::int32_t& v) { return raw(&v, 4); }
    bool i64(std::int64_t& v) { return raw(&v, 8); }
    bool flag(bool& v)
    {
        std::uint8_t b = 0;
        if (!u8(b) || b > 1)
            return false;
        v = b != 0;
        return true;
    }
    bool str(std::string& s)
    {
        std::uint16_t n = 0;
        if (!u16(n) || n > QuotaState::MAX_TEXT || n > m_in.size() - m_pos)
            return false;
        s.assign(m_in.substr(m_pos, n));
        m_pos += n;
        return true;
    }
    [[nodiscard]] bool atEnd() const { return m_pos == m_in.size(); }
    [[nodiscard]] std::size_t pos() const { return m_pos; }

private:
    bool raw(void* p, std::size_t n)
    {
        if (n > m_in.size() - m_pos)
            return false;
        std::memcpy(p, m_in.data() + m_pos, n);
        m_pos += n;
        return true;
    }
    std::string_view m_in;
    std::size_t m_pos = 0;
};

Error bad(const Reader& r, const std::string& what)
{
    return Error::make(
        ErrorKind::Corrupt, "", "state payload: " + what + " (at byte " + std::to_string(r.pos()) + ")");
}

} // namespace

const char* waitReasonName(WaitReason r)
{
    switch (r) {
    case WaitReason::None:
        return "none";
    case WaitReason::Paused:
        return "paused";
    case WaitReason::Backoff:
        return "backoff";
    case WaitReason::Queue:
        return "queue";
    case WaitReason::Window:
        return "window";
    case WaitReason::Tokens:
        return "tokens";
    case WaitReason::Slots:
        return "slots";
    }
    return "unknown";
}

ScopeWindow* ProviderState::scope(std::string_view model)
{
    for (auto& s : scopes) {
        if (s.model == model)
            return &s;
    }
    return nullptr;
}

const ScopeWindow* ProviderState::scope(std::string_view model) const
{
    return const_cast<ProviderState*>(this)->scope(model);
}

ProviderState* QuotaState::provider(std::string_view name)
{
    for (auto& p : providers) {
        if (p.name == name)
            return &p;
    }
    return nullptr;
}

const ProviderState* QuotaState::provider(std::string_view name) const
{
    return const_cast<QuotaState*>(this)->provider(name);
}

ProviderState& QuotaState::ensureProvider(std::string_view name)
{
    if (auto* p = provider(name))
        return *p;
    providers.push_back(ProviderState {});
    providers.back().name = std::string(name);
    return providers.back();
}

namespace {

// One rolling window: its length, then the buckets in use (slot, index, requests, tokens and,
// with `split`, input and output).
void writeWindow(Writer& w, const RollingWindow& window, bool split)
{
    w.i64(window.windowMs());
    std::uint8_t used = 0;
    for (const auto& b : window.buckets())
        used += b.index >= 0 ? 1 : 0;
    w.u8(used);
    for (std::size_t i = 0; i < window.buckets().size(); ++i) {
        const auto& b = window.buckets()[i];
        if (b.index < 0)
            continue;
        w.u8(static_cast<std::uint8_t>(i));
        w.i64(b.index);
        w.i64(b.requests);
        w.i64(b.tokens);
        if (split) {
            w.i64(b.input);
            w.i64(b.output);
        }
    }
}

bool readWindow(Reader& r, RollingWindow& window, bool split, const char*& why)
{
    std::int64_t windowMs = 0;
    std::uint8_t used = 0;
    why = "truncated window";
    if (!r.i64(windowMs) || !r.u8(used))
        return false;
    why = "invalid window";
    // A window the limits could never have (QuotaLimits' range): a forged one of 1 ms made
    // every request look a window old, and the window empty.
    if (windowMs < QuotaLimits::MIN_WINDOW_MS || windowMs > RollingWindow::MAX_WINDOW_MS
        || used > RollingWindow::SLOTS)
        return false;
    std::array<RollingWindow::Bucket, RollingWindow::SLOTS> buckets {};
    for (std::uint8_t i = 0; i < used; ++i) {
        std::uint8_t at = 0;
        RollingWindow::Bucket b;
        why = "truncated bucket";
        if (!r.u8(at) || !r.i64(b.index) || !r.i64(b.requests) || !r.i64(b.tokens))
            return false;
        if (split && (!r.i64(b.input) || !r.i64(b.output)))
            return false;
        why = "invalid bucket";
        if (at >= RollingWindow::SLOTS || b.index < 0 || b.requests < 0 || b.tokens < 0 || b.input < 0
            || b.output < 0)
            return false;
        buckets[at] = b;
    }
    why = "window values out of range";
    return window.restore(windowMs, buckets);
}

bool needsVersion4(const QuotaState& s)
{
    for (const auto& p : s.providers) {
        for (const auto& sc : p.scopes) {
            if (sc.split || sc.day != ScopeWindow::Day::None)
                return true;
        }
    }
    return false;
}

bool needsVersion7(const QuotaState& s)
{
    for (const auto& p : s.providers) {
        for (const auto& slot : p.slots) {
            if (slot.ticket != 0)
                return true;
        }
        for (const auto& q : p.queue) {
            if (q.holds)
                return true;
        }
    }
    return false;
}

bool needsVersion6(const QuotaState& s)
{
    for (const auto& p : s.providers) {
        if (p.remainingUntilMs != 0)
            return true;
    }
    return false;
}

bool needsVersion5(const QuotaState& s)
{
    for (const auto& p : s.providers) {
        if (p.reportedInputTokens >= 0 || p.reportedOutputTokens >= 0 || !p.reportedScope.empty()
            || p.plan.atMs != 0)
            return true;
        for (const auto& slot : p.slots) {
            if (slot.inputTokens != 0 || slot.outputTokens != 0)
                return true;
        }
    }
    return false;
}

} // namespace

RollingWindow::Usage ScopeWindow::dayUsage(std::int64_t nowMs, std::int64_t dayStart) const
{
    switch (day) {
    case Day::Rolling:
        return rollingDay.usage(nowMs);
    case Day::Calendar:
        return dayStartMs == dayStart ? dayUsed : RollingWindow::Usage {};
    case Day::None:
        break;
    }
    return {};
}

std::string QuotaState::encode() const
{
    Writer w;
    w.u32(PAYLOAD_MAGIC);
    const bool v7 = needsVersion7(*this);
    const bool v6 = v7 || needsVersion6(*this);
    const bool v5 = v6 || needsVersion5(*this);
    const bool v4 = v5 || needsVersion4(*this);
    w.u32(v7 ? FORMAT_VERSION : v6 ? 6 : v5 ? 5 : v4 ? 4 : PLAIN_FORMAT_VERSION);
    w.u64(nextFence);
    w.u64(nextTicket);
    w.u8(pausedAll ? 1 : 0);
    w.str(pauseReason);
    w.i64(pausedAtMs);
    w.u16(static_cast<std::uint16_t>(providers.size()));
    for (const auto& p : providers) {
        w.str(p.name);
        w.u8(p.paused ? 1 : 0);
        w.str(p.pauseReason);
        w.i64(p.pausedAtMs);
        w.i32(p.consecutive429);
        w.i64(p.backoffUntilMs);
        w.i64(p.last429Ms);
        w.i64(p.paceUntilMs);
        w.i64(p.lastAdmitMs);
        w.u64(p.admittedTotal);
        w.u64(p.rateLimitedTotal);
        w.i64(p.reportedAtMs);
        w.i64(p.reportedRequests);
        w.i64(p.reportedTokens);
        if (v5) {
            w.i64(p.reportedInputTokens);
            w.i64(p.reportedOutputTokens);
            w.str(p.reportedScope);
            w.i64(p.plan.atMs);
            w.u8(static_cast<std::uint8_t>(p.plan.status));
            w.i64(p.plan.fiveHourPermille);
            w.i64(p.plan.fiveHourResetMs);
            w.i64(p.plan.sevenDayPermille);
            w.i64(p.plan.sevenDayResetMs);
        }
        if (v6) {
            w.i64(p.remainingRequests);
            w.i64(p.remainingUntilMs);
            w.str(p.remainingScope);
        }
        w.u16(static_cast<std::uint16_t>(p.scopes.size()));
        for (const auto& s : p.scopes) {
            w.str(s.model);
            if (v4) // the scope's kind comes first: it says how the buckets are laid out
                w.u8(static_cast<std::uint8_t>((s.split ? 1 : 0) | static_cast<std::uint8_t>(s.day) << 1));
            writeWindow(w, s.window, s.split);
            if (s.day == ScopeWindow::Day::Rolling) {
                writeWindow(w, s.rollingDay, s.split);
            } else if (s.day == ScopeWindow::Day::Calendar) {
                w.i64(s.dayStartMs);
                w.i64(s.dayUsed.requests);
                w.i64(s.dayUsed.tokens);
                w.i64(s.dayUsed.input);
                w.i64(s.dayUsed.output);
            }
        }
        w.u16(static_cast<std::uint16_t>(p.slots.size()));
        for (const auto& s : p.slots) {
            w.u64(s.fence);
            w.i64(s.pid);
            w.i64(s.acquiredMs);
            w.i64(s.tokens);
            w.str(s.caller);
            w.str(s.model);
            w.u64(s.pidNs);
            w.u64(s.startTicks);
            w.i64(s.leaseUntilMs);
            if (v5) {
                w.i64(s.inputTokens);
                w.i64(s.outputTokens);
            }
            if (v7)
                w.u64(s.ticket);
        }
        w.u16(static_cast<std::uint16_t>(p.queue.size()));
        for (const auto& q : p.queue) {
            w.u64(q.ticket);
            w.i64(q.pid);
            w.i64(q.enqueuedMs);
            w.i64(q.deadlineMs);
            w.i64(q.tokens);
            w.str(q.caller);
            w.str(q.model);
            w.u8(q.wantsSlot ? 1 : 0);
            w.u8(static_cast<std::uint8_t>(q.reason));
            w.u64(q.pidNs);
            w.u64(q.startTicks);
            w.i64(q.leaseUntilMs);
            if (v7) {
                w.u8(static_cast<std::uint8_t>((q.holds ? 1 : 0) | (q.estimated ? 2 : 0)));
                w.i64(q.inputTokens);
                w.i64(q.outputTokens);
                w.i64(q.leaseMs);
                w.i64(q.holderPid);
                w.u64(q.holderStartTicks);
            }
        }
    }
    return w.take();
}

Result<QuotaState> QuotaState::decode(std::string_view bytes)
{
    Reader r(bytes);
    std::uint32_t magic = 0, version = 0;
    if (!r.u32(magic) || magic != PAYLOAD_MAGIC)
        return bad(r, "wrong magic number");
    if (!r.u32(version))
        return bad(r, "truncated header");
    if (version < OLDEST_READABLE_VERSION || version > FORMAT_VERSION)
        return Error::make(ErrorKind::Unsupported, "",
            "the state was written in format version " + std::to_string(version)
                + " by another Tollgate version (this one reads " + std::to_string(OLDEST_READABLE_VERSION)
                + " to " + std::to_string(FORMAT_VERSION) + "); leaving it untouched");
    const bool holderIds = version >= 2; // namespace, start time and lease of slots and waiters
    const bool reported = version >= 3; // the provider's own limits
    QuotaState s;
    std::uint16_t nProviders = 0;
    if (!r.u64(s.nextFence) || !r.u64(s.nextTicket) || !r.flag(s.pausedAll) || !r.str(s.pauseReason)
        || !r.i64(s.pausedAtMs) || !r.u16(nProviders))
        return bad(r, "truncated header");
    if (nProviders > MAX_PROVIDERS)
        return bad(r, "too many providers");
    // Fences and tickets count up, one per admission or wait (from the clock x 1000 after a
    // reset): near 2^64 the next one would wrap to 0, the placeholder's fence.
    constexpr std::uint64_t maxCounter = std::uint64_t(1) << 62;
    if (s.nextFence > maxCounter || s.nextTicket > maxCounter)
        return bad(r, "invalid fence or ticket counter");
    s.providers.resize(nProviders);
    for (auto& p : s.providers) {
        std::uint16_t nScopes = 0, nSlots = 0, nWaiters = 0;
        if (!r.str(p.name) || !r.flag(p.paused) || !r.str(p.pauseReason) || !r.i64(p.pausedAtMs)
            || !r.i32(p.consecutive429) || !r.i64(p.backoffUntilMs) || !r.i64(p.last429Ms)
            || !r.i64(p.paceUntilMs) || !r.i64(p.lastAdmitMs) || !r.u64(p.admittedTotal)
            || !r.u64(p.rateLimitedTotal))
            return bad(r, "truncated provider");
        if (p.consecutive429 < 0 || p.consecutive429 > (1 << 20))
            return bad(r, "invalid count of consecutive 429s");
        if (reported) {
            if (!r.i64(p.reportedAtMs) || !r.i64(p.reportedRequests) || !r.i64(p.reportedTokens))
                return bad(r, "truncated provider");
            constexpr std::int64_t maxReported = std::int64_t(1) << 40; // LimitMismatch::MAX_REPORTED
            if (p.reportedAtMs < 0 || p.reportedRequests < -1 || p.reportedTokens < -1
                || p.reportedRequests > maxReported || p.reportedTokens > maxReported)
                return bad(r, "invalid provider-reported limits");
        }
        if (version >= 5) {
            std::uint8_t status = 0;
            PlanUsage& u = p.plan;
            if (!r.i64(p.reportedInputTokens) || !r.i64(p.reportedOutputTokens) || !r.str(p.reportedScope)
                || !r.i64(u.atMs) || !r.u8(status) || !r.i64(u.fiveHourPermille) || !r.i64(u.fiveHourResetMs)
                || !r.i64(u.sevenDayPermille) || !r.i64(u.sevenDayResetMs))
                return bad(r, "truncated provider");
            constexpr std::int64_t maxReported = std::int64_t(1) << 40;
            auto badReport = [](std::int64_t v) { return v < -1 || v > maxReported; };
            auto badShare = [](std::int64_t v) { return v < -1 || v > PlanUsage::MAX_PERMILLE; };
            auto badTime = [](std::int64_t v) { return v < 0 || v > RollingWindow::MAX_TIME_MS; };
            if (badReport(p.reportedInputTokens) || badReport(p.reportedOutputTokens))
                return bad(r, "invalid provider-reported limits");
            if (status > static_cast<std::uint8_t>(PlanUsage::Status::Rejected)
                || badShare(u.fiveHourPermille) || badShare(u.sevenDayPermille) || badTime(u.atMs)
                || badTime(u.fiveHourResetMs) || badTime(u.sevenDayResetMs))
                return bad(r, "invalid plan usage");
            u.status = static_cast<PlanUsage::Status>(status);
        }
        if (version >= 6) {
            if (!r.i64(p.remainingRequests) || !r.i64(p.remainingUntilMs) || !r.str(p.remainingScope))
                return bad(r, "truncated provider");
            if (p.remainingRequests < 0 || p.remainingRequests > (std::int64_t(1) << 40)
                || p.remainingUntilMs < 0 || p.remainingUntilMs > RollingWindow::MAX_TIME_MS
                || p.remainingScope.size() > MAX_TEXT
                || TextSanitizer::clean(p.remainingScope, MAX_TEXT) != p.remainingScope)
                return bad(r, "invalid stated remainder");
        }
        if (!r.u16(nScopes))
            return bad(r, "truncated provider");
        if (nScopes > 64)
            return bad(r, "too many scopes");
        p.scopes.resize(nScopes);
        for (auto& sc : p.scopes) {
            const char* why = "truncated window";
            if (!r.str(sc.model))
                return bad(r, why);
            if (version >= 4) {
                std::uint8_t kind = 0;
                if (!r.u8(kind))
                    return bad(r, why);
                if (kind > 5)
                    return bad(r, "invalid scope kind");
                sc.split = (kind & 1) != 0;
                sc.day = static_cast<ScopeWindow::Day>(kind >> 1);
            }
            if (!readWindow(r, sc.window, sc.split, why))
                return bad(r, why);
            if (sc.day == ScopeWindow::Day::Rolling) {
                if (!readWindow(r, sc.rollingDay, sc.split, why))
                    return bad(r, why);
                if (sc.rollingDay.windowMs() != ScopeWindow::DAY_MS)
                    return bad(r, "invalid day window");
            } else if (sc.day == ScopeWindow::Day::Calendar) {
                auto& u = sc.dayUsed;
                if (!r.i64(sc.dayStartMs) || !r.i64(u.requests) || !r.i64(u.tokens) || !r.i64(u.input)
                    || !r.i64(u.output))
                    return bad(r, "truncated day");
                auto bad64 = [](std::int64_t v) { return v < 0 || v > RollingWindow::MAX_BUCKET_COUNT; };
                if (sc.dayStartMs < 0 || sc.dayStartMs > RollingWindow::MAX_TIME_MS || bad64(u.requests)
                    || bad64(u.tokens) || bad64(u.input) || bad64(u.output))
                    return bad(r, "invalid day");
            }
        }
        if (!r.u16(nSlots) || nSlots > MAX_SLOTS)
            return bad(r, "invalid slot count");
        p.slots.resize(nSlots);
        for (auto& sl : p.slots) {
            if (!r.u64(sl.fence) || !r.i64(sl.pid) || !r.i64(sl.acquiredMs) || !r.i64(sl.tokens)
                || !r.str(sl.caller) || !r.str(sl.model))
                return bad(r, "truncated slot");
            if (holderIds && (!r.u64(sl.pidNs) || !r.u64(sl.startTicks) || !r.i64(sl.leaseUntilMs)))
                return bad(r, "truncated slot");
            if (sl.pid < 0 || sl.pid > (std::int64_t(1) << 32) || sl.acquiredMs < 0
                || sl.acquiredMs > RollingWindow::MAX_TIME_MS || sl.fence > maxCounter)
                return bad(r, "invalid slot");
            if (version >= 5) {
                if (!r.i64(sl.inputTokens) || !r.i64(sl.outputTokens))
                    return bad(r, "truncated slot");
                if (sl.inputTokens < 0 || sl.outputTokens < 0
                    || sl.inputTokens > RollingWindow::MAX_BUCKET_COUNT
                    || sl.outputTokens > RollingWindow::MAX_BUCKET_COUNT)
                    return bad(r, "invalid slot split");
            }
            if (version >= 7 && !r.u64(sl.ticket))
                return bad(r, "truncated slot");
        }
        if (!r.u16(nWaiters) || nWaiters > MAX_WAITERS)
            return bad(r, "invalid waiter count");
        p.queue.resize(nWaiters);
        for (auto& q : p.queue) {
            std::uint8_t reason = 0;
            if (!r.u64(q.ticket) || !r.i64(q.pid) || !r.i64(q.enqueuedMs) || !r.i64(q.deadlineMs)
                || !r.i64(q.tokens) || !r.str(q.caller) || !r.str(q.model) || !r.flag(q.wantsSlot)
                || !r.u8(reason))
                return bad(r, "truncated waiter");
            if (holderIds && (!r.u64(q.pidNs) || !r.u64(q.startTicks) || !r.i64(q.leaseUntilMs)))
                return bad(r, "truncated waiter");
            if (reason > static_cast<std::uint8_t>(WaitReason::Slots))
                return bad(r, "invalid wait reason");
            q.reason = static_cast<WaitReason>(reason);
            if (version >= 7) {
                std::uint8_t flags = 0;
                if (!r.u8(flags) || !r.i64(q.inputTokens) || !r.i64(q.outputTokens) || !r.i64(q.leaseMs)
                    || !r.i64(q.holderPid) || !r.u64(q.holderStartTicks))
                    return bad(r, "truncated waiter");
                if (flags > 3 || q.inputTokens < 0 || q.outputTokens < 0
                    || q.inputTokens > RollingWindow::MAX_BUCKET_COUNT
                    || q.outputTokens > RollingWindow::MAX_BUCKET_COUNT || q.leaseMs < 0
                    || q.leaseMs > RollingWindow::MAX_TIME_MS || q.holderPid < 0)
                    return bad(r, "invalid waiter hand-off");
                q.holds = (flags & 1) != 0;
                q.estimated = (flags & 2) != 0;
            }
        }
    }
    if (!r.atEnd())
        return bad(r, "trailing bytes");
    return s;
}

} // namespace tollgate
