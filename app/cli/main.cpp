// tollgate: the command line through which callers in any language share one API quota.

#include "admitcommand.h"
#include "commandtable.h"
#include "console.h"
#include "controlcommand.h"
#include "democommand.h"
#include "exitcodes.h"
#include "limitscommand.h"
#include "lockcommand.h"
#include "proxy/proxycommand.h"
#include "quotacontext.h"
#include "releasecommand.h"
#include "statuscommand.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

namespace {

using namespace tollgate::cli;

// The subcommands parsed so far, outermost first (after a parse error: as far as it got).
std::vector<CLI::App*> chainOf(CLI::App& app)
{
    std::vector<CLI::App*> chain;
    CLI::App* at = &app;
    while (true) {
        auto subs = at->get_subcommands();
        if (subs.empty())
            break;
        at = subs.front();
        chain.push_back(at);
    }
    return chain;
}

std::string wordsOf(const std::vector<CLI::App*>& chain)
{
    std::string words;
    for (const CLI::App* a : chain)
        words += (words.empty() ? "" : " ") + a->get_name();
    return words;
}

std::string commandNames(const CLI::App& group)
{
    std::string names;
    for (const CLI::App* s : group.get_subcommands([](const CLI::App*) { return true; })) {
        if (!s->get_group().empty())
            names += (names.empty() ? "" : ", ") + s->get_name();
    }
    return names;
}

// CLI11's messages, reworded where ours were clearer, as one line.
std::string reword(const CLI::ParseError& e, const CLI::App& at, bool isGroup)
{
    std::string what = e.what();
    const std::string extras = "not expected: ";
    if (const auto pos = what.find(extras);
        dynamic_cast<const CLI::ExtrasError*>(&e) && pos != std::string::npos) {
        // CLI11's message lists them in an order that depends on where they were found.
        const auto left = at.remaining(false);
        std::string first = left.empty() ? what.substr(pos + extras.size()) : left.front();
        if (left.empty())
            first = first.substr(0, first.find(' '));
        if (first.size() > 1 && first[0] == '-')
            return "unknown option " + first.substr(0, first.find('='));
        if (isGroup)
            return "unknown command '" + first + "' (commands: " + commandNames(at) + ")";
        return "unexpected argument '" + first + "'";
    }
    return what;
}

// `tollgate --home D limits set ...` is how many users write it (git, docker, kubectl take their
// global options first), but CLI11 gives an option to the command it follows. The options every
// command shares are moved from before the first command word to the end, where the innermost
// command takes them; a command without them still refuses them by name.
void hoistGlobalOptions(std::vector<std::string>& args)
{
    std::vector<std::string> global;
    auto at = args.begin();
    while (at != args.end()) {
        if (*at == "--home" && at + 1 != args.end()) {
            global.insert(global.end(), at, at + 2);
            at += 2;
        } else if (at->rfind("--home=", 0) == 0 || *at == "--json" || *at == "-q" || *at == "--quiet") {
            global.push_back(*at);
            ++at;
        } else {
            break;
        }
    }
    if (global.empty() || at == args.end() || *at == "--home")
        return; // no command follows: let the parser say what is missing
    args.erase(args.begin(), at);
    args.insert(args.end(), global.begin(), global.end());
}

} // namespace

int main(int argc, char** argv)
{
    std::vector<std::string> args(argv + 1, argv + argc);
    CommandTable table;
    if (auto dd = std::find(args.begin(), args.end(), "--"); dd != args.end()) {
        table.trailing.assign(dd + 1, args.end());
        table.sawDoubleDash = true;
        args.erase(dd, args.end());
    }
    hoistGlobalOptions(args);
    const bool json = std::find(args.begin(), args.end(), "--json") != args.end();

    CLI::App app("tollgate: share one API quota between processes, and sema-compatible lock files.\n"
                 "Exit codes: 0 ok, 1 refused (timed out, held, not the owner), 2 usage, 3 I/O, corrupt or "
                 "unsafe file, or the store did not answer.",
        "tollgate");
    app.set_version_flag("--version", std::string("tollgate ") + TOLLGATE_VERSION);
    app.require_subcommand(0, 1);
    // The shared-quota commands, in the order `tollgate --help` lists them; they share one
    // context (their options), which lives as long as the table that runs them.
    QuotaContext quota(table);
    LimitsCommand::addTo(app, quota);
    AdmitCommand::addTo(app, quota);
    ControlCommand::addTo(app, quota);
    StatusCommand::addTo(app, quota);
    ReleaseCommand::addTo(app, quota);
    LockCommand::addTo(app, table);
    DemoCommand::addTo(app, table);
    ProxyCommand::addTo(app, table);

    try {
        std::vector<std::string> reversed(args.rbegin(), args.rend());
        app.parse(reversed);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        const auto chain = chainOf(app);
        CLI::App& at = chain.empty() ? app : *chain.back();
        Console console(wordsOf(chain).empty() ? std::string("") : wordsOf(chain), json, false);
        const bool isGroup = table.find(&at) == nullptr;
        if (chain.empty()) {
            std::cerr << "tollgate: " << Console::printable(reword(e, at, true))
                      << "\nRun 'tollgate --help' for more.\n";
            if (json)
                std::cout << Console::dumpJson({ { "error", reword(e, at, true) }, { "code", EXIT_USAGE },
                    { "kind", "usage" }, { "path", "" } })
                          << '\n';
            return EXIT_USAGE;
        }
        return console.usage(reword(e, at, isGroup));
    }

    const auto chain = chainOf(app);
    if (chain.empty()) {
        std::cerr << "tollgate: missing COMMAND (one of: " << commandNames(app)
                  << ")\nRun 'tollgate --help' for more.\n";
        return EXIT_USAGE;
    }
    const CommandTable::Action* action = table.find(chain.back());
    if (!action) {
        Console console(wordsOf(chain), json, false);
        return console.usage("missing COMMAND (one of: " + commandNames(*chain.back()) + ")");
    }
    if (table.sawDoubleDash && chain.back()->get_name() != "run") {
        Console console(wordsOf(chain), json, false);
        return console.usage("only run takes a command after --");
    }
    return (*action)();
}
