#pragma once

// RequestRules: what of a client's request may go upstream. Hop-by-hop headers (RFC 9110
// §7.6.1) and the proxy's own never do; a request whose framing or target cannot be
// forwarded as it is gets an answer of the proxy's own and its connection closed (request
// smuggling, a target that would leave --upstream's base path); a fragment is dropped.

#include "proxy/netcommon.h"

#include <optional>
#include <string>
#include <utility>

namespace tollgate::proxy {

class RequestRules
{
public:
    // `lowerName`: a header's name in lower case.
    [[nodiscard]] static bool hopByHop(const std::string& lowerName);
    // Why a request's framing or target cannot be forwarded as it is (nullopt: it can), as
    // the status and message to answer before its connection is closed.
    [[nodiscard]] static std::optional<std::pair<unsigned, std::string>> unforwardable(
        const http::request<http::string_body>& request);
    // Takes a `#fragment` off the request's target: a fragment is the client's own (RFC 3986
    // §3.5; RFC 9110 §7.1: never sent to a server), so none goes upstream. Done before anything
    // else reads the target (the token's path, unforwardable, the upstream's request).
    static void dropFragment(http::request<http::string_body>& request);
};

} // namespace tollgate::proxy
