// tollgate: the command line through which callers in any language share one API quota.

#include "democommand.h"
#include "exitcodes.h"
#include "lockcommand.h"
#include "quotacommand.h"

#include <iostream>
#include <string>
#include <vector>

namespace {

constexpr const char* USAGE = "usage: tollgate COMMAND ...\n"
                              "commands:\n"
                              "  lock COMMAND PATH [options]   sema-compatible lock files (tollgate lock --help)\n"
                              "  limits|acquire|run|report-429|report-ok|pause|resume|status|history|\n"
                              "  release-stale|release|reset-backoff   the shared quota (below)\n"
                              "  demo [--home DIR] [--duration S]   simulated callers and 429 storms to watch\n"
                              "  --version                     print the version\n"
                              "  --help                        this text\n";

} // namespace

int main(int argc, char** argv)
{
    using namespace tollgate::cli;
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) {
        std::cerr << USAGE;
        return EXIT_USAGE;
    }
    const std::string cmd = args.front();
    args.erase(args.begin());
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
        std::cout << USAGE << QuotaCommand::usage();
        return EXIT_OK;
    }
    if (cmd == "--version") {
        std::cout << "tollgate " << TOLLGATE_VERSION << '\n';
        return EXIT_OK;
    }
    if (cmd == "lock")
        return LockCommand::run(args);
    if (cmd == "demo")
        return DemoCommand::run(args);
    if (QuotaCommand::handles(cmd))
        return QuotaCommand::run(cmd, args);
    std::cerr << "tollgate: unknown command '" << cmd << "'\n" << USAGE;
    return EXIT_USAGE;
}
