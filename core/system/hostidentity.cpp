#include "system/hostidentity.h"

#include "system/fd.h"

#include <cctype>
#include <cstdio>
#include <fcntl.h>
#include <initializer_list>
#include <openssl/sha.h>
#include <optional>
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

std::string HostIdentity::make(
    std::string_view machineId, std::string_view bootId, std::uint64_t pidNamespace)
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
        return Error::make(ErrorKind::NotFound,
            sources.machineIdFiles.empty() ? "" : sources.machineIdFiles.front(),
            "no machine id, so this host cannot be told from others (" + tried
                + "); create one with systemd-machine-id-setup or dbus-uuidgen --ensure");
    auto boot = readBootId(sources.bootIdFile);
    if (!boot)
        return Error::make(boot.error().kind, sources.bootIdFile,
            "no boot id, so this host cannot be told from a clone that shares its machine id: "
                + boot.error().describe());
    return make(*machine, *boot, pidNamespace) + " " + hostName(sources);
}

std::string HostIdentity::hostName()
{
    return hostName(Sources {});
}

namespace {

// The first run of exactly 64 hex digits in `text` that follows one of `after` (the places
// runtimes name a container: ".../docker/<id>", "docker-<id>.scope", "libpod-<id>",
// "cri-containerd-<id>", ".../containers/<id>/..."), else empty.
std::string hexRunAfter(std::string_view text, std::initializer_list<std::string_view> after)
{
    for (std::string_view marker : after) {
        for (auto at = text.find(marker); at != std::string_view::npos; at = text.find(marker, at + 1)) {
            const std::size_t start = at + marker.size();
            std::size_t end = start;
            while (end < text.size() && lowerHex(text[end]))
                ++end;
            if (end - start == 64
                && (end == text.size() || !std::isalnum(static_cast<unsigned char>(text[end]))))
                return std::string(text.substr(start, 64));
        }
    }
    return {};
}

std::string readSmall(const std::string& path)
{
    auto fd = Fd::openRegular(path, O_RDONLY);
    if (!fd)
        return {};
    auto text = fd->readAll(256 * 1024); // a mountinfo of many mounts; past it, no container id
    return text ? std::move(text).value() : std::string();
}

} // namespace

std::string HostIdentity::containerId(std::string_view cgroup, std::string_view mountInfo)
{
    std::string id
        = hexRunAfter(cgroup, { "/docker/", "docker-", "libpod-", "cri-containerd-", "crio-", "/kubepods/" });
    if (id.empty()) {
        // kubepods paths end with the id after a pod segment: any 64-hex segment after "/".
        if (cgroup.find("kubepods") != std::string_view::npos)
            id = hexRunAfter(cgroup, { "/" });
    }
    if (id.empty())
        id = hexRunAfter(mountInfo, { "/containers/" });
    return id;
}

std::string HostIdentity::hostName(const Sources& sources)
{
    std::string node = sources.nodeName;
    if (node.empty()) {
        utsname u {};
        node = ::uname(&u) == 0 ? std::string(u.nodename) : std::string("unknown");
    }
    // Only characters that need no quoting anywhere it is shown, and never a space (which ends
    // the id part of a host id).
    std::string name;
    for (char c : node.substr(0, MAX_NAME))
        name += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
    if (name.empty())
        name = "unknown";
    const std::string container
        = containerId(readSmall(sources.cgroupFile), readSmall(sources.mountInfoFile)).substr(0, 12);
    if (!container.empty() && name != container)
        name += "/" + container;
    return name;
}

std::string HostIdentity::nameOf(std::string_view hostId)
{
    const auto space = hostId.find(' ');
    return space == std::string_view::npos ? std::string() : std::string(hostId.substr(space + 1));
}

std::string HostIdentity::shortName(std::string_view hostId)
{
    if (std::string name = nameOf(hostId); !name.empty())
        return name;
    const std::string_view id = hostId.substr(0, hostId.find(' '));
    const auto dash = id.rfind('-');
    if (id.size() <= 16 || dash == std::string_view::npos || dash < 8)
        return std::string(id);
    return std::string(id.substr(0, 8)) + "…" + std::string(id.substr(dash));
}

std::string HostIdentity::describe(std::string_view hostId)
{
    return nameOf(hostId).empty() ? "another host (" + shortName(hostId) + ")" : "host " + shortName(hostId);
}

} // namespace tollgate
