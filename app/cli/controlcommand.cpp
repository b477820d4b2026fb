// ControlCommand: pause, resume and reset-backoff, one handler for the three switches.

#include "controlcommand.h"

#include "exitcodes.h"
#include "quotasession.h"

#include <nlohmann/json.hpp>

namespace tollgate::cli {

namespace {

using nlohmann::json;

enum class Switch { Pause, Resume, ResetBackoff };

const char* commandName(Switch which)
{
    return which == Switch::Pause ? "pause" : which == Switch::Resume ? "resume" : "reset-backoff";
}

// What a switch answers on a home that does not exist yet: nothing there is paused.
int sayNothingPaused(QuotaSession& c)
{
    c.console().say("no Tollgate home at " + c.home() + " yet: nothing is paused");
    json j;
    j["provider"] = nullptr;
    j["paused"] = false;
    j["home_exists"] = false;
    c.console().emit(j);
    return EXIT_OK;
}

int cmdSwitch(const QuotaContext& context, Switch which)
{
    const QuotaOptions& o = context.options();
    QuotaSession c(commandName(which), o.common);
    const std::string& provider = o.provider;
    if (which == Switch::ResetBackoff) {
        if (auto stop = c.needProvider(provider))
            return *stop;
    }
    // A pause of all providers means something before anything ran (it holds every later
    // caller): it creates the home. A named provider has no limits on a missing home, and
    // nothing there is paused.
    bool missing = false;
    const bool createsHome = which == Switch::Pause && provider.empty();
    if (auto stop = createsHome ? c.open() : c.openUnlessMissing(missing))
        return *stop;
    if (missing && !provider.empty())
        return c.failUnknownOnMissingHome(provider);
    if (missing)
        return sayNothingPaused(c);
    const std::string what = provider.empty() ? "all providers" : provider;
    const std::string who = QuotaSession::who();
    Result<void> r = which == Switch::Pause ? c.limiter().pause(provider, o.reason.value_or(""), who)
        : which == Switch::Resume           ? c.limiter().resume(provider, who)
                                            : c.limiter().resetBackoff(provider, who);
    if (!r)
        return c.console().fail(r.error());
    json j;
    j["provider"] = provider.empty() ? json(nullptr) : json(provider);
    if (which == Switch::Pause) {
        c.console().say("paused " + what + "; waiting callers stay queued until `tollgate resume`");
        j["paused"] = true;
        j["reason"] = o.reason.value_or("");
    } else if (which == Switch::Resume) {
        c.console().say("resumed " + what);
        j["paused"] = false;
    } else {
        c.console().say("backoff of " + provider + " cleared");
        j["backoff_cleared"] = true;
    }
    c.console().emit(j);
    return EXIT_OK;
}

} // namespace

void ControlCommand::addTo(CLI::App& app, QuotaContext& context)
{
    QuotaOptions& o = context.options();
    CLI::App* pause = context.addCommand(&app, "pause", "pause PROVIDER (or all): callers wait in the queue",
        [](const QuotaContext& ctx) { return cmdSwitch(ctx, Switch::Pause); });
    context.addProvider(pause, "the provider (default: all)");
    CliOptions::addText(pause, "--reason", o.reason, "why, shown in status")->type_name("TEXT");
    CLI::App* resume = context.addCommand(&app, "resume", "resume PROVIDER (or all)",
        [](const QuotaContext& ctx) { return cmdSwitch(ctx, Switch::Resume); });
    context.addProvider(resume, "the provider (default: all)");
    CLI::App* reset = context.addCommand(&app, "reset-backoff", "clear PROVIDER's 429 backoff now",
        [](const QuotaContext& ctx) { return cmdSwitch(ctx, Switch::ResetBackoff); });
    context.addProvider(reset, "the provider");
}

} // namespace tollgate::cli
