#include "displaycheck.h"

#include "system/fd.h"

#include <QMessageLogContext>
#include <QString>
#include <QtGlobal>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <optional>
#include <string_view>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace tollgate::dashboard {

namespace {

// How much of a hostile DISPLAY value a message repeats.
constexpr std::size_t SHOWN_VALUE_MAX = 60;

const char* nonEmpty(const char* name)
{
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
}

// What the command line asks for, as far as the choice of platform goes. Values of options
// that take one are skipped, so `--home --help` does not count as --help.
struct Args
{
    bool helpOrVersion = false;
    bool screenshot = false;
    std::optional<std::string> platform; // Qt's -platform NAME
    std::optional<std::string> display; // Qt's -display NAME (X only)
};

Args scan(int argc, char** argv)
{
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--")
            break;
        const bool hasNext = i + 1 < argc;
        if (arg == "-h" || arg == "--help" || arg == "-?" || arg == "--help-all" || arg == "-v"
            || arg == "--version") {
            a.helpOrVersion = true;
        } else if (arg == "--screenshot") {
            a.screenshot = true;
            i += hasNext ? 1 : 0;
        } else if (arg.starts_with("--screenshot=")) {
            a.screenshot = true;
        } else if (arg == "--home" || arg == "--locks" || arg == "--settings") {
            i += hasNext ? 1 : 0;
        } else if ((arg == "-platform" || arg == "--platform") && hasNext) {
            a.platform = argv[++i];
        } else if ((arg == "-display" || arg == "--display") && hasNext) {
            a.display = argv[++i];
        }
    }
    return a;
}

// "xcb", "xcb:opts", "xcb;wayland": Qt would try X first, the case this check is about.
bool choosesXcb(std::string_view platform)
{
    return platform == "xcb" || platform.starts_with("xcb:") || platform.starts_with("xcb;");
}

enum class Probe { Answers, Silent, Unknown };

// libxcb's own connect (parsing DISPLAY, unix/abstract/TCP sockets, Xauthority) is exactly
// what Qt's xcb plugin does first. Loaded at run time, kept loaded (the plugin loads it too).
Probe probeX(const char* display)
{
    void* lib = ::dlopen("libxcb.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib)
        return Probe::Unknown;
    using Connect = void* (*)(const char*, int*);
    using HasError = int (*)(void*);
    using Disconnect = void (*)(void*);
    auto connect = reinterpret_cast<Connect>(::dlsym(lib, "xcb_connect"));
    auto hasError = reinterpret_cast<HasError>(::dlsym(lib, "xcb_connection_has_error"));
    auto disconnect = reinterpret_cast<Disconnect>(::dlsym(lib, "xcb_disconnect"));
    if (!connect || !hasError || !disconnect)
        return Probe::Unknown;
    void* c = connect(display, nullptr);
    if (!c)
        return Probe::Silent;
    const bool ok = hasError(c) == 0;
    disconnect(c); // also right for libxcb's static error connection
    return ok ? Probe::Answers : Probe::Silent;
}

// The Wayland socket: WAYLAND_DISPLAY as an absolute path or a name in XDG_RUNTIME_DIR.
bool waylandAnswers(const char* name)
{
    std::string path = name;
    if (path.front() != '/') {
        const char* runtime = nonEmpty("XDG_RUNTIME_DIR");
        if (!runtime)
            return false;
        path = std::string(runtime) + "/" + path;
    }
    sockaddr_un addr {};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path))
        return false;
    std::memcpy(addr.sun_path, path.data(), path.size());
    const Fd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), path);
    if (!sock.valid())
        return false;
    int rc;
    do
        rc = ::connect(sock.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    while (rc != 0 && errno == EINTR);
    return rc == 0;
}

// A value from the environment, quoted, control and non-ASCII bytes as \xNN, cut short.
std::string shown(std::string_view v)
{
    std::string out = "\"";
    for (std::size_t i = 0; i < v.size() && i < SHOWN_VALUE_MAX; ++i) {
        const auto c = static_cast<unsigned char>(v[i]);
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    out += '"';
    if (v.size() > SHOWN_VALUE_MAX)
        out += "... (" + std::to_string(v.size()) + " bytes)";
    return out;
}

const char* const INSTEAD
    = "  tollgate status --watch               capacity at a glance in this terminal (q quits)\n"
      "  ssh -X, then tollgate-dashboard       the window on your own screen, forwarded by ssh\n"
      "  tollgate-dashboard --screenshot FILE  the window as a PNG, rendered off-screen here\n"
      "                                        (QT_QPA_PLATFORM=offscreen, chosen for you)\n";

std::string g_fallbackText;
QtMessageHandler g_previousHandler = nullptr;

// Qt's last word when no platform plugin starts is a fatal wall of text and an abort. The probes
// above catch the cases we know (nothing set, nothing answering); this catches the rest (a
// compositor that answered but Qt cannot use, a server that went away meanwhile) and says the
// same plainly. Other messages pass through untouched.
void fallbackHandler(QtMsgType type, const QMessageLogContext& context, const QString& text)
{
    if (type == QtFatalMsg && text.contains(QLatin1String("platform plugin"))) {
        std::fputs(g_fallbackText.c_str(), stderr);
        std::fflush(stderr);
        std::_Exit(DisplayCheck::EXIT_NO_DISPLAY);
    }
    // Said just before the wall, and our paragraph says it better.
    if (context.category && std::string_view(context.category) == "qt.qpa.xcb"
        && text.startsWith(QLatin1String("could not connect to display")))
        return;
    if (g_previousHandler)
        g_previousHandler(type, context, text);
    else
        std::fprintf(stderr, "%s\n", qPrintable(text));
}

std::string shownVars(const std::vector<std::pair<std::string, std::string>>& vars)
{
    std::string names;
    for (const auto& [name, value] : vars)
        names += (names.empty() ? "" : ", ") + name + "=" + shown(value);
    return names;
}

} // namespace

std::string DisplayCheck::message()
{
    // Kept word for word in scripts/run.sh (tst_dashboardcli compares the two).
    return std::string("tollgate-dashboard: no display found (DISPLAY and WAYLAND_DISPLAY are not set),\n"
                       "so the window cannot open here. Instead:\n")
        + INSTEAD;
}

std::string DisplayCheck::unreachableMessage(const std::vector<std::pair<std::string, std::string>>& tried)
{
    return "tollgate-dashboard: no display answers (" + shownVars(tried)
        + "),\nso the window cannot open here. Instead:\n" + INSTEAD;
}

std::string DisplayCheck::fallbackMessage(const std::vector<std::pair<std::string, std::string>>& set)
{
    return "tollgate-dashboard: Qt could not open the display ("
        + (set.empty() ? std::string("none set") : shownVars(set))
        + "),\nso the window cannot open here. Instead:\n" + INSTEAD;
}

void DisplayCheck::installFallback(int argc, char** argv)
{
    const Args args = scan(argc, argv);
    std::vector<std::pair<std::string, std::string>> set;
    if (const char* wayland = nonEmpty("WAYLAND_DISPLAY"))
        set.emplace_back("WAYLAND_DISPLAY", wayland);
    if (args.display)
        set.emplace_back("-display", *args.display);
    else if (const char* display = nonEmpty("DISPLAY"))
        set.emplace_back("DISPLAY", display);
    g_fallbackText = fallbackMessage(set);
    g_previousHandler = qInstallMessageHandler(fallbackHandler);
}

int DisplayCheck::check(int argc, char** argv)
{
    const Args args = scan(argc, argv);
    if (args.platform)
        return -1; // chosen on the command line; Qt's own errors stand
    const char* platform = nonEmpty("QT_QPA_PLATFORM");
    if (platform && !choosesXcb(platform))
        return -1; // the user's choice (offscreen, wayland, vnc...); Qt's own errors stand

    std::vector<std::pair<std::string, std::string>> tried;
    installFallback(argc, argv);
    if (const char* wayland = nonEmpty("WAYLAND_DISPLAY"); wayland && !platform) {
        if (waylandAnswers(wayland))
            return -1;
        tried.emplace_back("WAYLAND_DISPLAY", wayland);
    }
    const char* envDisplay = nonEmpty("DISPLAY");
    if (args.display || envDisplay) {
        const std::string display = args.display ? *args.display : envDisplay;
        if (probeX(display.c_str()) != Probe::Silent)
            return -1;
        tried.emplace_back(args.display ? "-display" : "DISPLAY", display);
    }

    // No screen. These need none: let Qt render off-screen.
    if (args.helpOrVersion || args.screenshot) {
        ::setenv("QT_QPA_PLATFORM", "offscreen", 1);
        return -1;
    }
    const std::string text = tried.empty() ? message() : unreachableMessage(tried);
    std::fputs(text.c_str(), stderr);
    return EXIT_NO_DISPLAY;
}

} // namespace tollgate::dashboard
