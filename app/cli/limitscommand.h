#pragma once

// `tollgate limits set|show|remove|export|import`: the providers' limits. show and export
// only read: they never create a home or a file in it.

#include "quotacontext.h"

namespace tollgate::cli {

class LimitsCommand
{
public:
    // Adds `limits` and its commands to `app`; they bind their options to `context`.
    static void addTo(CLI::App& app, QuotaContext& context);
};

} // namespace tollgate::cli
