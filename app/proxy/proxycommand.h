#pragma once

// `tollgate proxy PROVIDER --upstream URL [--listen ADDR] [--queue-timeout S] [--caller NAME]`:
// runs ProxyServer until SIGINT or SIGTERM. Its first line on stdout is the address it
// listens on ("listening on http://127.0.0.1:8787"), so scripts may use --listen 127.0.0.1:0.

#include "cli/commandtable.h"

namespace tollgate::cli {

class ProxyCommand
{
public:
    static void addTo(CLI::App& app, CommandTable& table);
};

} // namespace tollgate::cli
