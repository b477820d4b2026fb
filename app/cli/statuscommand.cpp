// StatusCommand: status (per provider: usage, capacity, slots and their holders, queue,
// backoff, pauses; --watch hands over to WatchCommand) and history (the events of a span).

#include "statuscommand.h"

#include "backend/statusreport.h"
#include "exitcodes.h"
#include "quota/capacity.h"
#include "quota/holderstatus.h"
#include "quota/quotapolicy.h"
#include "quotaformat.h"
#include "quotasession.h"
#include "system/hostidentity.h"
#include "watchcommand.h"

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tollgate::cli {

namespace {

using nlohmann::json;

// A slot's holder as status shows it: core's judgement (HolderStatus), in words.
struct HolderView
{
    HolderStatus status;
    std::string text; // "pid 33, 5s, alive"
};

std::string wholeSeconds(std::int64_t ms)
{
    return std::to_string(ms / 1000 + (ms % 1000 != 0 ? 1 : 0)) + " s";
}

HolderView holderView(const ProcessProbe& probe, const Slot& s, const ProviderLimits& l, std::int64_t nowMs)
{
    HolderView v { HolderStatus::judge(s, l, nowMs, probe), {} };
    const HolderStatus& h = v.status;
    const std::string held = QuotaFormat::seconds(h.heldMs);
    if (h.state == HolderState::Placeholder) {
        v.text = "placeholder from a reset state, " + held;
        return v;
    }
    if (h.ns == HolderNamespace::Ours) {
        v.text = "pid " + std::to_string(s.pid) + ", " + held + ", "
            + (h.whyGone.empty() ? std::string(holderStateName(h.state)) : h.whyGone);
        return v;
    }
    v.text = "pid " + std::to_string(s.pid)
        + (!h.host.empty()                         ? " on " + h.host + ", "
                : h.ns == HolderNamespace::Unknown ? std::string(" in an unknown pid namespace, ")
                                                   : std::string(" in another pid namespace, "))
        + (h.whyGone.empty() ? "lease " + wholeSeconds(h.leaseLeftMs) + " left" : h.whyGone) + ", " + held
        + (h.state == HolderState::Overdue ? ", overdue" : "");
    return v;
}

// "1000/30000 input tokens", a budget in words.
std::string budgetText(const BudgetCapacity& b)
{
    std::string metric = b.metric;
    std::replace(metric.begin(), metric.end(), '_', ' ');
    return std::to_string(b.used) + "/" + std::to_string(b.limit) + " " + metric;
}

// The budgets of one period in words, then how that period is named: ", 3/5000 requests
// today (resets in 7h2m)" or " in the last 24h". Empty when the period has none.
std::string periodText(const WindowCapacity& w, bool perDay, std::int64_t now)
{
    std::string out;
    std::int64_t endsAt = 0;
    for (const BudgetCapacity& b : w.budgets) {
        if (b.perDay != perDay)
            continue;
        out += (out.empty() ? "" : ", ") + budgetText(b);
        endsAt = std::max(endsAt, b.dayEndsAtMs);
    }
    if (out.empty() || !perDay)
        return out;
    if (endsAt == 0)
        return out + " in the last 24h";
    const std::int64_t minutes = (std::max<std::int64_t>(0, endsAt - now) + 59999) / 60000;
    return out + " today (resets in " + std::to_string(minutes / 60) + "h" + std::to_string(minutes % 60)
        + "m)";
}

// "name: 3/10 requests, 100/1000 tokens in the last 60s, 1/2 slots", and a line per model
// class; input and output tokens join the window's figures, per-day budgets follow them.
void sayUsage(const Console& console, const StatusReport::ProviderLook& p)
{
    const ProviderLimits& l = p.limits;
    auto scopeLine = [&](const WindowCapacity& w, const std::optional<std::int64_t>& requests,
                         const std::optional<std::int64_t>& tokens, std::int64_t windowMs) {
        std::string line;
        if (requests)
            line += std::to_string(w.requestsUsed) + "/" + std::to_string(l.effective(*requests))
                + " requests";
        if (tokens)
            line += (line.empty() ? "" : ", ") + std::to_string(w.tokensUsed) + "/"
                + std::to_string(l.effective(*tokens)) + " tokens";
        const std::string split = periodText(w, false, p.now);
        line += (line.empty() || split.empty() ? "" : ", ") + split;
        if (!line.empty())
            line += " in the last " + QuotaFormat::seconds(windowMs);
        const std::string day = periodText(w, true, p.now);
        return line + (line.empty() || day.empty() ? "" : ", ") + day;
    };
    std::string line = scopeLine(p.capacity.window, l.requests, l.tokens, l.windowMs);
    if (l.parallel)
        line += (line.empty() ? "" : ", ") + std::to_string(p.state.slots.size()) + "/"
            + std::to_string(*l.parallel) + " slots";
    console.say(p.name + ": " + line);
    for (const WindowCapacity& w : p.capacity.models) {
        const auto it = l.models.find(w.model);
        if (it == l.models.end())
            continue;
        std::string patterns;
        for (const auto& m : w.match)
            patterns += (patterns.empty() ? "" : ", ") + m;
        console.say("  "
            + (patterns.empty() ? "model " + w.model : "class " + w.model + " (" + patterns + ")") + ": "
            + scopeLine(w, it->second.requests, it->second.tokens, it->second.windowMs));
    }
}

// The provider's notices, pause and backoff, its slots and its queue, a line each.
void sayConditions(const Console& console, const ProcessProbe& probe, const StatusReport::ProviderLook& p)
{
    const ProviderState& ps = p.state;
    const std::int64_t now = p.now;
    if (p.stateLost)
        console.say("  STATE LOST: the home has no state for '" + p.name
            + "' (state.bin deleted or emptied; in Redis a restart without persistence, a flush, an eviction); "
              "shown as the next call restarts it: every window full for one window, slots held by placeholders");
    for (const auto& notice : p.capacity.limitNotices)
        console.say("  NOTE " + notice + " (reported "
            + QuotaFormat::seconds(std::max<std::int64_t>(0, now - p.capacity.reportedAtMs)) + " ago)");
    if (p.capacity.plan.atMs != 0) {
        if (const std::string words = QuotaFormat::planWords(p.capacity, now); !words.empty())
            console.say("  PLAN " + words);
    }
    if (const auto& c = p.capacity; c.providerRequestsLeft)
        console.say("  PROVIDER: " + std::to_string(*c.providerRequestsLeft) + " request(s) left"
            + (c.providerRequestsScope.empty() ? std::string() : " for " + c.providerRequestsScope)
            + " until its reset in "
            + QuotaFormat::seconds(((c.providerRequestsResetMs - now + 99) / 100) * 100)
            + " (its last answer, less admissions since)");
    if (ps.paused)
        console.say("  PAUSED" + (ps.pauseReason.empty() ? std::string() : ": " + ps.pauseReason));
    if (const std::int64_t until = QuotaPolicy::backoffUntil(ps, now); until > now) {
        std::string b = "  BACKOFF " + QuotaFormat::seconds(((until - now + 99) / 100) * 100) + " left";
        // A success resets the count but not a backoff already in force; a hold (the
        // provider's headers said nothing is left until then) counts no 429 at all, and
        // the state does not tell the two apart.
        b += ps.consecutive429 > 0
            ? " after " + std::to_string(ps.consecutive429) + " consecutive 429(s)"
            : std::string(
                " (from a 429 before the last success, or a hold: the provider said nothing is left)");
        console.say(b);
    } else if (ps.consecutive429) {
        console.say("  " + std::to_string(ps.consecutive429) + " consecutive 429(s), backoff over");
    }
    for (const auto& s : ps.slots)
        console.say("  slot fence " + std::to_string(s.fence) + ": " + s.caller + " ("
            + holderView(probe, s, p.limits, now).text + ")");
    for (const auto& w : ps.queue) {
        const bool elsewhere = !w.host.empty() && !QuotaPolicy::sameNamespace(w.pidNs, probe);
        console.say("  waiting: " + w.caller + " (pid " + std::to_string(w.pid)
            + (elsewhere ? " on " + HostIdentity::describe(w.host) : std::string()) + ", "
            + QuotaFormat::seconds(now - w.enqueuedMs) + ", " + waitReasonName(w.reason) + ")");
    }
}

// status on a home that exists: every provider, in JSON and in words.
int statusOfHome(QuotaSession& c, json& out)
{
    auto view = c.peek(true);
    if (!view)
        return c.console().fail(view.error());
    const std::int64_t now = c.clock().unixMs();
    QuotaState state = view->state.value_or(QuotaState {});
    QuotaPolicy::settle(state, view->limits, now, c.probe());
    out["paused_all"] = state.pausedAll;
    out["pause_reason"] = state.pauseReason;
    json providers = json::array();
    if (view->limits.providers().empty())
        c.console().say("no providers yet (home " + c.home()
            + "); add one with: tollgate limits set PROVIDER --requests N --window SECONDS");
    if (state.pausedAll)
        c.console().say(
            "ALL PAUSED" + (state.pauseReason.empty() ? std::string() : ": " + state.pauseReason));
    if (view->dataLostAtMs > 0) {
        c.console().say("DATA LOST "
            + QuotaFormat::seconds(std::max<std::int64_t>(0, now - view->dataLostAtMs))
            + " ago: " + view->dataLostReason);
        out["data_lost"] = json { { "at_ms", view->dataLostAtMs }, { "reason", view->dataLostReason } };
    } else {
        out["data_lost"] = nullptr;
    }
    for (const auto& [name, l] : view->limits.providers()) {
        // Core's summary of the provider (the dashboard and status --watch show the same).
        const ProviderCapacity cap = Capacity::forProvider(state, name, &l, now, &c.probe());
        const bool lost
            = std::find(view->lostStates.begin(), view->lostStates.end(), name) != view->lostStates.end();
        const StatusReport::ProviderLook look { name, l, *state.provider(name), cap, now, lost };
        providers.push_back(StatusReport::providerJson(c.probe(), look));
        sayUsage(c.console(), look);
        sayConditions(c.console(), c.probe(), look);
    }
    out["providers"] = providers;
    c.console().emit(out);
    return EXIT_OK;
}

int cmdStatus(const QuotaContext& context)
{
    const QuotaOptions& o = context.options();
    if (o.watchGiven) {
        double seconds = WatchCommand::DEFAULT_SECONDS;
        if (o.watch && !o.watch->empty())
            seconds = CliOptions::parseSeconds(*o.watch).value(); // checked by the parser
        return WatchCommand::run(o.common.home, seconds);
    }
    QuotaSession c("status", o.common);
    bool exists = false;
    if (auto stop = c.openExisting(exists))
        return *stop;
    json out;
    out["home"] = c.home();
    out["host"] = StatusReport::hostJson(c.probe());
    out["home_exists"] = exists;
    if (!exists) {
        c.sayNoHome();
        out["paused_all"] = false;
        out["pause_reason"] = "";
        out["providers"] = json::array();
        c.console().emit(out);
        return EXIT_OK;
    }
    return statusOfHome(c, out);
}

// One history event as a line: "2026-11-25 20:55:01.3  admit  openai  caller=x  fence=3".
std::string historyLine(const HistoryEvent& e)
{
    const std::time_t t = static_cast<std::time_t>(e.timeMs / 1000);
    std::tm tm {};
    ::localtime_r(&t, &tm);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    std::ostringstream line;
    line << when << "." << (e.timeMs % 1000) / 100 << "  " << e.typeName();
    if (!e.provider.empty())
        line << "  " << e.provider;
    if (!e.caller.empty())
        line << "  caller=" << e.caller;
    if (!e.model.empty())
        line << "  model=" << e.model;
    if (e.tokens)
        line << "  tokens=" << e.tokens;
    if (e.fence)
        line << "  fence=" << e.fence;
    if (e.waitedMs)
        line << "  waited=" << QuotaFormat::seconds(e.waitedMs);
    if (e.retryAfterMs)
        line << "  retry-after=" << QuotaFormat::seconds(e.retryAfterMs);
    if (e.backoffMs)
        line << "  backoff=" << QuotaFormat::seconds(e.backoffMs);
    if (!e.reason.empty())
        line << "  (" << e.reason << ")";
    return line.str();
}

int cmdHistory(const QuotaContext& context)
{
    const QuotaOptions& o = context.options();
    QuotaSession c("history", o.common);
    bool exists = false;
    if (auto stop = c.openExisting(exists))
        return *stop;
    if (!exists) {
        c.sayNoHome();
        c.console().emit(json::array());
        return EXIT_OK;
    }
    const std::int64_t fromMs = c.clock().unixSeconds() * 1000 - QuotaFormat::toMs(o.since.value_or(3600));
    const auto& provider = o.providerFilter;
    auto cursor = c.reader().history();
    auto batch = cursor->poll();
    if (!batch)
        return c.console().fail(batch.error());
    json list = json::array();
    for (const auto& e : batch->events) {
        if (e.timeMs < fromMs || (provider && e.provider != *provider && !e.provider.empty()))
            continue;
        list.push_back(json::parse(e.toJsonLine(), nullptr, false));
        c.console().say(historyLine(e));
    }
    if (batch->badLines)
        c.console().warn("skipped " + std::to_string(batch->badLines) + " unreadable history line(s)");
    c.console().emit(list);
    return EXIT_OK;
}

void addStatus(CLI::App& app, QuotaContext& context)
{
    QuotaOptions& o = context.options();
    CLI::App* status = context.addCommand(
        &app, "status", "usage per window, slots, queue, backoff and pauses (reads only)", cmdStatus);
    status
        ->add_option_function<std::string>(
            "--watch",
            [&o](const std::string& v) {
                o.watchGiven = true;
                o.watch = v;
            },
            "redraw every SECONDS (0.1 to 3600; default 2) like top: can the next call go now, per provider, "
            "and per-caller rates of the last minute; q or Ctrl-C quits. Not on a terminal: one plain frame "
            "per interval, separated by a blank line")
        ->type_name("[SECONDS]")
        ->expected(0, 1)
        ->check(CLI::Validator(
            [](std::string& v) { return v.empty() ? std::string() : WatchCommand::checkSeconds(v); }, ""))
        ->excludes(status->get_option("--json"));
}

} // namespace

void StatusCommand::addTo(CLI::App& app, QuotaContext& context)
{
    QuotaOptions& o = context.options();
    addStatus(app, context);
    CLI::App* history = context.addCommand(
        &app, "history", "admissions, waits, 429s, pauses and limit changes (reads only)", cmdHistory);
    CliOptions::addSeconds(history, "--since", o.since, "how far back (default 3600)");
    CliOptions::addText(history, "--provider", o.providerFilter, "only this provider")->type_name("P");
}

} // namespace tollgate::cli
