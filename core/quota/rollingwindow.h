#pragma once

// RollingWindow: requests and tokens admitted in the last `window`, in bounded memory.
//
// Time is cut into BUCKETS buckets per window (width g = ceil(window / BUCKETS) ms) kept in a
// ring of BUCKETS + 1 slots. A bucket counts as long as its *end* is later than now − window,
// so every admission of the last window is always counted, plus at most one bucket (g) of
// older ones. Admitting only while count + 1 ≤ N therefore guarantees that no interval of the
// window's length ever holds more than N admissions (and likewise for tokens): exact in
// the only direction that matters, at the cost of releasing capacity up to g late.
// Memory and cost are the same at 100 and at 1,000,000 requests per window.

#include <array>
#include <cstdint>

namespace tollgate {

class RollingWindow
{
public:
    static constexpr int BUCKETS = 32;
    static constexpr int SLOTS = BUCKETS + 1;
    static constexpr std::int64_t MAX_WINDOW_MS = 7LL * 24 * 3600 * 1000;
    // Bounds that keep every sum and time computed here far from int64 overflow; a decoded
    // state beyond them is corrupt (see QuotaState::decode).
    static constexpr std::int64_t MAX_BUCKET_COUNT = std::int64_t(1) << 50;
    static constexpr std::int64_t MAX_TIME_MS = std::int64_t(1) << 60;

    struct Bucket
    {
        std::int64_t index = -1; // absolute bucket number (time / width); -1 = empty
        std::int64_t requests = 0;
        std::int64_t tokens = 0;
        // The provider's split of the tokens (its counting rule's input and output). Not
        // always input + output = tokens: an admission whose split is unknown counts its
        // tokens in full toward each (QuotaPolicy), and a state from before the split reads
        // back that way.
        std::int64_t input = 0;
        std::int64_t output = 0;
    };
    // An amount of each metric: used, wanted, or (negative: none) a limit.
    struct Usage
    {
        std::int64_t requests = 0;
        std::int64_t tokens = 0;
        std::int64_t input = 0;
        std::int64_t output = 0;
    };

    explicit RollingWindow(std::int64_t windowMs = 60000);

    [[nodiscard]] std::int64_t windowMs() const { return m_windowMs; }
    [[nodiscard]] std::int64_t bucketMs() const { return m_bucketMs; }
    [[nodiscard]] Usage usage(std::int64_t nowMs) const;
    void record(std::int64_t nowMs, std::int64_t requests, std::int64_t tokens);
    void record(std::int64_t nowMs, const Usage& amount);
    // Earliest time ≥ now at which `requests` more requests and `tokens` more tokens fit
    // under the limits (a missing limit is passed as a negative number). INT64_MAX: never.
    [[nodiscard]] std::int64_t whenFits(std::int64_t nowMs, std::int64_t requests, std::int64_t requestLimit,
        std::int64_t tokens, std::int64_t tokenLimit) const;
    // A new window length: what is in the window now is kept, conservatively, as if it had
    // all happened now (it cannot be re-bucketed exactly).
    void rescale(std::int64_t newWindowMs, std::int64_t nowMs);
    // The same for every metric: `limit`'s negative fields are no limit.
    [[nodiscard]] std::int64_t whenFits(std::int64_t nowMs, const Usage& amount, const Usage& limit) const;
    // Whether `used` plus `amount` stays within `limit` in every metric (a negative limit: none).
    [[nodiscard]] static bool fits(const Usage& used, const Usage& amount, const Usage& limit);
    // Adds `delta` to `to`, each metric kept within 0 .. MAX_BUCKET_COUNT (as a bucket is).
    static void add(Usage& to, const Usage& delta);
    // Reconcile an estimate: adds delta (may be negative) to each metric of the bucket that
    // holds atMs, as adjustTokens does.
    void adjust(std::int64_t atMs, std::int64_t nowMs, const Usage& delta);
    // Reconcile an estimate: adds delta tokens (may be negative) to the bucket that holds
    // atMs, if it is still in the ring; otherwise a positive delta lands in the current bucket.
    void adjustTokens(std::int64_t atMs, std::int64_t nowMs, std::int64_t delta);
    // Buckets stamped more than a window ahead of now (the clock was stepped back after a
    // wrong date, or a forged state) would keep the window full until that date comes: their
    // counts move to the current bucket, where they count for one window more. A bucket less
    // than a window ahead stays (it counts at most two windows). true: something moved.
    bool boundFuture(std::int64_t nowMs);

    [[nodiscard]] const std::array<Bucket, SLOTS>& buckets() const { return m_buckets; }
    // For the state decoder: restores a ring exactly as stored; false (and an empty window)
    // when the values are out of the bounds above.
    [[nodiscard]] bool restore(std::int64_t windowMs, const std::array<Bucket, SLOTS>& buckets);

private:
    [[nodiscard]] std::int64_t oldestCounted(std::int64_t nowMs) const;

    std::int64_t m_windowMs;
    std::int64_t m_bucketMs;
    std::array<Bucket, SLOTS> m_buckets {};
};

} // namespace tollgate
