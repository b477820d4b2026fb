#pragma once

// DisplayCheck: before any QApplication exists, whether the dashboard can open a window here.
// Without a display (a server over ssh, where callers often run) Qt's xcb plugin ends in a
// wall of "could not load the Qt platform plugin" text and an abort; this says plainly what
// is wrong and what to use instead, and exits EXIT_NO_DISPLAY. Needs no QApplication, so it
// runs first.
//
// Rule: Qt's choice stands when the user chose a platform: -platform on the command line, or
// QT_QPA_PLATFORM other than xcb (offscreen, wayland, vnc...). Otherwise there is a display when an X server
// answers on DISPLAY (or -display), checked with libxcb's own connect (loaded at run time, so
// the dashboard needs no X library to build or to run elsewhere), or when a Wayland
// compositor accepts a connection on WAYLAND_DISPLAY. Empty variables count as unset. What
// the probes cannot foresee (Qt failing on a display that answered) is caught from Qt's own
// fatal message by a message handler, which prints the same kind of paragraph instead.
// Without a display, --help/--version and --screenshot still work: they need no screen, so
// the offscreen platform is chosen for them. scripts/run.sh prints the same paragraph for
// the unset case (tst_dashboardcli compares the two). The value of DISPLAY is shown escaped
// and cut short: it is the environment's, not ours, and may hold anything.

#include <string>
#include <utility>
#include <vector>

namespace tollgate::dashboard {

class DisplayCheck
{
public:
    // Documented in the README; the same code as a bad --home (the dashboard cannot run as asked).
    static constexpr int EXIT_NO_DISPLAY = 2;

    // The paragraph printed when there is no display at all (ends with a newline).
    [[nodiscard]] static std::string message();
    // The paragraph printed when the displays named (variable, value) do not answer.
    [[nodiscard]] static std::string unreachableMessage(
        const std::vector<std::pair<std::string, std::string>>& tried);
    // The paragraph printed when Qt itself fails to start a platform for a display that is set.
    [[nodiscard]] static std::string fallbackMessage(
        const std::vector<std::pair<std::string, std::string>>& set);
    // The first call of main(): -1 to go on (perhaps having chosen the offscreen platform),
    // or EXIT_NO_DISPLAY after printing a message on stderr.
    // Unless the user chose the platform, it also installs a Qt message handler that turns
    // Qt's fatal "no Qt platform plugin could be initialized" into fallbackMessage() and
    // EXIT_NO_DISPLAY (for what the probes cannot foresee); other messages pass through.
    [[nodiscard]] static int check(int argc, char** argv);

private:
    static void installFallback(int argc, char** argv);
};

} // namespace tollgate::dashboard
