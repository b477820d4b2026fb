#include "provider/promptestimator.h"

#include <algorithm>
#include <cmath>

namespace tollgate {

PromptEstimator::PromptEstimator(std::size_t maxKeys)
    : m_maxKeys(std::max<std::size_t>(maxKeys, 1))
{
}

std::string PromptEstimator::keyOf(std::string_view caller, std::string_view model)
{
    // Length-prefixed, so that no pair of names can spell another pair's key.
    caller = caller.substr(0, MAX_NAME);
    model = model.substr(0, MAX_NAME);
    std::string key = std::to_string(caller.size());
    key += ':';
    key += caller;
    key += model;
    return key;
}

std::int64_t PromptEstimator::estimate(
    std::string_view caller, std::string_view model, std::int64_t promptTokens, std::int64_t nowMs) const
{
    if (promptTokens <= 0)
        return 0;
    const auto it = m_index.find(keyOf(caller, model));
    if (it == m_index.end())
        return promptTokens; // nothing learnt: the whole prompt
    const Entry& e = *it->second;
    // Silent longer than the cache lives (a clock that went back counts as silent too), or a
    // prompt that is not the last one grown: its prefix is not known to be cached.
    // (The difference in unsigned: now >= last, so it is exact and cannot overflow.)
    if (nowMs < e.lastMs
        || static_cast<std::uint64_t>(nowMs) - static_cast<std::uint64_t>(e.lastMs)
            > static_cast<std::uint64_t>(CACHE_TTL_MS)
        || promptTokens < e.lastPrompt)
        return promptTokens;
    const double carried = std::ceil(e.share * static_cast<double>(promptTokens));
    const std::int64_t fromShare
        = carried >= static_cast<double>(promptTokens) ? promptTokens : static_cast<std::int64_t>(carried);
    const std::int64_t added = promptTokens - e.lastPrompt;
    return std::min(promptTokens, std::max(fromShare, added));
}

void PromptEstimator::learn(std::string_view caller, std::string_view model, std::int64_t promptTokens,
    std::int64_t countedInput, std::int64_t nowMs)
{
    if (promptTokens <= 0)
        return; // nothing to take a share of
    const double share = countedInput <= 0
        ? 0.0
        : std::min(1.0, static_cast<double>(countedInput) / static_cast<double>(promptTokens));
    std::string key = keyOf(caller, model);
    if (auto it = m_index.find(key); it != m_index.end()) {
        m_entries.splice(m_entries.begin(), m_entries, it->second); // most recent first
        Entry& e = m_entries.front();
        e.lastPrompt = promptTokens;
        e.share = share;
        e.lastMs = nowMs;
        return;
    }
    if (m_index.size() >= m_maxKeys) {
        m_index.erase(m_entries.back().key); // the least recently learnt
        m_entries.pop_back();
    }
    m_entries.push_front(Entry { key, promptTokens, share, nowMs });
    m_index.emplace(std::move(key), m_entries.begin());
}

} // namespace tollgate
