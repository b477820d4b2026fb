#include "system/hostidentity.h"

#include "base/textsanitizer.h"
#include "system/fd.h"

#include <cstdio>
#include <optional>
#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/utsname.h>

namespace tollgate {

namespace {

bool lowerHex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

// One line of a small file of the system's, read without blocking (a FIFO planted there is
// refused, never waited on).
Result<std::string> readIdLine(const std::string& path)
{
    auto fd = Fd::openRegular(path, O_RDONLY);
    if (!fd)
        return fd.error();
    auto text = fd->readAll(128);
    if (!text)
        return text.error();
    std::string id = std::move(text).value();
    while (!id.empty() && (id.back() == '\n' || id.back() == '\r'))
        id.pop_back();
    return id;
}

} // namespace

Result<std::string> HostIdentity::readMachineId(const std::string& path)
{
    auto id = readIdLine(path);
    if (!id)
        return id.error();
    bool hex = id->size() == 32;
    for (char c : *id)
        hex = hex && lowerHex(c);
    if (!hex)
        return Error::make(ErrorKind::Corrupt, path, "not a machine id (32 lowercase hex digits)");
    return id;
}

Result<std::string> HostIdentity::readBootId(const std::string& path)
{
    auto id = readIdLine(path);
    if (!id)
        return id.error();
    bool uuid = id->size() == 36;
    for (std::size_t i = 0; uuid && i < id->size(); ++i)
        uuid = (i == 8 || i == 13 || i == 18 || i == 23) ? (*id)[i] == '-' : lowerHex((*id)[i]);
    if (!uuid)
        return Error::make(ErrorKind::Corrupt, path, "not a boot id (a UUID in lowercase hex digits)");
    return id;
}

std::string HostIdentity::make(std::string_view machineId, std::string_view bootId, std::uint64_t pidNamespace)
{
    // SHA-256 of both, cut to 128 bits: as long as a machine id was, and it does not show the
    // machine id itself to everyone who can read the home.
    const std::string both = std::string(machineId) + "\n" + std::string(bootId);
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(both.data()), both.size(), digest);
    static constexpr char HEX[] = "0123456789abcdef";
    std::string out;
    for (int i = 0; i < 16; ++i) {
        out += HEX[digest[i] >> 4];
        out += HEX[digest[i] & 15];
    }
    char ns[24];
    std::snprintf(ns, sizeof ns, "%llx", static_cast<unsigned long long>(pidNamespace));
    return out + "-" + ns;
}

Result<std::string> HostIdentity::current(std::uint64_t pidNamespace)
{
    return current(pidNamespace, Sources {});
}

Result<std::string> HostIdentity::current(std::uint64_t pidNamespace, const Sources& sources)
{
    std::string tried;
    std::optional<std::string> machine;
    for (const std::string& path : sources.machineIdFiles) {
        auto id = readMachineId(path);
        if (id) {
            machine = std::move(id).value();
            break;
        }
        tried += (tried.empty() ? "" : "; ") + id.error().describe();
    }
    if (!machine)
        return Error::make(ErrorKind::NotFound, sources.machineIdFiles.empty() ? "" : sources.machineIdFiles.front(),
            "no machine id, so this host cannot be told from others (" + tried
                + "); create one with systemd-machine-id-setup or dbus-uuidgen --ensure");
    auto boot = readBootId(sources.bootIdFile);
    if (!boot)
        return Error::make(boot.error().kind, sources.bootIdFile,
            "no boot id, so this host cannot be told from a clone that shares its machine id: "
                + boot.error().describe());
    return make(*machine, *boot, pidNamespace);
}

std::string HostIdentity::hostName()
{
    utsname u {};
    if (::uname(&u) != 0)
        return "unknown";
    return TextSanitizer::clean(u.nodename, 64);
}

} // namespace tollgate
