#pragma once

// WatchCommand: `tollgate status --watch [SECONDS]`, the terminal's capacity at a glance.
// Every SECONDS it reads the home (QuotaPeek: read-only, never creates it) and the history's
// new lines, and shows per provider core's Capacity — can the next call go now, requests and
// tokens left and when more free up, slots, backoff, pause — and per caller the admissions and
// 429s of the last minute.
//
// On a terminal (stdout a tty) it redraws in place like top: the alternate screen, the cursor
// hidden and homed for each frame, colour unless NO_COLOR is set or TERM is dumb; stdin (when
// a tty) is put in non-canonical, no-echo mode so that a single `q` quits. Invariant: the
// terminal is given back — alternate screen left, cursor shown, termios restored — on every
// way out: q, Ctrl-C (SIGINT), SIGTERM, SIGHUP, an error, and around Ctrl-Z (SIGTSTP) too. The
// signals only write a byte to a self-pipe; the loop does the restoring.
// Not on a terminal (a pipe, a file) it prints one plain frame per interval, frames separated
// by one blank line, no escape sequences, until a signal ends it (exit 0).
// A home that is missing, appears, disappears, is unsafe or holds a corrupt file is shown in
// the frame, never fatal.

#include <cstdint>
#include <optional>
#include <string>

namespace tollgate::cli {

class WatchCommand
{
public:
    static constexpr double DEFAULT_SECONDS = 2.0;
    static constexpr double MIN_SECONDS = 0.1;
    static constexpr double MAX_SECONDS = 3600.0;
    // A frame never waits longer than this for the state lock (a writer stopped inside its
    // transaction): it shows that instead.
    static constexpr std::int64_t LOCK_WAIT_MS = 1000;
    // A change in the home redraws at once, but never more often than this.
    static constexpr std::int64_t MIN_CHANGE_REDRAW_MS = 250;
    // With nothing to wake it (no home yet), the watch looks this often at least.
    static constexpr std::int64_t NO_FEED_LOOK_MS = 1000;
    static constexpr std::int64_t RATE_SPAN_MS = 60000;

    // "takes a number of seconds from 0.1 to 3600, not 'x'" when out of range.
    [[nodiscard]] static std::string checkSeconds(const std::string& text);
    // Runs until q, a signal or (on a terminal) its hang-up; returns the exit code.
    [[nodiscard]] static int run(const std::optional<std::string>& homeOption, double seconds);
};

} // namespace tollgate::cli
