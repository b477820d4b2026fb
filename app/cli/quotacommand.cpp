#include "quotacommand.h"

#include "argparser.h"
#include "childrunner.h"
#include "exitcodes.h"
#include "filequotastore.h"
#include "historyreader.h"
#include "homedir.h"
#include "quotalimiter.h"
#include "retryafter.h"
#include "systemclock.h"

#include <cmath>
#include <cstdio>
#include <fcntl.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

namespace tollgate::cli {

namespace {

using nlohmann::json;

constexpr double DEFAULT_TIMEOUT_SECONDS = 60.0;

const std::vector<std::string> COMMANDS { "limits", "acquire", "run", "report-429", "report-ok", "pause", "resume",
    "status", "history", "release-stale", "release", "reset-backoff" };

int fail(const Error& e)
{
    std::cerr << "tollgate: " << e.describe() << '\n';
    switch (e.kind) {
    case ErrorKind::Usage:
        return EXIT_USAGE;
    case ErrorKind::Timeout:
    case ErrorKind::Busy:
        return EXIT_REFUSED;
    default:
        return EXIT_IO;
    }
}

int usageError(const std::string& command, const std::string& message)
{
    std::cerr << "tollgate " << command << ": " << message << "\n" << QuotaCommand::usage();
    return EXIT_USAGE;
}

void printJson(const json& j)
{
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
}

std::string who()
{
    return "tollgate CLI (pid " + std::to_string(ProcessProbe::selfPid()) + ", parent "
        + std::to_string(ProcessProbe::parentPid()) + ")";
}

std::string fmtSeconds(std::int64_t ms)
{
    char buf[32];
    if (ms % 1000 == 0)
        std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(ms / 1000));
    else
        std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
    return buf;
}

std::int64_t toMs(double seconds)
{
    return static_cast<std::int64_t>(std::llround(seconds * 1000.0));
}

struct Context {
    std::string command;
    ArgParser args;
    const SystemClock clock;
    const ProcessProbe probe;
    std::unique_ptr<FileQuotaStore> store;
    std::unique_ptr<QuotaLimiter> limiter;
    bool json = false;
    bool quiet = false;

    explicit Context(std::string cmd, std::vector<ArgParser::Option> options)
        : command(std::move(cmd))
        , args(withCommon(std::move(options)))
    {
    }

    static std::vector<ArgParser::Option> withCommon(std::vector<ArgParser::Option> o)
    {
        o.push_back({ "home", true });
        o.push_back({ "json", false });
        o.push_back({ "quiet", false, 'q' });
        o.push_back({ "help", false, 'h' });
        return o;
    }

    // Parses, then opens the home. Returns an exit code, or -1 to go on.
    int open(const std::vector<std::string>& argv)
    {
        if (auto ok = args.parse(argv); !ok)
            return usageError(command, ok.error().message);
        if (args.has("help")) {
            std::cout << QuotaCommand::usage();
            return EXIT_OK;
        }
        json = args.has("json");
        quiet = args.has("quiet");
        auto home = HomeDir::resolve(args.value("home"));
        if (!home)
            return fail(home.error());
        auto s = FileQuotaStore::open(*home, clock);
        if (!s)
            return fail(s.error());
        store = std::move(s).value();
        limiter = std::make_unique<QuotaLimiter>(*store, clock, probe);
        return -1;
    }

    Result<std::optional<std::int64_t>> integer(const std::string& name, std::int64_t min, std::int64_t max) const
    {
        auto v = args.value(name);
        if (!v)
            return std::optional<std::int64_t>();
        auto n = ArgParser::parseInteger(name, *v, min, max);
        if (!n)
            return n.error();
        return std::optional<std::int64_t>(*n);
    }

    Result<std::optional<double>> seconds(const std::string& name) const
    {
        auto v = args.value(name);
        if (!v)
            return std::optional<double>();
        auto n = ArgParser::parseSeconds(name, *v);
        if (!n)
            return n.error();
        return std::optional<double>(*n);
    }
};

json limitsJson(const std::string& name, const ProviderLimits& l)
{
    json j;
    j["provider"] = name;
    j["requests"] = l.requests ? json(*l.requests) : json(nullptr);
    j["tokens"] = l.tokens ? json(*l.tokens) : json(nullptr);
    j["window_seconds"] = static_cast<double>(l.windowMs) / 1000.0;
    j["parallel"] = l.parallel ? json(*l.parallel) : json(nullptr);
    j["headroom_percent"] = l.headroomPercent;
    j["effective_requests"] = l.requests ? json(l.effective(*l.requests)) : json(nullptr);
    j["effective_tokens"] = l.tokens ? json(l.effective(*l.tokens)) : json(nullptr);
    j["backoff_base_seconds"] = static_cast<double>(l.backoffBaseMs) / 1000.0;
    j["backoff_cap_seconds"] = static_cast<double>(l.backoffCapMs) / 1000.0;
    j["max_hold_seconds"] = static_cast<double>(l.maxHoldMs) / 1000.0;
    json models = json::object();
    for (const auto& [m, ml] : l.models) {
        json mj;
        mj["requests"] = ml.requests ? json(*ml.requests) : json(nullptr);
        mj["tokens"] = ml.tokens ? json(*ml.tokens) : json(nullptr);
        mj["window_seconds"] = static_cast<double>(ml.windowMs) / 1000.0;
        models[m] = mj;
    }
    j["models"] = models;
    return j;
}

std::string describeLimits(const ProviderLimits& l)
{
    std::ostringstream out;
    if (l.requests)
        out << l.effective(*l.requests) << " requests";
    if (l.tokens)
        out << (l.requests ? ", " : "") << l.effective(*l.tokens) << " tokens";
    if (l.requests || l.tokens)
        out << " per " << fmtSeconds(l.windowMs);
    if (l.parallel)
        out << ((l.requests || l.tokens) ? ", " : "") << *l.parallel << " parallel";
    if (!l.requests && !l.tokens && !l.parallel)
        out << "no limits";
    if (l.headroomPercent != 100)
        out << " (headroom " << l.headroomPercent << "% of " << (l.requests ? std::to_string(*l.requests) : "-")
            << (l.tokens ? "/" + std::to_string(*l.tokens) : "") << ")";
    return out.str();
}

int cmdLimits(const std::vector<std::string>& argv)
{
    Context c("limits",
        { { "model", true }, { "requests", true }, { "window", true }, { "tokens", true }, { "parallel", true },
            { "headroom", true }, { "backoff-base", true }, { "backoff-cap", true }, { "max-hold", true },
            { "no-tokens", false }, { "no-parallel", false }, { "no-requests", false } });
    if (int code = c.open(argv); code >= 0)
        return code;
    std::vector<std::string> pos = c.args.positional();
    if (pos.empty() || (pos[0] != "set" && pos[0] != "show" && pos[0] != "remove"))
        return usageError("limits", "expected: limits set|show|remove ...");
    const std::string sub = pos[0];
    pos.erase(pos.begin());
    c.command = "limits " + sub;
    if (sub == "show") {
        if (pos.size() > 1)
            return usageError(c.command, "unexpected argument '" + pos[1] + "'");
        auto all = c.limiter->limits();
        if (!all)
            return fail(all.error());
        if (!pos.empty() && !all->find(pos[0]))
            return fail(Error::make(ErrorKind::Usage, "",
                "unknown provider '" + pos[0] + "'; known providers: " + all->knownProviders()));
        json list = json::array();
        for (const auto& [name, l] : all->providers()) {
            if (!pos.empty() && name != pos[0])
                continue;
            if (c.json) {
                list.push_back(limitsJson(name, l));
                continue;
            }
            std::cout << name << ": " << describeLimits(l) << "; backoff " << fmtSeconds(l.backoffBaseMs) << " doubling to "
                      << fmtSeconds(l.backoffCapMs) << "; max hold " << fmtSeconds(l.maxHoldMs) << '\n';
            for (const auto& [m, ml] : l.models) {
                ProviderLimits shown;
                shown.requests = ml.requests;
                shown.tokens = ml.tokens;
                shown.windowMs = ml.windowMs;
                shown.headroomPercent = l.headroomPercent;
                std::cout << "  model " << m << ": " << describeLimits(shown) << '\n';
            }
        }
        if (c.json)
            printJson(list);
        else if (all->providers().empty() && !c.quiet)
            std::cout << "no providers yet; add one with: tollgate limits set PROVIDER --requests N --window SECONDS\n";
        return EXIT_OK;
    }
    if (pos.size() != 1)
        return usageError(c.command, pos.empty() ? "missing PROVIDER" : "unexpected argument '" + pos[1] + "'");
    const std::string provider = pos[0];
    if (auto r = QuotaLimits::validateName("provider", provider); !r)
        return fail(r.error());
    auto all = c.limiter->limits();
    if (!all)
        return fail(all.error());
    const auto model = c.args.value("model");

    if (sub == "remove") {
        if (!model) {
            if (auto r = c.limiter->removeLimits(provider, who()); !r)
                return fail(r.error());
            if (!c.quiet)
                std::cout << "removed provider " << provider << '\n';
            return EXIT_OK;
        }
        const ProviderLimits* existing = all->find(provider);
        if (!existing || !existing->models.count(*model))
            return fail(Error::make(ErrorKind::Usage, "", "provider '" + provider + "' has no limits for model '" + *model + "'"));
        ProviderLimits l = *existing;
        l.models.erase(*model);
        if (auto r = c.limiter->setLimits(provider, l, who()); !r)
            return fail(r.error());
        if (!c.quiet)
            std::cout << "removed model " << *model << " from " << provider << '\n';
        return EXIT_OK;
    }

    ProviderLimits l = all->find(provider) ? *all->find(provider) : ProviderLimits {};
    auto requests = c.integer("requests", 1, std::int64_t(1) << 40);
    auto tokens = c.integer("tokens", 1, std::int64_t(1) << 40);
    auto parallel = c.integer("parallel", 1, QuotaLimits::MAX_PARALLEL);
    auto headroom = c.integer("headroom", 1, 100);
    auto window = c.seconds("window");
    auto base = c.seconds("backoff-base");
    auto cap = c.seconds("backoff-cap");
    auto hold = c.seconds("max-hold");
    for (const Result<std::optional<std::int64_t>>* r : { &requests, &tokens, &parallel, &headroom }) {
        if (!*r)
            return usageError(c.command, r->error().message);
    }
    for (const Result<std::optional<double>>* r : { &window, &base, &cap, &hold }) {
        if (!*r)
            return usageError(c.command, r->error().message);
    }
    if (*window && (**window * 1000.0 < QuotaLimits::MIN_WINDOW_MS || **window * 1000.0 > QuotaLimits::MAX_WINDOW_MS))
        return usageError(c.command, "--window must be between 0.1 seconds and 7 days (a window of 0 can hold nothing)");
    if (model) {
        if (auto r = QuotaLimits::validateName("model", *model); !r)
            return fail(r.error());
        if (*parallel || *headroom || *base || *cap || *hold)
            return usageError(c.command,
                "with --model only --requests, --tokens and --window apply (parallel, headroom and backoff are per provider)");
        ModelLimits ml = l.models.count(*model) ? l.models[*model] : ModelLimits { std::nullopt, std::nullopt, l.windowMs };
        if (*requests)
            ml.requests = **requests;
        if (*tokens)
            ml.tokens = **tokens;
        if (*window)
            ml.windowMs = toMs(**window);
        if (c.args.has("no-tokens"))
            ml.tokens.reset();
        if (c.args.has("no-requests"))
            ml.requests.reset();
        if (!ml.requests && !ml.tokens)
            return usageError(c.command, "a model limit needs --requests or --tokens");
        l.models[*model] = ml;
    } else {
        if (*requests)
            l.requests = **requests;
        if (*tokens)
            l.tokens = **tokens;
        if (*parallel)
            l.parallel = **parallel;
        if (*headroom)
            l.headroomPercent = **headroom;
        if (*window)
            l.windowMs = toMs(**window);
        if (*base)
            l.backoffBaseMs = toMs(**base);
        if (*cap)
            l.backoffCapMs = toMs(**cap);
        if (*hold)
            l.maxHoldMs = toMs(**hold);
        if (c.args.has("no-tokens"))
            l.tokens.reset();
        if (c.args.has("no-parallel"))
            l.parallel.reset();
        if (c.args.has("no-requests"))
            l.requests.reset();
        if (!l.requests && !l.tokens && !l.parallel)
            return usageError(c.command, "give at least one of --requests, --tokens or --parallel");
    }
    if (auto r = c.limiter->setLimits(provider, l, who()); !r)
        return fail(r.error());
    if (c.json)
        printJson(limitsJson(provider, l));
    else if (!c.quiet)
        std::cout << provider << ": " << describeLimits(l) << '\n';
    return EXIT_OK;
}

// acquire and run share their request options.
struct RequestOptions {
    AdmitRequest request;
    double timeoutSeconds = DEFAULT_TIMEOUT_SECONDS;
};

int parseRequest(Context& c, RequestOptions& out)
{
    const auto& pos = c.args.positional();
    if (pos.size() != 1)
        return usageError(c.command, pos.empty() ? "missing PROVIDER" : "unexpected argument '" + pos[1] + "'");
    out.request.provider = pos[0];
    auto caller = c.args.value("caller");
    if (!caller || caller->empty())
        return usageError(c.command, "--caller NAME is required (it names you in status and history)");
    out.request.caller = *caller;
    out.request.model = c.args.value("model").value_or("");
    if (!out.request.model.empty()) {
        if (auto r = QuotaLimits::validateName("model", out.request.model); !r)
            return fail(r.error());
    }
    auto tokens = c.integer("tokens", 0, std::int64_t(1) << 40);
    if (!tokens)
        return usageError(c.command, tokens.error().message);
    out.request.tokens = tokens->value_or(0);
    auto timeout = c.seconds("timeout");
    if (!timeout)
        return usageError(c.command, timeout.error().message);
    out.timeoutSeconds = std::min(timeout->value_or(DEFAULT_TIMEOUT_SECONDS), 10.0 * 365 * 24 * 3600);
    return -1;
}

WallTime deadlineFrom(const Clock& clock, double seconds)
{
    return clock.now() + std::chrono::duration_cast<WallTime::duration>(std::chrono::duration<double>(seconds));
}

int reportRefusal(const Context& c, const Error& e)
{
    if (e.kind != ErrorKind::Timeout)
        return fail(e);
    if (c.json) {
        json j;
        j["admitted"] = false;
        j["error"] = e.message;
        printJson(j);
    }
    if (!c.quiet)
        std::cerr << "tollgate: " << e.describe() << '\n';
    if (ChildRunner::interrupted().load())
        return 128 + ChildRunner::interruptSignal();
    return EXIT_REFUSED;
}

int cmdAcquire(const std::vector<std::string>& argv)
{
    Context c("acquire",
        { { "caller", true }, { "model", true }, { "tokens", true }, { "timeout", true }, { "slot", false },
            { "pid", true } });
    if (int code = c.open(argv); code >= 0)
        return code;
    RequestOptions o;
    if (int code = parseRequest(c, o); code >= 0)
        return code;
    auto pid = c.integer("pid", 1, INT32_MAX);
    if (!pid)
        return usageError(c.command, pid.error().message);
    // A slot taken by `acquire` belongs to the calling script: reclaimed when it dies.
    o.request.wantsSlot = c.args.has("slot");
    o.request.pid = pid->value_or(ProcessProbe::parentPid());
    ChildRunner::installSignalHandlers();
    auto permit = c.limiter->acquire(o.request, deadlineFrom(c.clock, o.timeoutSeconds), &ChildRunner::interrupted());
    if (!permit)
        return reportRefusal(c, permit.error());
    const bool slot = permit->holdsSlot();
    permit->detach();
    if (c.json) {
        json j;
        j["admitted"] = true;
        j["provider"] = o.request.provider;
        j["caller"] = QuotaLimiter::sanitizeCaller(o.request.caller);
        j["fence"] = permit->fence();
        j["waited_ms"] = permit->waitedMs();
        j["slot"] = slot;
        printJson(j);
    } else if (!c.quiet) {
        std::cout << "admitted provider=" << o.request.provider << " fence=" << permit->fence()
                  << " waited_ms=" << permit->waitedMs() << (slot ? " slot=held" : "") << '\n';
    }
    return EXIT_OK;
}

int cmdRun(const std::vector<std::string>& argv)
{
    Context c("run",
        { { "caller", true }, { "model", true }, { "tokens", true }, { "timeout", true },
            { "rate-limited-exit", true } });
    if (int code = c.open(argv); code >= 0)
        return code;
    if (c.args.trailing().empty())
        return usageError(c.command, "run needs a command after --");
    RequestOptions o;
    if (int code = parseRequest(c, o); code >= 0)
        return code;
    auto limitedExit = c.integer("rate-limited-exit", 1, 255);
    if (!limitedExit)
        return usageError(c.command, limitedExit.error().message);
    // A command that cannot run must not spend a request, tokens or a slot.
    if (const auto found = ChildRunner::resolve(c.args.trailing()[0]); found.exitCode != 0) {
        std::cerr << "tollgate: " << found.problem << " (nothing was spent)\n";
        return found.exitCode;
    }
    // tollgate itself holds the slot: it lives exactly as long as the command (which dies
    // with it), and renews the lease that readers in other pid namespaces go by.
    o.request.wantsSlot = true;
    o.request.pid = ProcessProbe::selfPid();
    const auto lease = ChildRunner::lease(QuotaLimiter::RUN_LEASE);
    o.request.leaseMs = lease.count();
    ChildRunner::installSignalHandlers();
    auto permit = c.limiter->acquire(o.request, deadlineFrom(c.clock, o.timeoutSeconds), &ChildRunner::interrupted());
    if (!permit)
        return reportRefusal(c, permit.error());

    char retryFile[] = "/tmp/tollgate-retry-after-XXXXXX";
    const int rfd = ::mkstemp(retryFile);
    if (rfd >= 0)
        ::close(rfd);
    const int code = ChildRunner::run(c.args.trailing(),
        { { "TOLLGATE_PROVIDER", o.request.provider }, { "TOLLGATE_CALLER", QuotaLimiter::sanitizeCaller(o.request.caller) },
            { "TOLLGATE_MODEL", o.request.model }, { "TOLLGATE_FENCE", std::to_string(permit->fence()) },
            { "TOLLGATE_HOME", c.store->dir() }, { "TOLLGATE_RETRY_AFTER_FILE", rfd >= 0 ? retryFile : "" } },
        [&, warned = false]() mutable {
            auto held = permit->renew();
            if (!held && !warned)
                std::cerr << "tollgate: could not renew the slot's lease: " << held.error().describe() << '\n';
            else if (held && !*held && !warned)
                std::cerr << "tollgate: the slot (fence " << permit->fence()
                          << ") was taken away (released by hand or reclaimed); the command runs on without it\n";
            warned = warned || !held || !*held;
        },
        lease / 3);
    if (auto r = permit->release(); !r)
        std::cerr << "tollgate: could not give the slot back: " << r.error().describe() << '\n';
    std::string retryAfter;
    if (rfd >= 0) {
        if (auto fd = Fd::open(retryFile, O_RDONLY | O_NOFOLLOW); fd) {
            if (auto text = fd->readAll(256); text)
                retryAfter = *text;
        }
        ::unlink(retryFile);
    }
    if (*limitedExit && code == **limitedExit) {
        std::optional<std::int64_t> ms;
        if (!retryAfter.empty()) {
            while (!retryAfter.empty() && (retryAfter.back() == '\n' || retryAfter.back() == '\r'))
                retryAfter.pop_back();
            auto parsed = RetryAfter::parseMs(retryAfter, c.clock.unixSeconds() * 1000);
            if (parsed)
                ms = *parsed;
            else
                std::cerr << "tollgate: ignoring TOLLGATE_RETRY_AFTER_FILE: " << parsed.error().message << '\n';
        }
        auto b = c.limiter->report429(o.request.provider, o.request.caller, ms, ProcessProbe::selfPid());
        if (!b)
            std::cerr << "tollgate: could not record the 429: " << b.error().describe() << '\n';
        else if (!c.quiet)
            std::cerr << "tollgate: " << o.request.provider << " rate-limited (exit " << code << "); all callers back off "
                      << fmtSeconds(*b) << '\n';
    } else if (code == 0) {
        if (auto r = c.limiter->reportSuccess(o.request.provider, o.request.caller); !r)
            std::cerr << "tollgate: could not record the success: " << r.error().describe() << '\n';
    }
    return code;
}

int cmdReport(const std::string& which, const std::vector<std::string>& argv)
{
    Context c(which, { { "caller", true }, { "retry-after", true } });
    if (int code = c.open(argv); code >= 0)
        return code;
    const auto& pos = c.args.positional();
    if (pos.size() != 1)
        return usageError(c.command, pos.empty() ? "missing PROVIDER" : "unexpected argument '" + pos[1] + "'");
    auto caller = c.args.value("caller");
    if (!caller || caller->empty())
        return usageError(c.command, "--caller NAME is required");
    if (which == "report-ok") {
        if (c.args.has("retry-after"))
            return usageError(c.command, "--retry-after goes with report-429");
        if (auto r = c.limiter->reportSuccess(pos[0], *caller); !r)
            return fail(r.error());
        if (!c.quiet && !c.json)
            std::cout << "recorded a success for " << pos[0] << "; consecutive 429s reset\n";
        return EXIT_OK;
    }
    std::optional<std::int64_t> retryMs;
    if (auto v = c.args.value("retry-after")) {
        auto ms = RetryAfter::parseMs(*v, c.clock.unixSeconds() * 1000);
        if (!ms)
            return usageError(c.command, ms.error().message);
        retryMs = *ms;
    }
    // the caller that got the 429 is the script that ran us
    auto b = c.limiter->report429(pos[0], *caller, retryMs, ProcessProbe::parentPid());
    if (!b)
        return fail(b.error());
    if (c.json) {
        json j;
        j["provider"] = pos[0];
        j["backoff_ms"] = *b;
        printJson(j);
    } else if (!c.quiet) {
        std::cout << pos[0] << ": every caller now backs off for " << fmtSeconds(*b) << " (plus jitter)\n";
    }
    return EXIT_OK;
}

int cmdPauseResume(const std::string& which, const std::vector<std::string>& argv)
{
    Context c(which, { { "reason", true } });
    if (int code = c.open(argv); code >= 0)
        return code;
    const auto& pos = c.args.positional();
    if (pos.size() > 1)
        return usageError(c.command, "unexpected argument '" + pos[1] + "'");
    const std::string provider = pos.empty() ? "" : pos[0];
    Result<void> r = which == "pause" ? c.limiter->pause(provider, c.args.value("reason").value_or(""), who())
        : which == "resume"           ? c.limiter->resume(provider, who())
                                      : Result<void>(Error::make(ErrorKind::Usage, "", "unknown"));
    if (which == "reset-backoff") {
        if (provider.empty())
            return usageError(c.command, "missing PROVIDER");
        r = c.limiter->resetBackoff(provider, who());
    }
    if (!r)
        return fail(r.error());
    if (!c.quiet && !c.json) {
        const std::string what = provider.empty() ? "all providers" : provider;
        if (which == "pause")
            std::cout << "paused " << what << "; waiting callers stay queued until `tollgate resume`\n";
        else if (which == "resume")
            std::cout << "resumed " << what << '\n';
        else
            std::cout << "backoff of " << provider << " cleared\n";
    }
    return EXIT_OK;
}

std::string slotState(const ProcessProbe& probe, const Slot& s, const ProviderLimits* l, std::int64_t nowMs)
{
    if (s.pid == 0)
        return "placeholder";
    if (probe.liveness(s.pid, s.acquiredMs / 1000) == Liveness::Dead)
        return "dead";
    if (l && nowMs - s.acquiredMs > l->maxHoldMs)
        return "overdue";
    return "alive";
}

int cmdStatus(const std::vector<std::string>& argv)
{
    Context c("status", {});
    if (int code = c.open(argv); code >= 0)
        return code;
    if (!c.args.positional().empty())
        return usageError(c.command, "unexpected argument '" + c.args.positional()[0] + "'");
    auto snap = c.limiter->snapshot();
    if (!snap)
        return fail(snap.error());
    const std::int64_t now = snap->nowMs;
    json out;
    out["home"] = c.store->dir();
    out["paused_all"] = snap->state.pausedAll;
    out["pause_reason"] = snap->state.pauseReason;
    json providers = json::array();
    std::ostringstream text;
    if (snap->state.pausedAll)
        text << "ALL PAUSED" << (snap->state.pauseReason.empty() ? "" : ": " + snap->state.pauseReason) << "\n";
    for (const auto& [name, l] : snap->limits.providers()) {
        const ProviderState* p = snap->state.provider(name);
        const ProviderState empty;
        const ProviderState& ps = p ? *p : empty;
        const ScopeWindow* sc = ps.scope("");
        const auto used = sc ? sc->window.usage(now) : RollingWindow::Usage {};
        json j = limitsJson(name, l);
        j["used_requests"] = used.requests;
        j["used_tokens"] = used.tokens;
        j["paused"] = ps.paused || snap->state.pausedAll;
        j["pause_reason"] = ps.paused ? ps.pauseReason : snap->state.pauseReason;
        j["backoff_remaining_ms"] = std::max<std::int64_t>(0, ps.backoffUntilMs - now);
        j["consecutive_429s"] = ps.consecutive429;
        j["admitted_total"] = ps.admittedTotal;
        j["rate_limited_total"] = ps.rateLimitedTotal;
        j["waiting"] = ps.queue.size();
        json slots = json::array();
        for (const auto& s : ps.slots) {
            json sj;
            sj["fence"] = s.fence;
            sj["pid"] = s.pid;
            sj["caller"] = s.caller;
            sj["model"] = s.model;
            sj["age_ms"] = now - s.acquiredMs;
            sj["state"] = slotState(c.probe, s, &l, now);
            slots.push_back(sj);
        }
        j["slots"] = slots;
        json waiters = json::array();
        for (const auto& w : ps.queue) {
            json wj;
            wj["caller"] = w.caller;
            wj["pid"] = w.pid;
            wj["waiting_ms"] = now - w.enqueuedMs;
            wj["reason"] = waitReasonName(w.reason);
            waiters.push_back(wj);
        }
        j["queue"] = waiters;
        providers.push_back(j);

        text << name << ": ";
        if (l.requests)
            text << used.requests << "/" << l.effective(*l.requests) << " requests";
        if (l.tokens)
            text << (l.requests ? ", " : "") << used.tokens << "/" << l.effective(*l.tokens) << " tokens";
        if (l.requests || l.tokens)
            text << " in the last " << fmtSeconds(l.windowMs);
        if (l.parallel)
            text << ((l.requests || l.tokens) ? ", " : "") << ps.slots.size() << "/" << *l.parallel << " slots";
        text << "\n";
        for (const auto& [m, ml] : l.models) {
            const ScopeWindow* msc = ps.scope(m);
            const auto mu = msc ? msc->window.usage(now) : RollingWindow::Usage {};
            text << "  model " << m << ": ";
            if (ml.requests)
                text << mu.requests << "/" << l.effective(*ml.requests) << " requests";
            if (ml.tokens)
                text << (ml.requests ? ", " : "") << mu.tokens << "/" << l.effective(*ml.tokens) << " tokens";
            text << " in the last " << fmtSeconds(ml.windowMs) << "\n";
        }
        if (ps.paused)
            text << "  PAUSED" << (ps.pauseReason.empty() ? "" : ": " + ps.pauseReason) << "\n";
        if (ps.backoffUntilMs > now)
            text << "  BACKOFF " << fmtSeconds(((ps.backoffUntilMs - now + 99) / 100) * 100) << " left after "
                 << ps.consecutive429 << " consecutive 429(s)\n";
        else if (ps.consecutive429)
            text << "  " << ps.consecutive429 << " consecutive 429(s), backoff over\n";
        for (const auto& s : ps.slots)
            text << "  slot fence " << s.fence << ": " << s.caller << " (pid " << s.pid << ", " << fmtSeconds(now - s.acquiredMs)
                 << ", " << slotState(c.probe, s, &l, now) << ")\n";
        for (const auto& w : ps.queue)
            text << "  waiting: " << w.caller << " (pid " << w.pid << ", " << fmtSeconds(now - w.enqueuedMs) << ", "
                 << waitReasonName(w.reason) << ")\n";
    }
    out["providers"] = providers;
    if (c.json)
        printJson(out);
    else if (!c.quiet) {
        if (snap->limits.providers().empty())
            std::cout << "no providers yet (home " << c.store->dir()
                      << "); add one with: tollgate limits set PROVIDER --requests N --window SECONDS\n";
        std::cout << text.str();
    }
    return EXIT_OK;
}

int cmdHistory(const std::vector<std::string>& argv)
{
    Context c("history", { { "since", true }, { "provider", true } });
    if (int code = c.open(argv); code >= 0)
        return code;
    auto since = c.seconds("since");
    if (!since)
        return usageError(c.command, since.error().message);
    const std::int64_t fromMs = c.clock.unixSeconds() * 1000 - toMs(since->value_or(3600));
    const auto provider = c.args.value("provider");
    HistoryReader reader(c.store->dir());
    auto batch = reader.poll();
    if (!batch)
        return fail(batch.error());
    json list = json::array();
    for (const auto& e : batch->events) {
        if (e.timeMs < fromMs || (provider && e.provider != *provider && !e.provider.empty()))
            continue;
        if (c.json) {
            list.push_back(json::parse(e.toJsonLine(), nullptr, false));
            continue;
        }
        if (c.quiet)
            continue;
        const std::time_t t = static_cast<std::time_t>(e.timeMs / 1000);
        std::tm tm {};
        ::localtime_r(&t, &tm);
        char when[32];
        std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        std::cout << when << "." << (e.timeMs % 1000) / 100 << "  " << e.type;
        if (!e.provider.empty())
            std::cout << "  " << e.provider;
        if (!e.caller.empty())
            std::cout << "  caller=" << e.caller;
        if (!e.model.empty())
            std::cout << "  model=" << e.model;
        if (e.tokens)
            std::cout << "  tokens=" << e.tokens;
        if (e.fence)
            std::cout << "  fence=" << e.fence;
        if (e.waitedMs)
            std::cout << "  waited=" << fmtSeconds(e.waitedMs);
        if (e.retryAfterMs)
            std::cout << "  retry-after=" << fmtSeconds(e.retryAfterMs);
        if (e.backoffMs)
            std::cout << "  backoff=" << fmtSeconds(e.backoffMs);
        if (!e.reason.empty())
            std::cout << "  (" << e.reason << ")";
        std::cout << '\n';
    }
    if (c.json)
        printJson(list);
    if (batch->badLines)
        std::cerr << "tollgate: skipped " << batch->badLines << " unreadable history line(s)\n";
    return EXIT_OK;
}

int cmdReleaseStale(const std::vector<std::string>& argv)
{
    Context c("release-stale", { { "overdue", false } });
    if (int code = c.open(argv); code >= 0)
        return code;
    auto n = c.limiter->releaseStale(c.args.has("overdue"), who());
    if (!n)
        return fail(n.error());
    if (c.json) {
        json j;
        j["released"] = *n;
        printJson(j);
    } else if (!c.quiet) {
        std::cout << (*n ? "released " + std::to_string(*n) + " stale holder(s)/waiter(s)" : "nothing stale") << '\n';
    }
    return EXIT_OK;
}

int cmdRelease(const std::vector<std::string>& argv)
{
    Context c("release", { { "fence", true } });
    if (int code = c.open(argv); code >= 0)
        return code;
    const auto& pos = c.args.positional();
    if (pos.size() != 1)
        return usageError(c.command, "missing PROVIDER");
    auto fence = c.integer("fence", 1, INT64_MAX);
    if (!fence || !*fence)
        return usageError(c.command, fence ? "--fence N is required" : fence.error().message);
    auto r = c.limiter->releaseSlot(pos[0], static_cast<std::uint64_t>(**fence), who());
    if (!r)
        return fail(r.error());
    if (!*r) {
        if (!c.quiet)
            std::cerr << "tollgate: " << pos[0] << ": no slot with fence " << **fence << '\n';
        return EXIT_REFUSED;
    }
    if (!c.quiet && !c.json)
        std::cout << "released slot fence " << **fence << '\n';
    return EXIT_OK;
}

} // namespace

bool QuotaCommand::handles(const std::string& command)
{
    return std::find(COMMANDS.begin(), COMMANDS.end(), command) != COMMANDS.end();
}

const char* QuotaCommand::usage()
{
    return "shared quota commands (all take --home DIR, --json, -q):\n"
           "  tollgate limits set PROVIDER [--model M] [--requests N --window SECONDS] [--tokens N]\n"
           "                      [--parallel N] [--headroom PERCENT] [--backoff-base S] [--backoff-cap S]\n"
           "                      [--max-hold S] [--no-tokens] [--no-parallel] [--no-requests]\n"
           "  tollgate limits show [PROVIDER]        tollgate limits remove PROVIDER [--model M]\n"
           "  tollgate acquire PROVIDER --caller NAME [--model M] [--tokens N] [--timeout S] [--slot] [--pid PID]\n"
           "  tollgate run PROVIDER --caller NAME [--model M] [--tokens N] [--timeout S]\n"
           "               [--rate-limited-exit CODE] -- CMD [ARGS...]\n"
           "  tollgate report-429 PROVIDER --caller NAME [--retry-after SECONDS|HTTP-DATE]\n"
           "  tollgate report-ok PROVIDER --caller NAME\n"
           "  tollgate pause [PROVIDER] [--reason TEXT]     tollgate resume [PROVIDER]\n"
           "  tollgate reset-backoff PROVIDER\n"
           "  tollgate status                              tollgate history [--since SECONDS] [--provider P]\n"
           "  tollgate release-stale [--overdue]           tollgate release PROVIDER --fence N\n"
           "waits default to 60 s (--timeout). exit codes: 0 ok, 1 timed out / refused, 2 usage, 3 I/O or corrupt state\n";
}

int QuotaCommand::run(const std::string& command, const std::vector<std::string>& args)
{
    if (command == "limits")
        return cmdLimits(args);
    if (command == "acquire")
        return cmdAcquire(args);
    if (command == "run")
        return cmdRun(args);
    if (command == "report-429" || command == "report-ok")
        return cmdReport(command, args);
    if (command == "pause" || command == "resume" || command == "reset-backoff")
        return cmdPauseResume(command, args);
    if (command == "status")
        return cmdStatus(args);
    if (command == "history")
        return cmdHistory(args);
    if (command == "release-stale")
        return cmdReleaseStale(args);
    if (command == "release")
        return cmdRelease(args);
    return usageError(command, "unknown command");
}

} // namespace tollgate::cli
