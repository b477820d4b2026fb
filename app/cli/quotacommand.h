#pragma once

// The shared-quota commands: limits set|show|remove, acquire, run, report-429, report-ok,
// pause, resume, status, history, release-stale, release, reset-backoff. status, history and
// limits show only read: they never create a home or a file in it.

#include "commandtable.h"

namespace tollgate::cli {

class QuotaCommand
{
public:
    // Adds the commands to `app`; their actions go into `table`.
    static void addTo(CLI::App& app, CommandTable& table);
};

} // namespace tollgate::cli
