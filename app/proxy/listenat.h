#pragma once

// ListenAt: where the proxy listens (--listen): HOST:PORT on an IP address (loopback only,
// unless a shared token is set: anyone who can reach it spends the shared quota) or
// unix:PATH (a socket file of mode 0600). Parsed once at start.

#include "base/result.h"

#include <string>
#include <sys/types.h>

namespace tollgate::proxy {

struct ListenAt
{
    bool isUnix = false;
    std::string path;
    // The socket file this proxy bound: removed at exit only while the path still names it
    // (another proxy may have bound the path since someone removed ours).
    dev_t boundDev = 0;
    ino_t boundIno = 0;
    std::string host;
    unsigned short port = 0;

    // `remote`: a shared token is set (--token-file), so an address others can reach is allowed.
    [[nodiscard]] static Result<ListenAt> parse(const std::string& text, bool remote);
};

} // namespace tollgate::proxy
