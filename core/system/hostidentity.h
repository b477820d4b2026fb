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
    };

    // "<32 hex digits of the digest of machine id and boot id>-<pid namespace inode, hex>". An
    // error names the files tried when there is no readable, well-formed machine id or boot id.
    [[nodiscard]] static Result<std::string> current(std::uint64_t pidNamespace);
    [[nodiscard]] static Result<std::string> current(std::uint64_t pidNamespace, const Sources& sources);
    [[nodiscard]] static std::string make(
        std::string_view machineId, std::string_view bootId, std::uint64_t pidNamespace);
    // The machine id from `path` (32 lowercase hex digits, one line); refuses anything else.
    [[nodiscard]] static Result<std::string> readMachineId(const std::string& path);
    // The boot id from `path` (a UUID: 8-4-4-4-12 lowercase hex digits, one line).
    [[nodiscard]] static Result<std::string> readBootId(const std::string& path);
    // For people: the node name (uname), control bytes removed, at most 64 characters.
    [[nodiscard]] static std::string hostName();
};

} // namespace tollgate
