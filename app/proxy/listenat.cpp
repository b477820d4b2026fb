#include "proxy/listenat.h"

#include "base/textsanitizer.h"
#include "proxy/netcommon.h"
#include "system/pathpolicy.h"

#include <sys/un.h>

namespace tollgate::proxy {

Result<ListenAt> ListenAt::parse(const std::string& text, bool remote)
{
    ListenAt l;
    if (text.rfind("unix:", 0) == 0) {
        l.isUnix = true;
        l.path = text.substr(5);
        if (l.path.empty() || l.path.size() >= sizeof(sockaddr_un::sun_path))
            return Error::make(ErrorKind::Usage, {}, "--listen unix:PATH needs a path of at most 107 bytes");
        auto checked = PathPolicy::validate(l.path); // no "..", no control bytes
        if (!checked)
            return checked.error();
        return l;
    }
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon + 1 == text.size())
        return Error::make(ErrorKind::Usage, {},
            "--listen takes HOST:PORT or unix:PATH (got '" + TextSanitizer::clean(text, 200) + "')");
    l.host = text.substr(0, colon);
    if (l.host.size() > 2 && l.host.front() == '[' && l.host.back() == ']')
        l.host = l.host.substr(1, l.host.size() - 2);
    const std::string port = text.substr(colon + 1);
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos
        || std::stoi(port) > 65535)
        return Error::make(ErrorKind::Usage, {},
            "--listen: '" + TextSanitizer::clean(port, 20) + "' is not a port (0 to 65535)");
    l.port = static_cast<unsigned short>(std::stoi(port));
    boost::system::error_code ec;
    const auto address = net::ip::make_address(l.host, ec);
    if (ec)
        return Error::make(ErrorKind::Usage, {},
            "--listen: '" + TextSanitizer::clean(l.host, 100)
                + "' is not an IP address (use 127.0.0.1 or ::1)");
    if (!address.is_loopback() && !remote)
        return Error::make(ErrorKind::Usage, {},
            "--listen " + TextSanitizer::clean(text, 100)
                + ": the proxy listens on loopback only (127.0.0.1, ::1) or on a unix socket, unless"
                  " --token-file FILE names a shared token its clients must send: anyone who can reach it"
                  " spends the shared quota");
    return l;
}

} // namespace tollgate::proxy
