#include "quota/rollingwindow.h"

#include "base/intmath.h"

#include <algorithm>
#include <climits>

namespace tollgate {

namespace {

std::int64_t widthFor(std::int64_t windowMs)
{
    // ceil(windowMs / BUCKETS) without the overflow of windowMs + BUCKETS - 1
    return std::max<std::int64_t>(
        1, windowMs / RollingWindow::BUCKETS + (windowMs % RollingWindow::BUCKETS != 0));
}

void addTo(RollingWindow::Bucket& b, const RollingWindow::Usage& a)
{
    // Bounded as the state decoder requires (a lying usage report must not make the state
    // unreadable); the callers' amounts are far below this.
    auto add = [](std::int64_t& to, std::int64_t v) {
        to = std::clamp<std::int64_t>(to + v, 0, RollingWindow::MAX_BUCKET_COUNT);
    };
    add(b.requests, a.requests);
    add(b.tokens, a.tokens);
    add(b.input, a.input);
    add(b.output, a.output);
}

void addTo(RollingWindow::Usage& u, const RollingWindow::Bucket& b, int sign)
{
    u.requests += sign * b.requests;
    u.tokens += sign * b.tokens;
    u.input += sign * b.input;
    u.output += sign * b.output;
}

} // namespace

bool RollingWindow::fits(const Usage& used, const Usage& amount, const Usage& limit)
{
    auto one = [](std::int64_t u, std::int64_t a, std::int64_t l) { return l < 0 || u + a <= l; };
    return one(used.requests, amount.requests, limit.requests)
        && one(used.tokens, amount.tokens, limit.tokens) && one(used.input, amount.input, limit.input)
        && one(used.output, amount.output, limit.output);
}

void RollingWindow::add(Usage& to, const Usage& delta)
{
    auto one
        = [](std::int64_t& v, std::int64_t d) { v = std::clamp<std::int64_t>(v + d, 0, MAX_BUCKET_COUNT); };
    one(to.requests, delta.requests);
    one(to.tokens, delta.tokens);
    one(to.input, delta.input);
    one(to.output, delta.output);
}

RollingWindow::RollingWindow(std::int64_t windowMs)
    : m_windowMs(std::clamp<std::int64_t>(windowMs, 1, MAX_WINDOW_MS))
    , m_bucketMs(widthFor(m_windowMs))
{
}

std::int64_t RollingWindow::oldestCounted(std::int64_t nowMs) const
{
    // Bucket k counts while its end (k + 1) * g is later than now − window.
    return IntMath::floorDiv(nowMs - m_windowMs, m_bucketMs);
}

RollingWindow::Usage RollingWindow::usage(std::int64_t nowMs) const
{
    const std::int64_t lo = oldestCounted(nowMs);
    Usage u;
    for (const auto& b : m_buckets) {
        // Buckets from the future (the clock went back) still count: conservative.
        if (b.index >= 0 && b.index >= lo)
            addTo(u, b, 1);
    }
    return u;
}

void RollingWindow::record(std::int64_t nowMs, std::int64_t requests, std::int64_t tokens)
{
    record(nowMs, Usage { requests, tokens, 0, 0 });
}

void RollingWindow::record(std::int64_t nowMs, const Usage& amount)
{
    const std::int64_t k = IntMath::floorDiv(nowMs, m_bucketMs);
    Bucket& b = m_buckets[static_cast<std::size_t>(((k % SLOTS) + SLOTS) % SLOTS)];
    // A future bucket (clock went back) is never overwritten: the amount folds into it.
    if (b.index != k && b.index < k)
        b = Bucket { k, 0, 0, 0, 0 };
    addTo(b, amount);
}

std::int64_t RollingWindow::whenFits(std::int64_t nowMs, std::int64_t requests, std::int64_t requestLimit,
    std::int64_t tokens, std::int64_t tokenLimit) const
{
    return whenFits(nowMs, Usage { requests, tokens, 0, 0 }, Usage { requestLimit, tokenLimit, -1, -1 });
}

std::int64_t RollingWindow::whenFits(std::int64_t nowMs, const Usage& amount, const Usage& limit) const
{
    if (!fits(Usage {}, amount, limit))
        return INT64_MAX;
    Usage u = usage(nowMs);
    auto fitsNow = [&](const Usage& cur) { return RollingWindow::fits(cur, amount, limit); };
    if (fitsNow(u))
        return nowMs;
    const std::int64_t lo = oldestCounted(nowMs);
    std::array<Bucket, SLOTS> live {};
    int n = 0;
    for (const auto& b : m_buckets) {
        if (b.index >= 0 && b.index >= lo)
            live[static_cast<std::size_t>(n++)] = b;
    }
    std::sort(
        live.begin(), live.begin() + n, [](const Bucket& a, const Bucket& b) { return a.index < b.index; });
    for (int i = 0; i < n; ++i) {
        addTo(u, live[static_cast<std::size_t>(i)], -1);
        // Bucket k stops counting once now − window ≥ (k + 1) * g.
        const std::int64_t leaves = (live[static_cast<std::size_t>(i)].index + 1) * m_bucketMs + m_windowMs;
        if (fitsNow(u))
            return std::max(leaves, nowMs);
    }
    return INT64_MAX;
}

void RollingWindow::rescale(std::int64_t newWindowMs, std::int64_t nowMs)
{
    // Compared as the constructor will store it: asking again for a length beyond the bounds
    // must change nothing, not re-count the usage as if it had all happened now.
    if (std::clamp<std::int64_t>(newWindowMs, 1, MAX_WINDOW_MS) == m_windowMs)
        return;
    const Usage u = usage(nowMs);
    *this = RollingWindow(newWindowMs);
    if (u.requests || u.tokens || u.input || u.output)
        record(nowMs, u);
}

bool RollingWindow::boundFuture(std::int64_t nowMs)
{
    const std::int64_t k = IntMath::floorDiv(nowMs, m_bucketMs);
    Usage moving;
    bool moved = false;
    for (Bucket& b : m_buckets) {
        if (b.index > k + BUCKETS) {
            addTo(moving, b, 1); // at most SLOTS * MAX_BUCKET_COUNT: far from overflow
            b = Bucket {};
            moved = true;
        }
    }
    if (moved)
        record(nowMs, moving);
    return moved;
}

void RollingWindow::adjustTokens(std::int64_t atMs, std::int64_t nowMs, std::int64_t delta)
{
    adjust(atMs, nowMs, Usage { 0, delta, 0, 0 });
}

void RollingWindow::adjust(std::int64_t atMs, std::int64_t nowMs, const Usage& delta)
{
    const std::int64_t k = IntMath::floorDiv(atMs, m_bucketMs);
    Bucket& b = m_buckets[static_cast<std::size_t>(((k % SLOTS) + SLOTS) % SLOTS)];
    if (b.index == k) {
        addTo(b, delta);
        return;
    }
    // The admission's bucket has left the ring: what it used beyond its estimate still counts
    // (now), what it used less is already forgotten.
    const Usage late { std::max<std::int64_t>(0, delta.requests), std::max<std::int64_t>(0, delta.tokens),
        std::max<std::int64_t>(0, delta.input), std::max<std::int64_t>(0, delta.output) };
    if (late.requests || late.tokens || late.input || late.output)
        record(nowMs, late);
}

bool RollingWindow::restore(std::int64_t windowMs, const std::array<Bucket, SLOTS>& buckets)
{
    *this = RollingWindow(windowMs);
    if (windowMs < 1 || windowMs > MAX_WINDOW_MS)
        return false;
    for (const auto& b : buckets) {
        auto bad = [](std::int64_t v) { return v < 0 || v > MAX_BUCKET_COUNT; };
        if (b.index < -1 || bad(b.requests) || bad(b.tokens) || bad(b.input) || bad(b.output)
            || (b.index >= 0 && b.index > MAX_TIME_MS / m_bucketMs))
            return false;
    }
    m_buckets = buckets;
    return true;
}

} // namespace tollgate
