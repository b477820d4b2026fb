#pragma once

// `tollgate pause|resume|reset-backoff`: an operator's switches on a provider (or, for pause
// and resume, on all of them).

#include "quotacontext.h"

namespace tollgate::cli {

class ControlCommand
{
public:
    // Adds the commands to `app`; they bind their options to `context`.
    static void addTo(CLI::App& app, QuotaContext& context);
};

} // namespace tollgate::cli
