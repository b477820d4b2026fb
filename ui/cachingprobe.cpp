#include "cachingprobe.h"

#include <cstdint>

namespace tollgate {

Liveness CachingProbe::liveness(std::int64_t pid, std::optional<std::int64_t> heldSince) const
{
    Entry& e = entry(pid);
    if (!e.liveness)
        e.liveness = m_base->liveness(pid, std::nullopt);
    if (*e.liveness == Liveness::Dead || !heldSince)
        return *e.liveness;
    // ProcessProbe::liveness's rule: a process that started after the lock was taken reuses
    // the number (heldSince comes from a file anyone may have forged: no overflow).
    const std::optional<std::int64_t> started = startTime(pid);
    if (started && *heldSince<INT64_MAX - START_TIME_SLACK&& * started> * heldSince + START_TIME_SLACK)
        return Liveness::Dead;
    return Liveness::Alive;
}

bool CachingProbe::exists(std::int64_t pid) const
{
    Entry& e = entry(pid);
    if (!e.exists)
        e.exists = m_base->exists(pid);
    return *e.exists;
}

std::optional<std::int64_t> CachingProbe::startTime(std::int64_t pid) const
{
    Entry& e = entry(pid);
    if (!e.startTime)
        e.startTime = m_base->startTime(pid);
    return *e.startTime;
}

std::string CachingProbe::commandLine(std::int64_t pid) const
{
    Entry& e = entry(pid);
    if (!e.commandLine)
        e.commandLine = m_base->commandLine(pid);
    return *e.commandLine;
}

std::optional<std::int64_t> CachingProbe::userOf(std::int64_t pid) const
{
    Entry& e = entry(pid);
    if (!e.userOf)
        e.userOf = m_base->userOf(pid);
    return *e.userOf;
}

std::optional<std::uint64_t> CachingProbe::startTicks(std::int64_t pid) const
{
    Entry& e = entry(pid);
    if (!e.startTicks)
        e.startTicks = m_base->startTicks(pid);
    return *e.startTicks;
}

} // namespace tollgate
