#include "quota/rollingwindow.h"

#include <algorithm>
#include <climits>

namespace tollgate {

namespace {

std::int64_t floorDiv(std::int64_t a, std::int64_t b)
{
    std::int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        --q;
    return q;
}

std::int64_t widthFor(std::int64_t windowMs)
{
    // ceil(windowMs / BUCKETS) without the overflow of windowMs + BUCKETS - 1
    return std::max<std::int64_t>(
        1, windowMs / RollingWindow::BUCKETS + (windowMs % RollingWindow::BUCKETS != 0));
}

} // namespace

RollingWindow::RollingWindow(std::int64_t windowMs)
    : m_windowMs(std::clamp<std::int64_t>(windowMs, 1, MAX_WINDOW_MS))
    , m_bucketMs(widthFor(m_windowMs))
{
}

std::int64_t RollingWindow::oldestCounted(std::int64_t nowMs) const
{
    // Bucket k counts while its end (k + 1) * g is later than now − window.
    return floorDiv(nowMs - m_windowMs, m_bucketMs);
}

RollingWindow::Usage RollingWindow::usage(std::int64_t nowMs) const
{
    const std::int64_t lo = oldestCounted(nowMs);
    Usage u;
    for (const auto& b : m_buckets) {
        // Buckets from the future (the clock went back) still count: conservative.
        if (b.index >= 0 && b.index >= lo) {
            u.requests += b.requests;
            u.tokens += b.tokens;
        }
    }
    return u;
}

void RollingWindow::record(std::int64_t nowMs, std::int64_t requests, std::int64_t tokens)
{
    const std::int64_t k = floorDiv(nowMs, m_bucketMs);
    Bucket& b = m_buckets[static_cast<std::size_t>(((k % SLOTS) + SLOTS) % SLOTS)];
    if (b.index != k) {
        // A future bucket (clock went back) is never overwritten: fold into it instead.
        if (b.index > k) {
            b.requests = std::min(b.requests + requests, MAX_BUCKET_COUNT);
            b.tokens = std::min(b.tokens + tokens, MAX_BUCKET_COUNT);
            return;
        }
        b = Bucket { k, 0, 0 };
    }
    // Bounded as the state decoder requires (a lying usage report must not make the state
    // unreadable); the callers' amounts are far below this.
    b.requests = std::min(b.requests + requests, MAX_BUCKET_COUNT);
    b.tokens = std::min(b.tokens + tokens, MAX_BUCKET_COUNT);
}

std::int64_t RollingWindow::whenFits(std::int64_t nowMs, std::int64_t requests, std::int64_t requestLimit,
    std::int64_t tokens, std::int64_t tokenLimit) const
{
    if ((requestLimit >= 0 && requests > requestLimit) || (tokenLimit >= 0 && tokens > tokenLimit))
        return INT64_MAX;
    Usage u = usage(nowMs);
    auto fits = [&](const Usage& cur) {
        return (requestLimit < 0 || cur.requests + requests <= requestLimit)
            && (tokenLimit < 0 || cur.tokens + tokens <= tokenLimit);
    };
    if (fits(u))
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
        u.requests -= live[static_cast<std::size_t>(i)].requests;
        u.tokens -= live[static_cast<std::size_t>(i)].tokens;
        // Bucket k stops counting once now − window ≥ (k + 1) * g.
        const std::int64_t leaves = (live[static_cast<std::size_t>(i)].index + 1) * m_bucketMs + m_windowMs;
        if (fits(u))
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
    if (u.requests || u.tokens)
        record(nowMs, u.requests, u.tokens);
}

bool RollingWindow::boundFuture(std::int64_t nowMs)
{
    const std::int64_t k = floorDiv(nowMs, m_bucketMs);
    std::int64_t requests = 0;
    std::int64_t tokens = 0;
    bool moved = false;
    for (Bucket& b : m_buckets) {
        if (b.index > k + BUCKETS) {
            requests += b.requests; // at most SLOTS * MAX_BUCKET_COUNT: far from overflow
            tokens += b.tokens;
            b = Bucket {};
            moved = true;
        }
    }
    if (moved)
        record(nowMs, requests, tokens);
    return moved;
}

void RollingWindow::adjustTokens(std::int64_t atMs, std::int64_t nowMs, std::int64_t delta)
{
    const std::int64_t k = floorDiv(atMs, m_bucketMs);
    Bucket& b = m_buckets[static_cast<std::size_t>(((k % SLOTS) + SLOTS) % SLOTS)];
    if (b.index == k) {
        b.tokens = std::clamp<std::int64_t>(b.tokens + delta, 0, MAX_BUCKET_COUNT);
        return;
    }
    if (delta > 0)
        record(nowMs, 0, delta);
}

bool RollingWindow::restore(std::int64_t windowMs, const std::array<Bucket, SLOTS>& buckets)
{
    *this = RollingWindow(windowMs);
    if (windowMs < 1 || windowMs > MAX_WINDOW_MS)
        return false;
    for (const auto& b : buckets) {
        if (b.index < -1 || b.requests < 0 || b.tokens < 0 || b.requests > MAX_BUCKET_COUNT
            || b.tokens > MAX_BUCKET_COUNT || (b.index >= 0 && b.index > MAX_TIME_MS / m_bucketMs))
            return false;
    }
    m_buckets = buckets;
    return true;
}

} // namespace tollgate
