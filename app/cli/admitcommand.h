#pragma once

// `tollgate acquire|run|report-429|report-ok`: being admitted under a provider's quota, and
// telling the quota how the call went.

#include "quotacontext.h"

namespace tollgate::cli {

class AdmitCommand
{
public:
    // Adds the commands to `app`; they bind their options to `context`.
    static void addTo(CLI::App& app, QuotaContext& context);
};

} // namespace tollgate::cli
