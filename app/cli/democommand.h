#pragma once

// DemoCommand: `tollgate demo [--home DIR] [--duration S]` — a live simulation to watch in the
// dashboard. It sets limits for the provider "demo-api" and starts simulated callers as real
// processes (this binary re-executed in hidden internal modes) that go through the real
// protocol: acquire, call the simulated provider, report 429 or success, release. The
// provider's true quota is below the limit set, so 429 storms really happen. A lock-file
// holder and a holder that "crashes" (leaving a dead lock behind) show up as well.
// Ctrl-C (or the end of --duration) stops every caller; each gives its slot back on the way.

#include "commandtable.h"

namespace tollgate::cli {

class DemoCommand
{
public:
    static constexpr const char* PROVIDER = "demo-api";

    // Adds `demo` to `app`; its action goes into `table`.
    static void addTo(CLI::App& app, CommandTable& table);
};

} // namespace tollgate::cli
