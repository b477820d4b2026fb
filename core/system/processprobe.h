#pragma once

// ProcessProbe: is the process that a lock or slot names still there?
// Only ESRCH from kill(pid, 0) means "no such process"; EPERM means it exists under another
// user. PIDs are reused, so when the holder's start time is known (/proc/PID/stat field 22)
// a process that started after the lock was taken cannot be its holder and counts as dead.
// A zombie (exited, not yet reaped) counts as dead too: it will never release anything.
//
// A pid means something only inside its pid namespace: a slot holder is recorded with the
// namespace it lives in (pidNamespace(), the inode of /proc/self/ns/pid) and its exact start
// time (startTicks()), and only a reader in that same namespace may probe it (holderLiveness).

#include <cstdint>
#include <optional>
#include <string>

namespace tollgate {

enum class Liveness { Alive, Dead };

class ProcessProbe
{
public:
    // Seconds of slack between a process's start time (from clock ticks since boot, plus the
    // integral boot time) and a lock timestamp (whole seconds), so rounding never kills a holder.
    static constexpr std::int64_t START_TIME_SLACK = 2;

    virtual ~ProcessProbe() = default;

    // heldSince: unix seconds at which the holder already existed (the lock's timestamp).
    [[nodiscard]] virtual Liveness liveness(std::int64_t pid, std::optional<std::int64_t> heldSince) const;
    // The cheap test (one kill(pid, 0)): false only when the pid surely does not exist.
    [[nodiscard]] virtual bool exists(std::int64_t pid) const;
    // Unix seconds at which the process started, when /proc tells.
    [[nodiscard]] virtual std::optional<std::int64_t> startTime(std::int64_t pid) const;
    // Space-joined argv from /proc/PID/cmdline; empty when unknown.
    [[nodiscard]] virtual std::string commandLine(std::int64_t pid) const;
    // The user the process runs as (owner of /proc/PID); nullopt when unknown or gone.
    [[nodiscard]] virtual std::optional<std::int64_t> userOf(std::int64_t pid) const;

    // The pid namespace this process lives in (inode of /proc/self/ns/pid); 0 when unknown.
    [[nodiscard]] virtual std::uint64_t pidNamespace() const;
    // When the process started, in clock ticks since boot (/proc/PID/stat field 22) as the
    // initial time namespace counts them (the kernel shifts the field by the reader's boottime
    // offset: ours is taken off), so readers in two time namespaces agree: with the pid, it
    // names one process for as long as the machine runs. nullopt when /proc does not
    // tell, or when the /proc mounted here belongs to another pid namespace (its numbers would
    // name other processes).
    [[nodiscard]] virtual std::optional<std::uint64_t> startTicks(std::int64_t pid) const;
    // The liveness of a holder recorded in this process's pid namespace: dead when the pid is
    // gone, a zombie, or now names a process with another start time (startTicks 0: unknown,
    // not compared). Calls liveness(pid, nullopt), so a probe that fakes liveness() fakes this.
    [[nodiscard]] virtual Liveness holderLiveness(std::int64_t pid, std::uint64_t startTicks) const;

    [[nodiscard]] static std::int64_t selfPid();
    [[nodiscard]] static std::int64_t parentPid();
    // The process a slot taken for "whoever ran tollgate" is held for: our parent, unless that
    // parent is a shell's subshell made for a command substitution — a forked copy of its own
    // parent (the same executable and command line) whose standard output is a pipe that
    // parent reads, as bash makes for fence=$(tollgate acquire --slot ... 2>/dev/null) and
    // exits as soon as tollgate does. Then the shell above it (and above nested
    // substitutions) is the holder: the subshell's death would free the slot while the
    // script goes on to make its call. A subshell that nobody above reads (`( ... ) &`)
    // stays the holder: it may outlive the script. Linux /proc; parentPid() where it does
    // not tell.
    [[nodiscard]] static std::int64_t callerPid();
};

} // namespace tollgate
