#pragma once

// `tollgate lock COMMAND PATH [options]`: the sema/semats-compatible single lock.

#include "commandtable.h"

namespace tollgate::cli {

class LockCommand
{
public:
    // Adds `lock` and its commands to `app`; their actions go into `table`.
    static void addTo(CLI::App& app, CommandTable& table);
};

} // namespace tollgate::cli
