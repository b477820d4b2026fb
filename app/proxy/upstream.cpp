#include "proxy/upstream.h"

#include "base/textsanitizer.h"

namespace tollgate::proxy {

Result<Upstream> Upstream::parse(const std::string& url)
{
    Upstream u;
    std::string rest;
    if (url.rfind("https://", 0) == 0) {
        u.tls = true;
        rest = url.substr(8);
    } else if (url.rfind("http://", 0) == 0) {
        rest = url.substr(7);
    } else {
        return Error::make(ErrorKind::Usage, {},
            "--upstream must start with http:// or https:// (got '" + TextSanitizer::clean(url, 200) + "')");
    }
    if (rest.find_first_of("?#@ \t") != std::string::npos)
        return Error::make(ErrorKind::Usage, {},
            "--upstream takes no user, query or fragment: '" + TextSanitizer::clean(url, 200) + "'");
    const auto slash = rest.find('/');
    std::string authority = rest.substr(0, slash);
    u.base = slash == std::string::npos ? std::string() : rest.substr(slash);
    while (!u.base.empty() && u.base.back() == '/')
        u.base.pop_back();
    u.port = u.tls ? "443" : "80";
    if (!authority.empty() && authority.front() == '[') {
        const auto close = authority.find(']');
        if (close == std::string::npos)
            return Error::make(ErrorKind::Usage, {},
                "--upstream has an unclosed '[': '" + TextSanitizer::clean(url, 200) + "'");
        u.host = authority.substr(1, close - 1);
        if (close + 1 < authority.size()) {
            if (authority[close + 1] != ':')
                return Error::make(ErrorKind::Usage, {}, "--upstream: expected ':PORT' after ']'");
            u.port = authority.substr(close + 2);
        }
    } else {
        const auto colon = authority.rfind(':');
        u.host = authority.substr(0, colon);
        if (colon != std::string::npos)
            u.port = authority.substr(colon + 1);
    }
    if (u.host.empty() || u.port.empty() || u.port.size() > 5
        || u.port.find_first_not_of("0123456789") != std::string::npos || std::stoi(u.port) < 1
        || std::stoi(u.port) > 65535)
        return Error::make(ErrorKind::Usage, {},
            "--upstream needs a host and a port from 1 to 65535: '" + TextSanitizer::clean(url, 200) + "'");
    u.hostHeader = authority;
    return u;
}

} // namespace tollgate::proxy
