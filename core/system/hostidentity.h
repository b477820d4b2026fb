#pragma once

// HostIdentity: which "host" a process is, for holders and waiters that share one quota from
// many machines (the Redis home). A host is a machine *and* a pid namespace: two containers on
// one machine number their processes independently, so a pid means something only to a reader
// of the same host id, and only there may a dead pid be reclaimed at once; everyone else goes
// by the holder's lease. The machine part is the systemd/D-Bus machine id (stable across
// reboots, unique per installation; containers usually have their own or share the host's —
// either way the pid namespace tells them apart).

#include "base/result.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace tollgate {

class HostIdentity
{
public:
    // "<32 hex machine id>-<pid namespace inode, hex>". An error names the files tried when
    // there is no readable, well-formed machine id.
    [[nodiscard]] static Result<std::string> current(std::uint64_t pidNamespace);
    [[nodiscard]] static std::string make(std::string_view machineId, std::uint64_t pidNamespace);
    // The machine id from `path` (32 lowercase hex digits, one line); refuses anything else.
    [[nodiscard]] static Result<std::string> readMachineId(const std::string& path);
    // For people: the node name (uname), control bytes removed, at most 64 characters.
    [[nodiscard]] static std::string hostName();
};

} // namespace tollgate
