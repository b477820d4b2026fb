#pragma once

// `tollgate status [--watch [SECONDS]]|history`: what the quota is doing and has done. Both
// only read: they never create a home or a file in it.

#include "quotacontext.h"

namespace tollgate::cli {

class StatusCommand
{
public:
    // Adds the commands to `app`; they bind their options to `context`.
    static void addTo(CLI::App& app, QuotaContext& context);
};

} // namespace tollgate::cli
