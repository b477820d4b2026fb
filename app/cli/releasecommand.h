#pragma once

// `tollgate release-stale|release`: freeing slots (and waiters) by hand, for holders that
// died or a slot whose holder will not give it back.

#include "quotacontext.h"

namespace tollgate::cli {

class ReleaseCommand
{
public:
    // Adds the commands to `app`; they bind their options to `context`.
    static void addTo(CLI::App& app, QuotaContext& context);
};

} // namespace tollgate::cli
