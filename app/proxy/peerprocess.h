#pragma once

// PeerProcess: who is at the other end of a client connection of the proxy, as a caller name
// ("curl[4242]") when the request does not name one (X-Tollgate-Caller).
//
//   unix socket     the peer's credentials (SO_PEERCRED): its pid, then /proc/PID/comm.
//   loopback TCP    the kernel gives the client socket's owner (uid) and inode: asked for that
//                   one socket by sock_diag (netlink), else found in its socket table
//                   (/proc/net/tcp, tcp6: every socket of the machine, slow when there are
//                   thousands); the process holding that inode is found among the
//                   /proc/PID/fd links this proxy may read (its own user's processes, or all as
//                   root). Not found (another user's process, or gone): its owner, "uid N"
//                   (a user name would ask NSS, which may block). A dual-stack client reaching
//                   127.0.0.1 from an IPv6 socket is found in tcp6 in its v4-mapped form.
//
// Best effort and bounded: the scan stops after MAX_PROCESSES processes or MAX_DESCRIPTORS
// descriptors looked at, and nothing here blocks (only /proc, which never does). An empty result means
// "unknown": the proxy then uses its --caller default. Linux only.

#include <cstdint>
#include <optional>
#include <string>
#include <sys/socket.h>

namespace tollgate::proxy {

class PeerProcess
{
public:
    static constexpr int MAX_PROCESSES = 32768;
    // (Not MAX_LINKS: <linux/netlink.h> defines that as a macro, 32, which silently cut the
    // scan short in the .cpp that includes it.)
    static constexpr long MAX_DESCRIPTORS = 262144;

    // The client's end of an accepted loopback TCP connection: its owner and inode.
    struct ClientSocket
    {
        unsigned uid = 0;
        std::uint64_t inode = 0;
    };
    // How it is found: asking the kernel for that one socket (sock_diag), or searching the
    // socket tables of /proc/net (the fallback; tests check that both agree).
    enum class Lookup { SockDiag, ProcTable };
    [[nodiscard]] static std::optional<ClientSocket> clientSocket(int fd, Lookup how);

    [[nodiscard]] static std::string ofUnixSocket(int fd);
    // `fd`: the accepted TCP socket (its two ends are read with getsockname/getpeername).
    [[nodiscard]] static std::string ofLoopbackTcp(int fd);

    // The process that holds socket `inode` (0: not found within the bound).
    [[nodiscard]] static std::int64_t holderOfSocket(std::uint64_t inode);
    // "comm[pid]", or "" when the process is gone.
    [[nodiscard]] static std::string nameOf(std::int64_t pid);
};

} // namespace tollgate::proxy
