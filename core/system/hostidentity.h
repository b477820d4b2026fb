#pragma once

// HostIdentity: which "host" a process is, for holders and waiters that share one quota from
// many machines (the Redis home). A host is a machine *and* a pid namespace: two containers on
// one machine number their processes independently, so a pid means something only to a reader
// of the same host id, and only there may a dead pid be reclaimed at once; everyone else goes
// by the holder's lease.
//
// The machine part is a digest of the systemd/D-Bus machine id *and* the kernel's boot id
// (/proc/sys/kernel/random/boot_id, random at every boot). The machine id alone is not enough:
// virtual machines cloned from one template often share /etc/machine-id, and clones with one
// host id would take each other's pids for their own and reclaim each other's live slots (issue
// 27). Two running machines never share a boot id. The cost: the id changes at every reboot,
// so holders recorded before a reboot are judged by their lease, like another host's — never
// by a pid the new boot may have handed to someone else. Within a boot it is stable.
//
// The id ends with the host's name for people (" build-box/3f2a9c1e0b7d": the node name and,
// in a container, the container's id), so that `status` and the dashboard can say which host
// holds a slot or waits — the id alone means nothing to an operator. It is part of the id, not
// stored beside it, so every record of a holder or waiter carries it with no extra key and no
// extra write. A node name changed mid-boot (rare) makes later processes another host to the
// earlier ones: they then judge each other by lease, which is slower to free, never unsafe.

#include "base/result.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate {

class HostIdentity
{
public:
    // Where the two ids come from; tests give files of their own.
    struct Sources
    {
        std::vector<std::string> machineIdFiles { "/etc/machine-id", "/var/lib/dbus/machine-id" };
        std::string bootIdFile = "/proc/sys/kernel/random/boot_id";
        std::string cgroupFile = "/proc/self/cgroup"; // where a container's id shows
        std::string mountInfoFile = "/proc/self/mountinfo"; // ... or there (a private cgroup namespace)
        std::string nodeName; // empty: uname's
    };
    static constexpr std::size_t MAX_NAME = 64; // characters of the node name kept

    // "<32 hex digits of the digest of machine id and boot id>-<pid namespace inode, hex> <name>".
    // An error names the files tried when there is no readable, well-formed machine id or boot id.
    [[nodiscard]] static Result<std::string> current(std::uint64_t pidNamespace);
    [[nodiscard]] static Result<std::string> current(std::uint64_t pidNamespace, const Sources& sources);
    [[nodiscard]] static std::string make(
        std::string_view machineId, std::string_view bootId, std::uint64_t pidNamespace);
    // The machine id from `path` (32 lowercase hex digits, one line); refuses anything else.
    [[nodiscard]] static Result<std::string> readMachineId(const std::string& path);
    // The boot id from `path` (a UUID: 8-4-4-4-12 lowercase hex digits, one line).
    [[nodiscard]] static Result<std::string> readBootId(const std::string& path);
    // For people: the node name (letters, digits, '.', '-', '_'; others become '_'; at most
    // MAX_NAME), then "/" and the first 12 hex digits of the container's id when this process
    // runs in one (and the node name is not that already).
    [[nodiscard]] static std::string hostName();
    [[nodiscard]] static std::string hostName(const Sources& sources);
    // The container id (64 hex digits) that /proc/self/cgroup or /proc/self/mountinfo name
    // (docker, podman, containerd, kubernetes); empty when none.
    [[nodiscard]] static std::string containerId(std::string_view cgroup, std::string_view mountInfo);
    // The name part of a host id ("" for an id without one: written by an older version).
    [[nodiscard]] static std::string nameOf(std::string_view hostId);
    // A host for people: its name, or "3d1219c7…-effffffc" for an id without one.
    [[nodiscard]] static std::string shortName(std::string_view hostId);
    // The same in a sentence: "host NAME", or "another host (3d1219c7…-effffffc)".
    [[nodiscard]] static std::string describe(std::string_view hostId);
};

} // namespace tollgate
