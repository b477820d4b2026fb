// ReleaseCommand: release-stale (every dead holder and waiter) and release (one slot by its
// fence).

#include "releasecommand.h"

#include "exitcodes.h"
#include "quotasession.h"

#include <nlohmann/json.hpp>

namespace tollgate::cli {

namespace {

using nlohmann::json;

int cmdReleaseStale(const QuotaContext& context)
{
    QuotaSession c("release-stale", context.options().common);
    bool missing = false;
    if (auto stop = c.openUnlessMissing(missing))
        return *stop;
    if (missing) {
        c.console().say("no Tollgate home at " + c.home() + " yet: nothing to release");
        json j;
        j["released"] = 0;
        j["home_exists"] = false;
        c.console().emit(j);
        return EXIT_OK;
    }
    auto n = c.limiter().releaseStale(context.options().overdue, QuotaSession::who());
    if (!n)
        return c.console().fail(n.error());
    c.console().say(
        *n ? "released " + std::to_string(*n) + " stale holder(s)/waiter(s)" : std::string("nothing stale"));
    json j;
    j["released"] = *n;
    c.console().emit(j);
    return EXIT_OK;
}

int cmdRelease(const QuotaContext& context)
{
    const QuotaOptions& o = context.options();
    QuotaSession c("release", o.common);
    if (auto stop = c.needProvider(o.provider))
        return *stop;
    if (!o.fence)
        return c.console().usage("--fence N is required");
    const auto fence = static_cast<std::uint64_t>(*o.fence);
    bool missing = false;
    if (auto stop = c.openUnlessMissing(missing))
        return *stop;
    if (missing) // as for a fence no slot has: refused (exit 1), and nothing is created
        return c.console().fail(
            Error::make(ErrorKind::Busy, "",
                "no Tollgate home at " + c.home() + " yet: nothing to release (no slot with fence "
                    + std::to_string(fence) + ")"),
            EXIT_REFUSED);
    auto r = c.limiter().releaseSlot(o.provider, fence, QuotaSession::who());
    if (!r)
        return c.console().fail(r.error());
    if (!*r)
        return c.console().fail(
            Error::make(ErrorKind::Busy, "", o.provider + ": no slot with fence " + std::to_string(fence)),
            EXIT_REFUSED);
    c.console().say("released slot fence " + std::to_string(fence));
    json j;
    j["provider"] = o.provider;
    j["fence"] = fence;
    j["released"] = true;
    c.console().emit(j);
    return EXIT_OK;
}

} // namespace

void ReleaseCommand::addTo(CLI::App& app, QuotaContext& context)
{
    QuotaOptions& o = context.options();
    CLI::App* stale = context.addCommand(
        &app, "release-stale", "free slots of dead holders and waiters now", cmdReleaseStale);
    stale->add_flag("--overdue", o.overdue, "also slots held past the maximum hold time");
    CLI::App* release = context.addCommand(&app, "release", "free one slot by its fence", cmdRelease);
    context.addProvider(release, "the provider");
    CliOptions::addInteger(
        release, "--fence", o.fence, 0, INT64_MAX,
        "the fence printed by acquire (required); 0 frees one placeholder of a lost state (status shows them)");
}

} // namespace tollgate::cli
