#include "system/hostidentity.h"

#include "base/textsanitizer.h"
#include "system/fd.h"

#include <cstdio>
#include <fcntl.h>
#include <sys/utsname.h>

namespace tollgate {

namespace {

constexpr const char* MACHINE_ID_FILES[] = { "/etc/machine-id", "/var/lib/dbus/machine-id" };

} // namespace

Result<std::string> HostIdentity::readMachineId(const std::string& path)
{
    auto fd = Fd::openRegular(path, O_RDONLY); // never blocks on a FIFO planted there
    if (!fd)
        return fd.error();
    auto text = fd->readAll(128);
    if (!text)
        return text.error();
    std::string id = std::move(text).value();
    while (!id.empty() && (id.back() == '\n' || id.back() == '\r'))
        id.pop_back();
    bool hex = id.size() == 32;
    for (char c : id)
        hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (!hex)
        return Error::make(ErrorKind::Corrupt, path, "not a machine id (32 lowercase hex digits)");
    return id;
}

std::string HostIdentity::make(std::string_view machineId, std::uint64_t pidNamespace)
{
    char ns[24];
    std::snprintf(ns, sizeof ns, "%llx", static_cast<unsigned long long>(pidNamespace));
    return std::string(machineId) + "-" + ns;
}

Result<std::string> HostIdentity::current(std::uint64_t pidNamespace)
{
    std::string tried;
    for (const char* path : MACHINE_ID_FILES) {
        auto id = readMachineId(path);
        if (id)
            return make(*id, pidNamespace);
        tried += (tried.empty() ? "" : "; ") + id.error().describe();
    }
    return Error::make(ErrorKind::NotFound, MACHINE_ID_FILES[0],
        "no machine id, so this host cannot be told from others (" + tried
            + "); create one with systemd-machine-id-setup or dbus-uuidgen --ensure");
}

std::string HostIdentity::hostName()
{
    utsname u {};
    if (::uname(&u) != 0)
        return "unknown";
    return TextSanitizer::clean(u.nodename, 64);
}

} // namespace tollgate
