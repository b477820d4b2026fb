#pragma once

// PromptEstimator: how much of a request's prompt the provider will count, before the answer
// says it. Under Anthropic's rule (CountingRule) the part read from the prompt cache does not
// count toward input tokens, and an agent's prompt is mostly that part: a long system prompt
// and the conversation so far, sent again on every call. The request cannot show which part is
// cached (the cache is the provider's), so the estimate is learnt from the answers of the same
// (caller, model):
//
//   share      the last settled call's counted input / its estimated prompt size
//   estimate   min(P, max(ceil(share * P), P - Plast)) for a prompt estimated at P, when the
//              same (caller, model) settled a call with a prompt of Plast <= P within
//              CACHE_TTL_MS; else P, the whole prompt (the conservative first figure)
//
// Why those terms: what an agent adds since its last call (P - Plast) was never sent before,
// so it cannot be a cache read; the share carries the rest of the last call's uncached part
// forward. A prompt smaller than the last one is another conversation (or a compacted one):
// its prefix is not known to be cached, so it counts whole; so does a key silent for longer
// than the provider's default cache lifetime (5 minutes for Anthropic's ephemeral cache).
// docs/PROVIDERS.md gives the bound this keeps on an agent-like sequence, and
// tst_promptestimator measures it.
//
// Invariants: 0 <= estimate <= P (never more than the whole prompt, never negative); at most
// maxKeys keys (the least recently learnt is evicted first), each key at most 2 * MAX_NAME
// bytes of name; no clock of its own (the caller passes the time), no I/O: a pure value that
// one thread owns (not synchronised).

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tollgate {

class PromptEstimator
{
public:
    static constexpr std::size_t DEFAULT_MAX_KEYS = 4096;
    static constexpr std::size_t MAX_NAME = 128; // longer callers / models are cut to this
    static constexpr std::int64_t CACHE_TTL_MS = 5 * 60 * 1000;

    explicit PromptEstimator(std::size_t maxKeys = DEFAULT_MAX_KEYS);

    // The counted input to admit a request with, whose whole prompt is estimated at
    // `promptTokens` (RequestEstimate::inputTokens).
    [[nodiscard]] std::int64_t estimate(
        std::string_view caller, std::string_view model, std::int64_t promptTokens, std::int64_t nowMs) const;
    // A settled call of (caller, model): its prompt was estimated at `promptTokens`, and the
    // answer counted `countedInput` (CountingRule::count(usage).inputTokens).
    void learn(std::string_view caller, std::string_view model, std::int64_t promptTokens,
        std::int64_t countedInput, std::int64_t nowMs);

    [[nodiscard]] std::size_t size() const { return m_index.size(); }
    [[nodiscard]] std::size_t maxKeys() const { return m_maxKeys; }

private:
    struct Entry
    {
        std::string key;
        std::int64_t lastPrompt = 0; // the estimated prompt size of the last settled call
        double share = 1.0; // its counted input / lastPrompt, in [0, 1]
        std::int64_t lastMs = 0; // when it settled
    };
    [[nodiscard]] static std::string keyOf(std::string_view caller, std::string_view model);

    std::size_t m_maxKeys;
    std::list<Entry> m_entries; // most recently learnt first
    std::unordered_map<std::string, std::list<Entry>::iterator> m_index;
};

} // namespace tollgate
