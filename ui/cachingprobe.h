#pragma once

// CachingProbe: a ProcessProbe that asks its base about each pid once until clear(), so one
// look at the process table serves every lock file and slot of one refresh round (10,000
// lock files held by a few processes cost a few /proc reads, not 10,000).
//
// Invariants: every answer equals what the base gave for that pid at the first question of
// the round (liveness with a heldSince is derived from the base's liveness without one and
// its start time, by ProcessProbe::liveness's own rule); nothing is remembered past clear().
// Not thread-safe: one round, one thread.

#include "system/processprobe.h"

#include <unordered_map>

namespace tollgate {

class CachingProbe final : public ProcessProbe
{
public:
    explicit CachingProbe(const ProcessProbe& base)
        : m_base(&base)
    {
    }

    void clear() { m_cache.clear(); }
    // How many distinct pids the base was asked about since the last clear() (a test hook).
    [[nodiscard]] std::size_t size() const { return m_cache.size(); }

    [[nodiscard]] Liveness liveness(std::int64_t pid, std::optional<std::int64_t> heldSince) const override;
    [[nodiscard]] bool exists(std::int64_t pid) const override;
    [[nodiscard]] std::optional<std::int64_t> startTime(std::int64_t pid) const override;
    [[nodiscard]] std::string commandLine(std::int64_t pid) const override;
    [[nodiscard]] std::optional<std::int64_t> userOf(std::int64_t pid) const override;
    [[nodiscard]] std::uint64_t pidNamespace() const override { return m_base->pidNamespace(); }
    [[nodiscard]] std::optional<std::uint64_t> startTicks(std::int64_t pid) const override;

private:
    struct Entry
    {
        std::optional<Liveness> liveness; // without heldSince
        std::optional<bool> exists;
        std::optional<std::optional<std::int64_t>> startTime;
        std::optional<std::string> commandLine;
        std::optional<std::optional<std::int64_t>> userOf;
        std::optional<std::optional<std::uint64_t>> startTicks;
    };
    Entry& entry(std::int64_t pid) const { return m_cache[pid]; }

    const ProcessProbe* m_base; // not owned
    mutable std::unordered_map<std::int64_t, Entry> m_cache;
};

} // namespace tollgate
