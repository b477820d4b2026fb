#pragma once

// Upstream: where the proxy forwards (--upstream): http:// or https://, a host (a name, an
// IPv4 or a bracketed IPv6 address), an optional port and an optional base path that every
// request target is joined to. No user, query or fragment: nothing in it is secret or
// ambiguous. Parsed once at start; read-only afterwards (every connection reads it).

#include "base/result.h"

#include <string>

namespace tollgate::proxy {

struct Upstream
{
    bool tls = false;
    std::string host;
    std::string port;
    std::string base; // path prefix without its trailing '/'
    std::string hostHeader;

    // Errors are usage errors naming what is wrong.
    [[nodiscard]] static Result<Upstream> parse(const std::string& url);
};

} // namespace tollgate::proxy
