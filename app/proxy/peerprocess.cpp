#include "proxy/peerprocess.h"

#include "system/fd.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <functional>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <memory>
#include <netinet/in.h>
#include <sstream>
#include <sys/time.h>
#include <unistd.h>
#include <vector>

namespace tollgate::proxy {

namespace {

// An address and port as /proc/net/tcp* prints them: the address's bytes as the kernel holds
// them, printed 32 bits at a time in host order ("0100007F:1F90" is 127.0.0.1:8080 here).
std::string procAddress(const sockaddr_storage& a)
{
    char out[64] = {};
    if (a.ss_family == AF_INET) {
        const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
        std::snprintf(out, sizeof out, "%08X:%04X", v4->sin_addr.s_addr, ntohs(v4->sin_port));
    } else if (a.ss_family == AF_INET6) {
        const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
        std::uint32_t w[4];
        std::memcpy(w, &v6->sin6_addr, sizeof w);
        std::snprintf(out, sizeof out, "%08X%08X%08X%08X:%04X", w[0], w[1], w[2], w[3], ntohs(v6->sin6_port));
    }
    return out;
}

bool loopback(const sockaddr_storage& a)
{
    if (a.ss_family == AF_INET)
        return (ntohl(reinterpret_cast<const sockaddr_in*>(&a)->sin_addr.s_addr) >> 24) == 127;
    if (a.ss_family == AF_INET6) {
        // The proxy listens on loopback only: an IPv6 peer is ::1 (a v4-mapped one would
        // need a dual-stack listener).
        return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr);
    }
    return false;
}

// The owner by number: a name would ask NSS, which may block (LDAP, sssd).
std::string ownerOf(unsigned uid)
{
    return "uid " + std::to_string(uid);
}

// The socket table's line for a connection from `local` to `remote` (both as procAddress
// prints them): the owner's uid and the socket's inode.
bool findSocket(const char* table, const std::string& local, const std::string& remote, unsigned& uid,
    std::uint64_t& inode)
{
    std::ifstream in(table);
    std::string line;
    std::getline(in, line); // the heading
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string slot, l, r, state, queues, timer, retransmits;
        unsigned timeout = 0;
        if (!(fields >> slot >> l >> r >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode))
            continue;
        if (l == local && r == remote)
            return true;
    }
    return false;
}

// An address of a sock_diag answer (`family`, four words) is the one asked for: the same, or
// the v4-mapped form of an IPv4 address (a dual-stack client socket found by its IPv4 ends).
bool sameAddress(unsigned family, const std::uint32_t* got, unsigned askedFamily, const std::uint32_t* asked)
{
    if (family == askedFamily)
        return family == AF_INET ? got[0] == asked[0] : std::memcmp(got, asked, 16) == 0;
    return family == AF_INET6 && askedFamily == AF_INET && got[0] == 0 && got[1] == 0
        && got[2] == htonl(0xffff) && got[3] == asked[0];
}

// The kernel's exact lookup of one TCP socket by its two ends (sock_diag): the socket whose
// local end is `local` and remote end `remote`, its owner's uid and its inode. One netlink
// round trip of microseconds, where /proc/net/tcp prints every socket of the machine —
// thousands in TIME_WAIT on a busy host, milliseconds to print and search. False when the
// kernel cannot answer (no inet_diag, a sandbox without netlink) or has no such socket.
bool diagSocket(
    const sockaddr_storage& local, const sockaddr_storage& remote, unsigned& uid, std::uint64_t& inode)
{
    Fd sock(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG), "sock_diag");
    if (!sock.valid())
        return false;
    // The kernel answers within the send; the timeout only bounds a kernel that never does.
    const timeval bound { 0, 200000 };
    ::setsockopt(sock.get(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
    struct
    {
        nlmsghdr header;
        inet_diag_req_v2 request;
    } ask {};
    ask.header.nlmsg_len = sizeof ask;
    ask.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    ask.header.nlmsg_flags = NLM_F_REQUEST; // one socket, not a dump of the table
    ask.header.nlmsg_seq = 1;
    ask.request.sdiag_family = static_cast<std::uint8_t>(local.ss_family);
    ask.request.sdiag_protocol = IPPROTO_TCP;
    ask.request.idiag_states = ~0u;
    inet_diag_sockid& id = ask.request.id;
    if (local.ss_family == AF_INET) {
        const auto* l = reinterpret_cast<const sockaddr_in*>(&local);
        const auto* r = reinterpret_cast<const sockaddr_in*>(&remote);
        id.idiag_sport = l->sin_port;
        id.idiag_dport = r->sin_port;
        id.idiag_src[0] = l->sin_addr.s_addr;
        id.idiag_dst[0] = r->sin_addr.s_addr;
    } else {
        const auto* l = reinterpret_cast<const sockaddr_in6*>(&local);
        const auto* r = reinterpret_cast<const sockaddr_in6*>(&remote);
        id.idiag_sport = l->sin6_port;
        id.idiag_dport = r->sin6_port;
        std::memcpy(id.idiag_src, &l->sin6_addr, sizeof id.idiag_src);
        std::memcpy(id.idiag_dst, &r->sin6_addr, sizeof id.idiag_dst);
    }
    id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    sockaddr_nl kernel {};
    kernel.nl_family = AF_NETLINK;
    ssize_t sent = 0;
    do {
        sent = ::sendto(sock.get(), &ask, sizeof ask, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel);
    } while (sent < 0 && errno == EINTR);
    if (sent != static_cast<ssize_t>(sizeof ask))
        return false;
    alignas(nlmsghdr) char answer[8192];
    ssize_t got = 0;
    do {
        got = ::recv(sock.get(), answer, sizeof answer, 0);
    } while (got < 0 && errno == EINTR);
    if (got <= 0)
        return false;
    auto left = static_cast<unsigned>(got); // NLMSG_NEXT's length type
    for (auto* h = reinterpret_cast<nlmsghdr*>(answer); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
            return false; // NLMSG_ERROR: no such socket (or no inet_diag)
        const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
        // The exact lookup falls back to a listener on the port when no connection matches
        // (the client is gone, and someone now listens where it was): only the connection
        // asked for, with both its ends, is an answer.
        if (m->idiag_state == 10 /* TCP_LISTEN */ || m->id.idiag_sport != id.idiag_sport
            || m->id.idiag_dport != id.idiag_dport
            || !sameAddress(m->idiag_family, m->id.idiag_src, local.ss_family, id.idiag_src)
            || !sameAddress(m->idiag_family, m->id.idiag_dst, local.ss_family, id.idiag_dst))
            return false;
        uid = m->idiag_uid;
        inode = m->idiag_inode;
        return inode != 0;
    }
    return false;
}

// An IPv4 address and port as /proc/net/tcp6 prints it when it is v4-mapped (::ffff:a.b.c.d):
// a dual-stack client (Java's default) reaching 127.0.0.1 through an IPv6 socket.
std::string mapped(const std::string& v4)
{
    return "0000000000000000FFFF0000" + v4;
}

} // namespace

std::string PeerProcess::nameOf(std::int64_t pid)
{
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    return name.empty() ? std::string() : name + "[" + std::to_string(pid) + "]";
}

std::string PeerProcess::ofUnixSocket(int fd)
{
    ucred cred {};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0)
        return {};
    return nameOf(cred.pid);
}

std::int64_t PeerProcess::holderOfSocket(std::uint64_t inode)
{
    if (inode == 0)
        return 0;
    const std::string wanted = "socket:[" + std::to_string(inode) + "]";
    std::vector<long long> pids;
    {
        std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
        if (!proc)
            return 0;
        const long long self = ::getpid();
        while (const dirent* e = ::readdir(proc.get())) {
            char* end = nullptr;
            const long long pid = std::strtoll(e->d_name, &end, 10);
            if (pid > 0 && *end == '\0' && pid != self)
                pids.push_back(pid);
            if (pids.size() >= static_cast<std::size_t>(MAX_PROCESSES))
                break;
        }
    }
    // Newest first: a client that just connected was most often just started (curl, a
    // script), and the scan stops at the first holder; long-lived clients keep their
    // connection, so they are looked up once.
    std::sort(pids.begin(), pids.end(), std::greater<>());
    long links = 0;
    char link[64];
    for (const long long pid : pids) {
        const std::string fdDir = "/proc/" + std::to_string(pid) + "/fd";
        std::unique_ptr<DIR, int (*)(DIR*)> fds(::opendir(fdDir.c_str()), ::closedir);
        if (!fds)
            continue; // another user's process: its descriptors are not ours to read
        while (const dirent* f = ::readdir(fds.get())) {
            if (f->d_name[0] == '.')
                continue;
            if (++links > MAX_DESCRIPTORS)
                return 0;
            const std::string path = fdDir + "/" + f->d_name;
            const ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
            if (n > 0 && static_cast<std::size_t>(n) == wanted.size()
                && std::memcmp(link, wanted.data(), n) == 0)
                return pid;
        }
    }
    return 0;
}

std::optional<PeerProcess::ClientSocket> PeerProcess::clientSocket(int fd, Lookup how)
{
    sockaddr_storage ours {};
    sockaddr_storage theirs {};
    socklen_t a = sizeof ours;
    socklen_t b = sizeof theirs;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ours), &a) != 0
        || ::getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &b) != 0 || !loopback(theirs))
        return std::nullopt;
    // The client's socket: its local end is our peer, its remote end is us.
    ClientSocket found;
    if (how == Lookup::SockDiag)
        return diagSocket(theirs, ours, found.uid, found.inode) ? std::optional(found) : std::nullopt;
    const std::string local = procAddress(theirs);
    const std::string remote = procAddress(ours);
    const bool v4 = theirs.ss_family == AF_INET;
    if (findSocket(v4 ? "/proc/net/tcp" : "/proc/net/tcp6", local, remote, found.uid, found.inode)
        || (v4 && findSocket("/proc/net/tcp6", mapped(local), mapped(remote), found.uid, found.inode)))
        return found;
    return std::nullopt;
}

std::string PeerProcess::ofLoopbackTcp(int fd)
{
    auto client = clientSocket(fd, Lookup::SockDiag);
    if (!client)
        client = clientSocket(fd, Lookup::ProcTable);
    if (!client)
        return {};
    if (const std::int64_t pid = holderOfSocket(client->inode); pid > 0) {
        if (std::string name = nameOf(pid); !name.empty())
            return name;
    }
    return ownerOf(client->uid);
}

} // namespace tollgate::proxy
