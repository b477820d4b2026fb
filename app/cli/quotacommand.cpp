#include "quotacommand.h"

#include "backend/quotalimiter.h"
#include "backend/storefactory.h"
#include "base/systemclock.h"
#include "childrunner.h"
#include "clioptions.h"
#include "console.h"
#include "exitcodes.h"
#include "quota/capacity.h"
#include "quota/holderstatus.h"
#include "quota/retryafter.h"
#include "system/fd.h"
#include "system/homedir.h"
#include "system/hostidentity.h"
#include "watchcommand.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace tollgate::cli {

namespace {

using nlohmann::json;

constexpr double DEFAULT_TIMEOUT_SECONDS = 60.0;
constexpr std::chrono::milliseconds MIN_REDIS_OP { 500 };
constexpr std::int64_t MAX_AMOUNT = std::int64_t(1) << 40;

// Every option of every shared-quota command. One command runs per process, so the
// subcommands bind their options to this one set.
struct Options
{
    CliOptions::Common common;
    std::string provider; // the PROVIDER positional ("" when not given)
    std::optional<std::string> caller, model, reason, retryAfter, providerFilter;
    std::optional<std::int64_t> tokens, pid, rateLimitedExit, fence, tokensUsed;
    // limits set: taken as numbers and checked by QuotaLimits::check, the one range check
    // limits.json is read with, so both refuse the same values with the same words.
    std::optional<double> requests, limitTokens, parallel, headroom, window, backoffBase, backoffCap, maxHold;
    std::optional<double> timeout, since;
    bool slot = false, overdue = false, noTokens = false, noParallel = false, noRequests = false;
    // limits import FILE [--replace]
    std::string importFile;
    bool replace = false;
    // status --watch [SECONDS]: watchGiven when the option was given at all (its value is optional).
    std::optional<std::string> watch;
    bool watchGiven = false;
};

Options g_options;
const CommandTable* g_table = nullptr;

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

// Saturating: llround of a value beyond int64 is undefined, and `--since 1e300` is valid input.
std::int64_t toMs(double seconds)
{
    constexpr double MAX_SECONDS = 1e15; // 31 million years: more than any history holds
    return static_cast<std::int64_t>(std::llround(std::clamp(seconds, 0.0, MAX_SECONDS) * 1000.0));
}

std::int64_t nowMsOf(const Clock& clock)
{
    return clock.unixMs();
}

struct Context
{
    Console console;
    const SystemClock clock;
    const ProcessProbe probe;
    std::string home; // as shown and passed on: the directory or the URL
    std::unique_ptr<QuotaBackend> store;
    std::unique_ptr<QuotaReader> reader;
    std::optional<QuotaView> firstLook; // taken by openExisting on a Redis home, used by the first peek
    std::unique_ptr<QuotaLimiter> limiter;
    // Each Redis operation's deadline; acquire and run bound it by their --timeout.
    std::chrono::milliseconds redisTimeout = RedisConnection::DEFAULT_TIMEOUT;

    explicit Context(std::string command)
        : console(std::move(command), g_options.common.json, g_options.common.quiet)
    {
    }
    ~Context()
    {
        // Warnings of a store nobody printed a result for yet (a failure path) still reach stderr.
        console.collectWarnings(store.get());
    }

    // The write side: creates the home when needed (a named home only as its last directory,
    // see StoreFactory::openBackend). Returns an exit code, or -1 to go on.
    int open()
    {
        auto spec = HomeSpec::resolve(g_options.common.home);
        if (!spec)
            return console.fail(spec.error());
        return open(*spec);
    }

    // The write side for commands that can do nothing on a home that does not exist yet
    // (release, a report or a switch of a named provider, which has no limits there): such a
    // home is left uncreated and `missing` is set, for the command to answer as the empty
    // home would. Otherwise as open(). Returns an exit code, or -1 to go on.
    int openUnlessMissing(bool& missing)
    {
        missing = false;
        auto spec = HomeSpec::resolve(g_options.common.home);
        if (!spec)
            return console.fail(spec.error());
        home = spec->text();
        struct stat st
        {
        };
        // ENOENT also covers a missing parent (a mistyped --home): nothing to act on either.
        // A Redis home is only known to exist by asking the server: opened as always.
        if (spec->isDirectory() && ::lstat(spec->dir().c_str(), &st) != 0 && errno == ENOENT) {
            missing = true;
            return -1;
        }
        return open(*spec);
    }

    // What a command naming a provider answers on a missing home: no limits, so no provider
    // (the same refusal and exit code as on an empty home).
    int failUnknownOnMissingHome(const std::string& provider)
    {
        return console.fail(Error::make(ErrorKind::Usage, "",
            "unknown provider '" + provider + "'; no Tollgate home at " + home
                + " yet, so no providers (add one with: tollgate limits set PROVIDER --requests N --window "
                  "SECONDS)"));
    }

    int open(const HomeSpec& spec)
    {
        home = spec.text();
        auto s = StoreFactory::openBackend(spec, clock, probe, nullptr, redisTimeout);
        if (!s)
            return console.fail(s.error());
        store = std::move(s).value();
        console.setStore(store.get());
        limiter = std::make_unique<QuotaLimiter>(*store, clock, probe);
        return -1;
    }

    // The read side: never creates anything. Returns an exit code, 0 after saying that
    // there is no home yet (exists stays false), or -1 to go on (with `reader` set when the
    // home exists).
    int openExisting(bool& exists)
    {
        exists = false;
        auto spec = HomeSpec::resolve(g_options.common.home);
        if (!spec)
            return console.fail(spec.error());
        home = spec->text();
        auto r = StoreFactory::openReader(*spec);
        if (!r && r.error().kind == ErrorKind::NotFound)
            return -1;
        if (!r)
            return console.fail(r.error());
        reader = std::move(r).value();
        if (!spec->isDirectory()) {
            // A Redis home exists once something ran there: only a look at the server tells.
            auto look = reader->snapshot();
            if (!look && look.error().kind == ErrorKind::NotFound)
                return -1;
            if (!look)
                return console.fail(look.error());
            firstLook = std::move(look).value(); // the command's first peek (one round trip, not two)
        }
        exists = true;
        return -1;
    }

    void sayNoHome() const { console.say("no Tollgate home at " + home + " yet (nothing has run here)"); }

    // A look at the home without a transaction: names a corrupt file as an error.
    Result<QuotaView> peek(bool needState)
    {
        Result<QuotaView> view = firstLook ? Result<QuotaView>(std::move(*firstLook)) : reader->snapshot();
        firstLook.reset();
        if (!view)
            return view.error();
        const bool limitsCorrupt = view->limitsCorrupt;
        if (!view->corruptFile.empty() && (limitsCorrupt || needState)) {
            std::string message = view->corruptReason;
            const bool redis = home.rfind("redis://", 0) == 0;
            if (!limitsCorrupt && redis)
                message
                    += " (the next command that changes the quota sets it aside in the home's 'corrupt' key"
                       " and starts that provider from a conservative state)";
            else if (!limitsCorrupt)
                message += " (the next command that changes the quota sets it aside as " + view->corruptFile
                    + ".corrupt-TIME and starts from a conservative state)";
            return Error::make(ErrorKind::Corrupt, view->corruptFile, message);
        }
        return view;
    }
};

// A request's PROVIDER is required; its name must be valid.
int needProvider(Context& c)
{
    if (g_options.provider.empty())
        return c.console.usage("missing PROVIDER");
    return -1;
}

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

std::string amounts(const std::optional<std::int64_t>& requests, const std::optional<std::int64_t>& tokens)
{
    std::string out;
    if (requests)
        out += std::to_string(*requests) + " requests";
    if (tokens)
        out += (requests ? ", " : "") + std::to_string(*tokens) + " tokens";
    return out;
}

std::string describeLimits(const ProviderLimits& l)
{
    std::ostringstream out;
    const std::optional<std::int64_t> req
        = l.requests ? std::optional(l.effective(*l.requests)) : std::nullopt;
    const std::optional<std::int64_t> tok = l.tokens ? std::optional(l.effective(*l.tokens)) : std::nullopt;
    out << amounts(req, tok);
    if (l.requests || l.tokens)
        out << " per " << fmtSeconds(l.windowMs);
    if (l.parallel)
        out << ((l.requests || l.tokens) ? ", " : "") << *l.parallel << " parallel";
    if (!l.requests && !l.tokens && !l.parallel)
        out << "no limits";
    if (l.headroomPercent != 100 && (l.requests || l.tokens))
        out << " (headroom " << l.headroomPercent << "% of " << amounts(l.requests, l.tokens) << ")";
    return out.str();
}

ProviderLimits modelShown(const ProviderLimits& l, const ModelLimits& ml)
{
    ProviderLimits shown;
    shown.requests = ml.requests;
    shown.tokens = ml.tokens;
    shown.windowMs = ml.windowMs;
    shown.headroomPercent = l.headroomPercent;
    return shown;
}

int cmdLimitsShow()
{
    Context c("limits show");
    bool exists = false;
    if (int code = c.openExisting(exists); code >= 0)
        return code;
    const std::string& only = g_options.provider;
    if (!exists) {
        c.sayNoHome();
        if (!only.empty())
            return c.console.fail(
                Error::make(ErrorKind::Usage, "", "unknown provider '" + only + "': no limits set yet"));
        c.console.emit(json::array());
        return EXIT_OK;
    }
    auto view = c.peek(false);
    if (!view)
        return c.console.fail(view.error());
    const QuotaLimits& all = view->limits;
    if (!only.empty() && !all.find(only))
        return c.console.fail(Error::make(ErrorKind::Usage, "",
            "unknown provider '" + only + "'; known providers: " + all.knownProviders()));
    json list = json::array();
    for (const auto& [name, l] : all.providers()) {
        if (!only.empty() && name != only)
            continue;
        list.push_back(limitsJson(name, l));
        c.console.say(name + ": " + describeLimits(l) + "; backoff " + fmtSeconds(l.backoffBaseMs)
            + " doubling to " + fmtSeconds(l.backoffCapMs) + "; max hold " + fmtSeconds(l.maxHoldMs));
        for (const auto& [m, ml] : l.models)
            c.console.say("  model " + m + ": " + describeLimits(modelShown(l, ml)));
    }
    if (all.providers().empty())
        c.console.say(
            "no providers yet; add one with: tollgate limits set PROVIDER --requests N --window SECONDS");
    c.console.emit(list);
    return EXIT_OK;
}

// The limits of a home as a document another home can import: the limits.json format.
int cmdLimitsExport()
{
    Context c("limits export");
    bool exists = false;
    if (int code = c.openExisting(exists); code >= 0)
        return code;
    QuotaLimits out;
    const std::string& only = g_options.provider;
    if (exists) {
        auto view = c.peek(false);
        if (!view)
            return c.console.fail(view.error());
        if (!only.empty() && !view->limits.find(only))
            return c.console.fail(Error::make(ErrorKind::Usage, "",
                "unknown provider '" + only + "'; known providers: " + view->limits.knownProviders()));
        for (const auto& [name, l] : view->limits.providers()) {
            if (only.empty() || name == only)
                (void)out.set(name, l); // valid: read through the same checks
        }
    } else if (!only.empty()) {
        return c.console.fail(
            Error::make(ErrorKind::Usage, "", "unknown provider '" + only + "': no limits set yet"));
    }
    const std::string doc = out.toJson();
    if (g_options.common.json)
        c.console.emit(json::parse(doc, nullptr, false));
    else
        std::cout << doc << (doc.empty() || doc.back() != '\n' ? "\n" : "") << std::flush;
    if (out.providers().empty())
        c.console.warn("no limits to export (home " + c.home + ")");
    return EXIT_OK;
}

// Limits from a document (`limits export` of another home, or limits.json): checked whole
// before anything changes, then set in one operation.
int cmdLimitsImport()
{
    Context c("limits import");
    constexpr std::size_t MAX_IMPORT_BYTES = 1 << 20;
    const std::string& file = g_options.importFile;
    Result<std::string> text = std::string();
    if (file == "-") {
        std::string in;
        char buf[65536];
        std::size_t n = 0;
        while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0 && in.size() <= MAX_IMPORT_BYTES)
            in.append(buf, n);
        text = std::move(in);
    } else {
        // Never blocks: a FIFO or device named here is refused, not waited on.
        auto fd = Fd::openRegular(file, O_RDONLY);
        text = fd ? fd->readAll(MAX_IMPORT_BYTES + 1) : Result<std::string>(fd.error());
    }
    if (!text)
        return c.console.fail(text.error());
    const std::string shown = file == "-" ? std::string("standard input") : file;
    if (text->size() > MAX_IMPORT_BYTES)
        return c.console.fail(Error::make(ErrorKind::Usage, shown, "more than 1 MiB: not a limits document"));
    auto incoming = QuotaLimits::fromJson(*text);
    if (!incoming)
        return c.console.fail(
            Error::make(ErrorKind::Usage, shown, "not a limits document: " + incoming.error().message));
    if (incoming->providers().empty() && g_options.replace)
        return c.console.fail(Error::make(ErrorKind::Usage, shown,
            "names no provider: with --replace that would remove every limit (use limits remove)"));
    if (int code = c.open(); code >= 0)
        return code;
    auto changed = c.limiter->importLimits(*incoming, g_options.replace, who());
    if (!changed)
        return c.console.fail(changed.error());
    json out;
    out["changed"] = *changed;
    out["providers"] = incoming->providers().size();
    if (changed->empty()) {
        c.console.say("nothing changed: the limits are already those of " + shown);
    } else {
        std::string list;
        for (const auto& name : *changed)
            list += (list.empty() ? "" : ", ") + name;
        c.console.say("imported from " + shown + ": " + list);
    }
    c.console.emit(out);
    return EXIT_OK;
}

int cmdLimitsRemove()
{
    Context c("limits remove");
    if (int code = needProvider(c); code >= 0)
        return code;
    bool missing = false;
    if (int code = c.openUnlessMissing(missing); code >= 0)
        return code;
    if (missing)
        return c.failUnknownOnMissingHome(g_options.provider);
    const std::string& provider = g_options.provider;
    const auto& model = g_options.model;
    json result;
    result["provider"] = provider;
    result["removed"] = true;
    if (!model) {
        if (auto r = c.limiter->removeLimits(provider, who()); !r)
            return c.console.fail(r.error());
        c.console.say("removed provider " + provider);
        c.console.emit(result);
        return EXIT_OK;
    }
    auto all = c.limiter->limits();
    if (!all)
        return c.console.fail(all.error());
    const ProviderLimits* existing = all->find(provider);
    if (!existing || !existing->models.count(*model))
        return c.console.fail(Error::make(
            ErrorKind::Usage, "", "provider '" + provider + "' has no limits for model '" + *model + "'"));
    ProviderLimits l = *existing;
    l.models.erase(*model);
    if (auto r = c.limiter->setLimits(provider, l, who()); !r)
        return c.console.fail(r.error());
    c.console.say("removed model " + *model + " from " + provider);
    result["model"] = *model;
    c.console.emit(result);
    return EXIT_OK;
}

int cmdLimitsSet()
{
    Context c("limits set");
    const Options& o = g_options;
    if (int code = needProvider(c); code >= 0)
        return code;
    if (auto r = QuotaLimits::validateName("provider", o.provider); !r)
        return c.console.fail(r.error());
    if (o.model) {
        if (auto r = QuotaLimits::validateName("model", *o.model); !r)
            return c.console.fail(r.error());
    }
    // Every value is checked before anything is opened or created.
    struct Given
    {
        const std::optional<double>& value;
        LimitField field;
        const char* name;
        std::optional<std::int64_t> checked = {};
    };
    Given given[] = { { o.requests, LimitField::Requests, "--requests" },
        { o.limitTokens, LimitField::Tokens, "--tokens" },
        { o.window, LimitField::WindowSeconds, "--window" },
        { o.parallel, LimitField::Parallel, "--parallel" },
        { o.headroom, LimitField::HeadroomPercent, "--headroom" },
        { o.backoffBase, LimitField::BackoffBaseSeconds, "--backoff-base" },
        { o.backoffCap, LimitField::BackoffCapSeconds, "--backoff-cap" },
        { o.maxHold, LimitField::MaxHoldSeconds, "--max-hold" } };
    for (Given& g : given) {
        if (!g.value)
            continue;
        auto v = QuotaLimits::check(g.field, *g.value, g.name);
        if (!v)
            return c.console.usage(v.error().message);
        g.checked = *v;
    }
    const auto& [requests, tokens, window, parallel, headroom, backoffBase, backoffCap, maxHold] = given;
    if (int code = c.open(); code >= 0)
        return code;
    auto all = c.limiter->limits();
    if (!all)
        return c.console.fail(all.error());
    ProviderLimits l = all->find(o.provider) ? *all->find(o.provider) : ProviderLimits {};
    if (o.model) {
        ModelLimits ml = l.models.count(*o.model) ? l.models[*o.model]
                                                  : ModelLimits { std::nullopt, std::nullopt, l.windowMs };
        if (requests.checked)
            ml.requests = requests.checked;
        if (tokens.checked)
            ml.tokens = tokens.checked;
        if (window.checked)
            ml.windowMs = *window.checked;
        if (o.noTokens)
            ml.tokens.reset();
        if (o.noRequests)
            ml.requests.reset();
        if (!ml.requests && !ml.tokens)
            return c.console.usage("a model limit needs --requests or --tokens");
        l.models[*o.model] = ml;
    } else {
        if (requests.checked)
            l.requests = requests.checked;
        if (tokens.checked)
            l.tokens = tokens.checked;
        if (parallel.checked)
            l.parallel = parallel.checked;
        if (headroom.checked)
            l.headroomPercent = *headroom.checked;
        if (window.checked)
            l.windowMs = *window.checked;
        if (backoffBase.checked)
            l.backoffBaseMs = *backoffBase.checked;
        if (backoffCap.checked)
            l.backoffCapMs = *backoffCap.checked;
        if (maxHold.checked)
            l.maxHoldMs = *maxHold.checked;
        if (o.noTokens)
            l.tokens.reset();
        if (o.noParallel)
            l.parallel.reset();
        if (o.noRequests)
            l.requests.reset();
        if (!l.requests && !l.tokens && !l.parallel)
            return c.console.usage("give at least one of --requests, --tokens or --parallel");
    }
    if (auto r = c.limiter->setLimits(o.provider, l, who()); !r)
        return c.console.fail(r.error());
    if (o.model)
        c.console.say(
            o.provider + " model " + *o.model + ": " + describeLimits(modelShown(l, l.models[*o.model])));
    else
        c.console.say(o.provider + ": " + describeLimits(l));
    c.console.emit(limitsJson(o.provider, l));
    return EXIT_OK;
}

WallTime deadlineFrom(const Clock& clock, double seconds)
{
    return clock.now()
        + std::chrono::duration_cast<WallTime::duration>(std::chrono::duration<double>(seconds));
}

// acquire and run share their request options.
int parseRequest(Context& c, AdmitRequest& request, double& timeoutSeconds)
{
    const Options& o = g_options;
    if (int code = needProvider(c); code >= 0)
        return code;
    request.provider = o.provider;
    if (!o.caller || o.caller->empty())
        return c.console.usage("--caller NAME is required (it names you in status and history)");
    request.caller = *o.caller;
    request.model = o.model.value_or("");
    if (!request.model.empty()) {
        if (auto r = QuotaLimits::validateName("model", request.model); !r)
            return c.console.fail(r.error());
    }
    request.tokens = o.tokens.value_or(0);
    timeoutSeconds = std::min(o.timeout.value_or(DEFAULT_TIMEOUT_SECONDS), 10.0 * 365 * 24 * 3600);
    // A Redis home that does not answer fails the command within its --timeout: each
    // operation gets at most that long (but at least MIN_REDIS_OP, one round trip's room even
    // for a try, and at most the default).
    const auto wanted
        = std::chrono::milliseconds(static_cast<std::int64_t>(std::min(timeoutSeconds, 3600.0) * 1000.0));
    c.redisTimeout = std::clamp(wanted, MIN_REDIS_OP, RedisConnection::DEFAULT_TIMEOUT);
    return -1;
}

// A --model the provider has no limits for is counted against the provider only: say so.
void warnUnknownModel(Context& c, const AdmitRequest& request, double timeoutSeconds)
{
    if (request.model.empty())
        return;
    // Within --timeout, as the acquire that follows (the store's floor lets a try wait out a
    // transaction in progress).
    StoreWait wait;
    wait.deadline = std::chrono::steady_clock::now()
        + std::chrono::milliseconds(toMs(std::min(timeoutSeconds, 3600.0)));
    auto all = c.limiter->limits(wait);
    if (!all)
        return; // the acquire that follows reports it
    const ProviderLimits* l = all->find(request.provider);
    if (l && !l->models.count(request.model))
        c.console.warn("provider " + request.provider + " has no limits for model " + request.model
            + "; only the provider's limits apply (set some with: tollgate limits set " + request.provider
            + " --model " + request.model + " --requests N)");
}

int reportRefusal(Context& c, const Error& e)
{
    if (e.kind != ErrorKind::Timeout || !e.path.empty())
        return c.console.fail(e);
    if (ChildRunner::interrupted().load())
        return c.console.fail(
            Error::make(ErrorKind::Timeout, "", "interrupted while waiting; left the queue"),
            128 + ChildRunner::interruptSignal());
    return c.console.fail(e, EXIT_REFUSED);
}

int cmdAcquire()
{
    Context c("acquire");
    AdmitRequest request;
    double timeoutSeconds = DEFAULT_TIMEOUT_SECONDS;
    if (int code = parseRequest(c, request, timeoutSeconds); code >= 0)
        return code;
    if (int code = c.open(); code >= 0)
        return code;
    warnUnknownModel(c, request, timeoutSeconds);
    // A slot taken by `acquire` belongs to the calling script: reclaimed when it dies.
    request.wantsSlot = g_options.slot;
    request.pid = g_options.pid.value_or(ProcessProbe::parentPid());
    ChildRunner::installSignalHandlers();
    auto permit
        = c.limiter->acquire(request, deadlineFrom(c.clock, timeoutSeconds), &ChildRunner::interrupted());
    if (!permit)
        return reportRefusal(c, permit.error());
    const bool slot = permit->holdsSlot();
    permit->detach();
    c.console.say("admitted provider=" + request.provider + " fence=" + std::to_string(permit->fence())
        + " waited_ms=" + std::to_string(permit->waitedMs()) + (slot ? " slot=held" : ""));
    json j;
    j["admitted"] = true;
    j["provider"] = request.provider;
    j["caller"] = QuotaLimiter::sanitizeCaller(request.caller);
    j["fence"] = permit->fence();
    j["waited_ms"] = permit->waitedMs();
    j["slot"] = slot;
    c.console.emit(j);
    return EXIT_OK;
}

// RetryAfter bounds every value to 24 h: one longer is honoured for 24 h, and said so once.
void warnIfClamped(Context& c, std::string_view value, const RetryAfter::Delay& delay)
{
    if (!delay.clamped)
        return;
    constexpr std::size_t SHOWN = 80;
    const std::string shown
        = value.size() > SHOWN ? std::string(value.substr(0, SHOWN)) + "..." : std::string(value);
    c.console.warn("Retry-After '" + shown + "' asks for more than 24 h; backing off 24 h (the maximum)");
}

// What the command wrote into $TOLLGATE_RETRY_AFTER_FILE. The command may have replaced the
// file with anything: opened without following a link and without blocking, and only read
// when it is a regular file, so a FIFO or a device cannot hang or feed us.
std::string readRetryAfterFile(Context& c, const std::string& path)
{
    auto fd = Fd::openRegular(path, O_RDONLY);
    if (!fd) {
        if (fd.error().sysErrno != ENOENT)
            c.console.warn("ignoring TOLLGATE_RETRY_AFTER_FILE: " + fd.error().describe());
        return "";
    }
    auto text = fd->readAll(256);
    if (!text) {
        c.console.warn("ignoring TOLLGATE_RETRY_AFTER_FILE: " + text.error().describe());
        return "";
    }
    return *text;
}

// The file `run`'s command may write a Retry-After to: in $TMPDIR when that is an absolute
// path, else /tmp, named by its runner ("tollgate-retry-after-NS-PID-XXXXXX": pid namespace
// and pid). Made before the keeper, which removes it if the runner is killed; removed here at
// the end otherwise. Files of runs whose runner and keeper were killed at once (kill -9 of
// the process group: nobody was left to remove them) are removed by the next run of the same
// user: only regular files of ours, named by a runner of our pid namespace that is gone.
struct RetryAfterFile
{
    std::string path; // empty: none could be made

    explicit RetryAfterFile(std::uint64_t pidNamespace)
    {
        const char* tmp = std::getenv("TMPDIR");
        std::string dir = tmp && tmp[0] == '/' ? tmp : "/tmp";
        while (dir.size() > 1 && dir.back() == '/')
            dir.pop_back();
        const std::string ours = "tollgate-retry-after-" + std::to_string(pidNamespace) + "-";
        removeOrphans(dir, ours);
        path = dir + "/" + ours + std::to_string(ProcessProbe::selfPid()) + "-XXXXXX";
        const int fd = ::mkostemp(path.data(), O_CLOEXEC);
        if (fd >= 0)
            ::close(fd);
        else
            path.clear();
    }
    ~RetryAfterFile()
    {
        if (!path.empty())
            ::unlink(path.c_str());
    }
    RetryAfterFile(const RetryAfterFile&) = delete;
    RetryAfterFile& operator=(const RetryAfterFile&) = delete;

    static void removeOrphans(const std::string& dir, const std::string& ours)
    {
        const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            return;
        DIR* d = ::fdopendir(fd);
        if (!d) {
            ::close(fd);
            return;
        }
        int looked = 0;
        while (const dirent* e = ::readdir(d)) {
            if (++looked > 100000)
                break; // a huge directory: the rest waits for another run
            const std::string name = e->d_name;
            if (name.rfind(ours, 0) != 0)
                continue;
            char* end = nullptr;
            const long long pid = std::strtoll(name.c_str() + ours.size(), &end, 10);
            if (pid <= 0 || *end != '-' || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
                continue; // a runner that lives (or that we may not probe) keeps its file
            struct stat st
            {
            };
            if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)
                || st.st_uid != ::geteuid() || st.st_size > 65536)
                continue;
            ::unlinkat(fd, name.c_str(), 0);
        }
        ::closedir(d);
    }
};

int cmdRun()
{
    Context c("run");
    const Options& o = g_options;
    AdmitRequest request;
    double timeoutSeconds = DEFAULT_TIMEOUT_SECONDS;
    if (int code = parseRequest(c, request, timeoutSeconds); code >= 0)
        return code;
    if (g_table->trailing.empty())
        return c.console.usage("run needs a command after --");
    const RetryAfterFile retryFile(c.probe.pidNamespace());
    // The command's keeper holds the slot: it lives until the last process of the command is
    // gone, even when this runner is killed (ChildRunner). Forked before the store is opened,
    // so it holds none of the store's descriptors. A command that cannot run is found out
    // here: it spends no request, tokens or slot.
    ChildRunner::Keeper keeper = ChildRunner::prepare(g_table->trailing, retryFile.path);
    if (!keeper.ok())
        return c.console.fail(Error::make(keeper.exitCode() == 127 ? ErrorKind::NotFound : ErrorKind::Io, "",
                                  keeper.problem() + " (nothing was spent)"),
            keeper.exitCode());
    if (int code = c.open(); code >= 0)
        return code;
    warnUnknownModel(c, request, timeoutSeconds);
    // This runner renews the slot's lease that readers in other pid namespaces go by.
    request.wantsSlot = true;
    request.pid = keeper.pid();
    const auto lease = ChildRunner::lease(QuotaLimiter::RUN_LEASE);
    request.leaseMs = lease.count();
    ChildRunner::installSignalHandlers();
    auto permit
        = c.limiter->acquire(request, deadlineFrom(c.clock, timeoutSeconds), &ChildRunner::interrupted());
    if (!permit)
        return reportRefusal(c, permit.error());

    const int code = ChildRunner::start(
        keeper,
        { { "TOLLGATE_PROVIDER", request.provider },
            { "TOLLGATE_CALLER", QuotaLimiter::sanitizeCaller(request.caller) },
            { "TOLLGATE_MODEL", request.model }, { "TOLLGATE_FENCE", std::to_string(permit->fence()) },
            { "TOLLGATE_HOME", c.home }, { "TOLLGATE_RETRY_AFTER_FILE", retryFile.path } },
        [&, warned = false]() mutable {
            auto held = permit->renew();
            if (!held && !warned)
                c.console.warn("could not renew the slot's lease: " + held.error().describe());
            else if (held && !*held && !warned)
                c.console.warn("the slot (fence " + std::to_string(permit->fence())
                    + ") was taken away (released by hand or reclaimed); the command runs on without it");
            warned = warned || !held || !*held;
        },
        lease / 3);
    if (auto r = permit->release(); !r)
        c.console.warn("could not give the slot back: " + r.error().describe());
    std::string retryAfter = retryFile.path.empty() ? std::string() : readRetryAfterFile(c, retryFile.path);
    json j;
    j["provider"] = request.provider;
    j["fence"] = permit->fence();
    j["waited_ms"] = permit->waitedMs();
    j["exit_code"] = code;
    j["rate_limited"] = false;
    if (o.rateLimitedExit && code == *o.rateLimitedExit) {
        j["rate_limited"] = true;
        std::optional<std::int64_t> ms;
        while (!retryAfter.empty() && (retryAfter.back() == '\n' || retryAfter.back() == '\r'))
            retryAfter.pop_back();
        if (!retryAfter.empty()) {
            // The command's word, not the user's: a value that cannot be read (an impossible
            // date) is warned about, and the 429 counts with the configured backoff.
            auto parsed = RetryAfter::parse(retryAfter, c.clock.unixSeconds() * 1000);
            if (parsed) {
                warnIfClamped(c, retryAfter, *parsed);
                ms = parsed->ms;
            } else {
                c.console.warn("ignoring TOLLGATE_RETRY_AFTER_FILE: " + parsed.error().message);
            }
        }
        auto b = c.limiter->report429(request.provider, request.caller, ms, ProcessProbe::selfPid());
        if (!b) {
            c.console.warn("could not record the 429: " + b.error().describe());
        } else {
            j["backoff_ms"] = *b;
            c.console.tell("tollgate: " + request.provider + " rate-limited (exit " + std::to_string(code)
                + "); all callers back off " + fmtSeconds(*b));
        }
    } else if (code == 0) {
        if (auto r = c.limiter->reportSuccess(request.provider, request.caller); !r)
            c.console.warn("could not record the success: " + r.error().describe());
    }
    c.console.emit(j);
    return code;
}

int cmdReport(bool rateLimited)
{
    Context c(rateLimited ? "report-429" : "report-ok");
    const Options& o = g_options;
    if (int code = needProvider(c); code >= 0)
        return code;
    if (!o.caller || o.caller->empty())
        return c.console.usage("--caller NAME is required");
    std::optional<std::int64_t> retryMs;
    if (rateLimited && o.retryAfter) {
        auto delay = RetryAfter::parse(*o.retryAfter, c.clock.unixSeconds() * 1000);
        if (!delay)
            return c.console.usage("--retry-after: " + delay.error().message);
        warnIfClamped(c, *o.retryAfter, *delay);
        retryMs = delay->ms;
    }
    if (!rateLimited && o.tokensUsed && !o.fence)
        return c.console.usage(
            "--tokens-used needs --fence N: the admission (acquire --slot) whose estimate it replaces");
    bool missing = false;
    if (int code = c.openUnlessMissing(missing); code >= 0)
        return code;
    if (missing)
        return c.failUnknownOnMissingHome(o.provider);
    json j;
    j["provider"] = o.provider;
    if (!rateLimited && o.fence) {
        // The end of a call admitted with `acquire --slot`: the slot, the real usage and the
        // success in one store operation (the slot knows its admission time and estimate).
        AdmissionEnd end;
        end.provider = o.provider;
        end.fence = static_cast<std::uint64_t>(*o.fence);
        end.usedTokens = o.tokensUsed.value_or(-1);
        end.success = true;
        end.caller = *o.caller;
        auto r = c.limiter->finishAdmission(end);
        if (!r)
            return c.console.fail(r.error());
        j["recorded"] = "success";
        j["fence"] = end.fence;
        j["released"] = *r;
        if (!*r)
            return c.console.fail(
                Error::make(ErrorKind::Busy, "",
                    o.provider + ": no slot with fence " + std::to_string(end.fence)
                        + " (released or reclaimed already, or the admission took none: "
                          "acquire --slot takes one only when the provider has --parallel): "
                          "the success was recorded"
                        + (o.tokensUsed ? ", the tokens were not corrected" : "")),
                EXIT_REFUSED);
        c.console.say("recorded a success for " + o.provider + "; released slot fence "
            + std::to_string(end.fence)
            + (o.tokensUsed ? "; the window counts " + std::to_string(*o.tokensUsed) + " tokens for it"
                            : ""));
        c.console.emit(j);
        return EXIT_OK;
    }
    if (!rateLimited) {
        if (auto r = c.limiter->reportSuccess(o.provider, *o.caller); !r)
            return c.console.fail(r.error());
        c.console.say("recorded a success for " + o.provider + "; consecutive 429s reset");
        j["recorded"] = "success";
        c.console.emit(j);
        return EXIT_OK;
    }
    // the caller that got the 429 is the script that ran us
    auto b = c.limiter->report429(o.provider, *o.caller, retryMs, ProcessProbe::parentPid());
    if (!b)
        return c.console.fail(b.error());
    c.console.say(o.provider + ": every caller now backs off for " + fmtSeconds(*b) + " (plus jitter)");
    j["recorded"] = "429";
    j["backoff_ms"] = *b;
    c.console.emit(j);
    return EXIT_OK;
}

enum class Switch { Pause, Resume, ResetBackoff };

int cmdSwitch(Switch which)
{
    Context c(which == Switch::Pause ? "pause" : which == Switch::Resume ? "resume" : "reset-backoff");
    const std::string& provider = g_options.provider;
    if (which == Switch::ResetBackoff) {
        if (int code = needProvider(c); code >= 0)
            return code;
    }
    // A pause of all providers means something before anything ran (it holds every later
    // caller): it creates the home. A named provider has no limits on a missing home, and
    // nothing there is paused.
    bool missing = false;
    const bool createsHome = which == Switch::Pause && provider.empty();
    if (int code = createsHome ? c.open() : c.openUnlessMissing(missing); code >= 0)
        return code;
    if (missing && !provider.empty())
        return c.failUnknownOnMissingHome(provider);
    if (missing) {
        c.console.say("no Tollgate home at " + c.home + " yet: nothing is paused");
        json j;
        j["provider"] = nullptr;
        j["paused"] = false;
        j["home_exists"] = false;
        c.console.emit(j);
        return EXIT_OK;
    }
    const std::string what = provider.empty() ? "all providers" : provider;
    Result<void> r = which == Switch::Pause ? c.limiter->pause(provider, g_options.reason.value_or(""), who())
        : which == Switch::Resume           ? c.limiter->resume(provider, who())
                                            : c.limiter->resetBackoff(provider, who());
    if (!r)
        return c.console.fail(r.error());
    json j;
    j["provider"] = provider.empty() ? json(nullptr) : json(provider);
    if (which == Switch::Pause) {
        c.console.say("paused " + what + "; waiting callers stay queued until `tollgate resume`");
        j["paused"] = true;
        j["reason"] = g_options.reason.value_or("");
    } else if (which == Switch::Resume) {
        c.console.say("resumed " + what);
        j["paused"] = false;
    } else {
        c.console.say("backoff of " + provider + " cleared");
        j["backoff_cleared"] = true;
    }
    c.console.emit(j);
    return EXIT_OK;
}

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
    const std::string held = fmtSeconds(h.heldMs);
    if (h.state == HolderState::Placeholder) {
        v.text = "placeholder from a reset state, " + held;
        return v;
    }
    if (h.ns == HolderNamespace::Ours) {
        v.text = "pid " + std::to_string(s.pid) + ", " + held + ", "
            + (h.whyGone.empty() ? std::string(holderStateName(h.state)) : h.whyGone);
        return v;
    }
    v.text = "pid " + std::to_string(s.pid) + " in "
        + (h.ns == HolderNamespace::Unknown ? "an unknown" : "another") + " pid namespace, "
        + (h.whyGone.empty() ? "lease " + wholeSeconds(h.leaseLeftMs) + " left" : h.whyGone) + ", " + held
        + (h.state == HolderState::Overdue ? ", overdue" : "");
    return v;
}

// "Can the next call go now?" (core's Capacity, the limiter's own rules), for scripts.
json capacityJson(const ProviderCapacity& c)
{
    auto opt = [](const std::optional<std::int64_t>& v) { return v ? json(*v) : json(nullptr); };
    auto ms = [](std::int64_t v) { return v == Capacity::NEVER ? json(nullptr) : json(v); };
    json j;
    j["level"] = capacityLevelName(c.level);
    j["blocked_by"] = c.level == CapacityLevel::Blocked ? json(waitReasonName(c.blockedBy)) : json(nullptr);
    j["blocked_until_ms"] = opt(c.blockedUntilMs);
    j["next_call_in_ms"] = ms(c.nextCallInMs); // null: not a matter of time (paused, slots held)
    j["requests_left"] = opt(c.window.requestsLeft);
    j["next_request_in_ms"] = ms(c.window.nextRequestInMs);
    j["tokens_left"] = opt(c.window.tokensLeft);
    j["tokens_free_in_ms"] = ms(c.window.tokensFreeInMs);
    j["slots_in_use"] = c.slotsInUse;
    j["slots_free"] = opt(c.slotsFree);
    j["backoff_remaining_ms"] = c.backoffRemainingMs;
    j["pace_remaining_ms"] = c.paceRemainingMs;
    return j;
}

int cmdStatus()
{
    if (g_options.watchGiven) {
        double seconds = WatchCommand::DEFAULT_SECONDS;
        if (g_options.watch && !g_options.watch->empty())
            seconds = CliOptions::parseSeconds(*g_options.watch).value(); // checked by the parser
        return WatchCommand::run(g_options.common.home, seconds);
    }
    Context c("status");
    bool exists = false;
    if (int code = c.openExisting(exists); code >= 0)
        return code;
    json out;
    out["home"] = c.home;
    {
        // Which host this is (machine id + pid namespace): holders from other hosts are judged by
        // their lease, never by a pid of ours.
        json host;
        host["name"] = HostIdentity::hostName();
        auto id = HostIdentity::current(c.probe.pidNamespace());
        host["id"] = id ? json(*id) : json(nullptr);
        if (!id)
            host["problem"] = id.error().describe();
        out["host"] = host;
    }
    out["home_exists"] = exists;
    if (!exists) {
        c.sayNoHome();
        out["paused_all"] = false;
        out["pause_reason"] = "";
        out["providers"] = json::array();
        c.console.emit(out);
        return EXIT_OK;
    }
    auto view = c.peek(true);
    if (!view)
        return c.console.fail(view.error());
    const std::int64_t now = nowMsOf(c.clock);
    QuotaState state = view->state.value_or(QuotaState {});
    QuotaPolicy::settle(state, view->limits, now, c.probe);
    out["paused_all"] = state.pausedAll;
    out["pause_reason"] = state.pauseReason;
    json providers = json::array();
    if (view->limits.providers().empty())
        c.console.say("no providers yet (home " + c.home
            + "); add one with: tollgate limits set PROVIDER --requests N --window SECONDS");
    if (state.pausedAll)
        c.console.say("ALL PAUSED" + (state.pauseReason.empty() ? std::string() : ": " + state.pauseReason));
    for (const auto& [name, l] : view->limits.providers()) {
        const ProviderState& ps = *state.provider(name);
        // Core's summary of the provider (the dashboard and status --watch show the same).
        const ProviderCapacity cap = Capacity::forProvider(state, name, &l, now, &c.probe);
        const RollingWindow::Usage used { cap.window.requestsUsed, cap.window.tokensUsed };
        json j = limitsJson(name, l);
        j["used_requests"] = used.requests;
        j["used_tokens"] = used.tokens;
        j["paused"] = cap.paused;
        j["pause_reason"] = cap.pauseReason;
        j["backoff_remaining_ms"] = cap.backoffRemainingMs;
        j["consecutive_429s"] = cap.consecutive429;
        j["admitted_total"] = ps.admittedTotal;
        j["rate_limited_total"] = ps.rateLimitedTotal;
        j["waiting"] = cap.waiting;
        j["capacity"] = capacityJson(cap);
        {
            // What the provider's own headers said (tollgate proxy); null: never reported.
            json r = nullptr;
            if (cap.reportedAtMs > 0) {
                auto orNull = [](std::int64_t v) { return v < 0 ? json(nullptr) : json(v); };
                r = json::object();
                r["requests_per_minute"] = orNull(cap.reportedRequests);
                r["tokens_per_minute"] = orNull(cap.reportedTokens);
                r["reported_at_ms"] = cap.reportedAtMs;
                r["age_ms"] = std::max<std::int64_t>(0, now - cap.reportedAtMs);
            }
            j["provider_reported"] = r;
            j["limit_notices"] = cap.limitNotices;
        }
        json slots = json::array();
        for (const auto& s : ps.slots) {
            json sj;
            sj["fence"] = s.fence;
            sj["pid"] = s.pid;
            sj["caller"] = s.caller;
            sj["model"] = s.model;
            sj["age_ms"] = now - s.acquiredMs;
            const HolderStatus h = holderView(c.probe, s, l, now).status;
            sj["state"] = holderStateName(h.state);
            sj["pid_namespace"] = holderNamespaceName(h.ns);
            if (h.ns != HolderNamespace::Ours && s.pid != 0)
                sj["lease_remaining_ms"] = h.leaseLeftMs;
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

        std::ostringstream line;
        line << name << ": ";
        if (l.requests)
            line << used.requests << "/" << l.effective(*l.requests) << " requests";
        if (l.tokens)
            line << (l.requests ? ", " : "") << used.tokens << "/" << l.effective(*l.tokens) << " tokens";
        if (l.requests || l.tokens)
            line << " in the last " << fmtSeconds(l.windowMs);
        if (l.parallel)
            line << ((l.requests || l.tokens) ? ", " : "") << ps.slots.size() << "/" << *l.parallel
                 << " slots";
        c.console.say(line.str());
        for (const auto& [m, ml] : l.models) {
            const ScopeWindow* msc = ps.scope(m);
            const auto mu = msc ? msc->window.usage(now) : RollingWindow::Usage {};
            std::ostringstream ml_line;
            ml_line << "  model " << m << ": ";
            if (ml.requests)
                ml_line << mu.requests << "/" << l.effective(*ml.requests) << " requests";
            if (ml.tokens)
                ml_line << (ml.requests ? ", " : "") << mu.tokens << "/" << l.effective(*ml.tokens)
                        << " tokens";
            ml_line << " in the last " << fmtSeconds(ml.windowMs);
            c.console.say(ml_line.str());
        }
        for (const auto& notice : cap.limitNotices)
            c.console.say("  NOTE " + notice + " (reported "
                + fmtSeconds(std::max<std::int64_t>(0, now - cap.reportedAtMs)) + " ago)");
        if (ps.paused)
            c.console.say("  PAUSED" + (ps.pauseReason.empty() ? std::string() : ": " + ps.pauseReason));
        if (const std::int64_t until = QuotaPolicy::backoffUntil(ps, now); until > now) {
            std::string b = "  BACKOFF " + fmtSeconds(((until - now + 99) / 100) * 100) + " left";
            // A success resets the count but not a backoff already in force; a hold (the
            // provider's headers said nothing is left until then) counts no 429 at all, and
            // the state does not tell the two apart.
            b += ps.consecutive429 > 0
                ? " after " + std::to_string(ps.consecutive429) + " consecutive 429(s)"
                : std::string(
                    " (from a 429 before the last success, or a hold: the provider said nothing is left)");
            c.console.say(b);
        } else if (ps.consecutive429) {
            c.console.say("  " + std::to_string(ps.consecutive429) + " consecutive 429(s), backoff over");
        }
        for (const auto& s : ps.slots)
            c.console.say("  slot fence " + std::to_string(s.fence) + ": " + s.caller + " ("
                + holderView(c.probe, s, l, now).text + ")");
        for (const auto& w : ps.queue)
            c.console.say("  waiting: " + w.caller + " (pid " + std::to_string(w.pid) + ", "
                + fmtSeconds(now - w.enqueuedMs) + ", " + waitReasonName(w.reason) + ")");
    }
    out["providers"] = providers;
    c.console.emit(out);
    return EXIT_OK;
}

int cmdHistory()
{
    Context c("history");
    bool exists = false;
    if (int code = c.openExisting(exists); code >= 0)
        return code;
    if (!exists) {
        c.sayNoHome();
        c.console.emit(json::array());
        return EXIT_OK;
    }
    const std::int64_t fromMs = c.clock.unixSeconds() * 1000 - toMs(g_options.since.value_or(3600));
    const auto& provider = g_options.providerFilter;
    auto cursor = c.reader->history();
    auto batch = cursor->poll();
    if (!batch)
        return c.console.fail(batch.error());
    json list = json::array();
    for (const auto& e : batch->events) {
        if (e.timeMs < fromMs || (provider && e.provider != *provider && !e.provider.empty()))
            continue;
        list.push_back(json::parse(e.toJsonLine(), nullptr, false));
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
            line << "  waited=" << fmtSeconds(e.waitedMs);
        if (e.retryAfterMs)
            line << "  retry-after=" << fmtSeconds(e.retryAfterMs);
        if (e.backoffMs)
            line << "  backoff=" << fmtSeconds(e.backoffMs);
        if (!e.reason.empty())
            line << "  (" << e.reason << ")";
        c.console.say(line.str());
    }
    if (batch->badLines)
        c.console.warn("skipped " + std::to_string(batch->badLines) + " unreadable history line(s)");
    c.console.emit(list);
    return EXIT_OK;
}

int cmdReleaseStale()
{
    Context c("release-stale");
    bool missing = false;
    if (int code = c.openUnlessMissing(missing); code >= 0)
        return code;
    if (missing) {
        c.console.say("no Tollgate home at " + c.home + " yet: nothing to release");
        json j;
        j["released"] = 0;
        j["home_exists"] = false;
        c.console.emit(j);
        return EXIT_OK;
    }
    auto n = c.limiter->releaseStale(g_options.overdue, who());
    if (!n)
        return c.console.fail(n.error());
    c.console.say(
        *n ? "released " + std::to_string(*n) + " stale holder(s)/waiter(s)" : std::string("nothing stale"));
    json j;
    j["released"] = *n;
    c.console.emit(j);
    return EXIT_OK;
}

int cmdRelease()
{
    Context c("release");
    if (int code = needProvider(c); code >= 0)
        return code;
    if (!g_options.fence)
        return c.console.usage("--fence N is required");
    const auto fence = static_cast<std::uint64_t>(*g_options.fence);
    bool missing = false;
    if (int code = c.openUnlessMissing(missing); code >= 0)
        return code;
    if (missing) // as for a fence no slot has: refused (exit 1), and nothing is created
        return c.console.fail(
            Error::make(ErrorKind::Busy, "",
                "no Tollgate home at " + c.home + " yet: nothing to release (no slot with fence "
                    + std::to_string(fence) + ")"),
            EXIT_REFUSED);
    auto r = c.limiter->releaseSlot(g_options.provider, fence, who());
    if (!r)
        return c.console.fail(r.error());
    if (!*r)
        return c.console.fail(Error::make(ErrorKind::Busy, "",
                                  g_options.provider + ": no slot with fence " + std::to_string(fence)),
            EXIT_REFUSED);
    c.console.say("released slot fence " + std::to_string(fence));
    json j;
    j["provider"] = g_options.provider;
    j["fence"] = fence;
    j["released"] = true;
    c.console.emit(j);
    return EXIT_OK;
}

} // namespace

void QuotaCommand::addTo(CLI::App& app, CommandTable& table)
{
    g_table = &table;
    Options& o = g_options;
    auto command = [&](CLI::App* parent, const std::string& name, const std::string& help,
                       CommandTable::Action action) {
        CLI::App* sub = parent->add_subcommand(name, help);
        CliOptions::addCommon(sub, o.common);
        table.add(sub, std::move(action));
        return sub;
    };
    auto provider
        = [&o](CLI::App* sub, const std::string& help) { sub->add_option("PROVIDER", o.provider, help); };
    auto caller = [&o](CLI::App* sub, const std::string& help) {
        CliOptions::addText(sub, "--caller", o.caller, help)->type_name("NAME");
    };
    auto request = [&](CLI::App* sub) {
        provider(sub, "the provider whose quota to use");
        caller(sub, "who you are (required; shown in status and history)");
        CliOptions::addText(sub, "--model", o.model, "count against this model's limits too")->type_name("M");
        CliOptions::addInteger(
            sub, "--tokens", o.tokens, 0, MAX_AMOUNT, "tokens this request will use (default 0)");
        CliOptions::addSeconds(sub, "--timeout", o.timeout, "how long to wait at most (default 60)");
    };

    CLI::App* limits = app.add_subcommand("limits", "set, show, remove, export or import providers' limits");
    limits->require_subcommand(0, 1);
    CliOptions::addCommon(limits, o.common);

    CLI::App* set = command(
        limits, "set", "set (or change) the limits of PROVIDER, or of one of its models", cmdLimitsSet);
    provider(set, "the provider (letters, digits and . _ - : @)");
    CLI::Option* model = CliOptions::addText(
        set, "--model", o.model, "set the limits of this model (requests, tokens, window)")
                             ->type_name("M");
    // Their ranges are checked by cmdLimitsSet with QuotaLimits::check.
    CLI::Option* requests
        = CliOptions::addNumber(set, "--requests", o.requests, "requests per window (1 to 2^40)")
              ->type_name("N");
    CliOptions::addNumber(set, "--window", o.window, "the rolling window (0.1 s to 7 days; default 60)");
    CLI::Option* tokens
        = CliOptions::addNumber(set, "--tokens", o.limitTokens, "tokens per window (1 to 2^40)")
              ->type_name("N");
    CLI::Option* parallel
        = CliOptions::addNumber(set, "--parallel", o.parallel, "requests in flight at once (1 to 256)")
              ->type_name("N");
    CLI::Option* headroom = CliOptions::addNumber(
        set, "--headroom", o.headroom, "use only this percentage of the limits (1 to 100)")
                                ->type_name("PERCENT");
    CLI::Option* base = CliOptions::addNumber(
        set, "--backoff-base", o.backoffBase, "backoff after the first 429 (0.001 s to 24 h; default 60)");
    CLI::Option* cap = CliOptions::addNumber(
        set, "--backoff-cap", o.backoffCap, "longest backoff (0.001 s to 24 h; default 900)");
    CLI::Option* hold = CliOptions::addNumber(
        set, "--max-hold", o.maxHold, "a slot held longer is overdue (1 s to 7 days; default 600)");
    CLI::Option* noTokens = set->add_flag("--no-tokens", o.noTokens, "drop the token limit");
    CLI::Option* noParallel = set->add_flag("--no-parallel", o.noParallel, "drop the parallel limit");
    CLI::Option* noRequests = set->add_flag("--no-requests", o.noRequests, "drop the request limit");
    noRequests->excludes(requests);
    noTokens->excludes(tokens);
    noParallel->excludes(parallel);
    for (CLI::Option* perProvider : { parallel, noParallel, headroom, base, cap, hold })
        model->excludes(perProvider);

    CLI::App* show = command(limits, "show", "show the limits (of PROVIDER, or of all)", cmdLimitsShow);
    provider(show, "only this provider");
    CLI::App* exportCmd = command(limits, "export",
        "print the limits (of PROVIDER, or of all) as a document `limits import` reads", cmdLimitsExport);
    provider(exportCmd, "only this provider");
    CLI::App* importCmd = command(limits, "import",
        "set the limits of every provider in FILE (from `limits export`; - reads standard input)",
        cmdLimitsImport);
    importCmd->add_option("FILE", o.importFile, "the limits document, or - for standard input")->required();
    importCmd->add_flag("--replace", o.replace, "also remove the providers FILE does not name");
    CLI::App* remove
        = command(limits, "remove", "remove PROVIDER's limits, or only those of one model", cmdLimitsRemove);
    provider(remove, "the provider");
    CliOptions::addText(remove, "--model", o.model, "remove only this model's limits")->type_name("M");

    CLI::App* acquire
        = command(&app, "acquire", "wait for the quota of PROVIDER; exit 0 when admitted", cmdAcquire);
    request(acquire);
    CLI::Option* slot = acquire->add_flag(
        "--slot", o.slot, "also take a parallel slot, held until released or the caller dies");
    // Only a slot has a holder: --pid alone would be taken and ignored.
    CliOptions::addInteger(acquire, "--pid", o.pid, 1, INT32_MAX,
        "the process that holds the slot (default: the one that ran tollgate)")
        ->needs(slot);

    CLI::App* run = command(&app, "run",
        "run a command under the quota (tollgate run PROVIDER --caller NAME -- CMD ARGS...)", cmdRun);
    request(run);
    CliOptions::addInteger(run, "--rate-limited-exit", o.rateLimitedExit, 1, 255,
        "the command's exit code that means it got a 429 (reported for every caller)")
        ->type_name("CODE");

    CLI::App* r429
        = command(&app, "report-429", "report a 429: every caller backs off", [] { return cmdReport(true); });
    provider(r429, "the provider that answered 429");
    caller(r429, "who got it (required)");
    CliOptions::addText(r429, "--retry-after", o.retryAfter, "the Retry-After value: seconds or an HTTP date")
        ->type_name("SECONDS|DATE");
    CLI::App* ok = command(&app, "report-ok", "report a success: resets the count of consecutive 429s",
        [] { return cmdReport(false); });
    provider(ok, "the provider");
    caller(ok, "who succeeded (required)");
    CliOptions::addInteger(ok, "--fence", o.fence, 1, INT64_MAX,
        "end the call admitted with `acquire --slot` (its fence): the slot is freed too")
        ->type_name("N");
    CliOptions::addInteger(ok, "--tokens-used", o.tokensUsed, 0, INT64_MAX,
        "what the call really used (needs --fence): replaces acquire's --tokens estimate in the window")
        ->type_name("N");

    CLI::App* pause = command(&app, "pause", "pause PROVIDER (or all): callers wait in the queue",
        [] { return cmdSwitch(Switch::Pause); });
    provider(pause, "the provider (default: all)");
    CliOptions::addText(pause, "--reason", o.reason, "why, shown in status")->type_name("TEXT");
    CLI::App* resume
        = command(&app, "resume", "resume PROVIDER (or all)", [] { return cmdSwitch(Switch::Resume); });
    provider(resume, "the provider (default: all)");
    CLI::App* reset = command(&app, "reset-backoff", "clear PROVIDER's 429 backoff now",
        [] { return cmdSwitch(Switch::ResetBackoff); });
    provider(reset, "the provider");

    CLI::App* status = command(
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
    CLI::App* history = command(
        &app, "history", "admissions, waits, 429s, pauses and limit changes (reads only)", cmdHistory);
    CliOptions::addSeconds(history, "--since", o.since, "how far back (default 3600)");
    CliOptions::addText(history, "--provider", o.providerFilter, "only this provider")->type_name("P");

    CLI::App* stale
        = command(&app, "release-stale", "free slots of dead holders and waiters now", cmdReleaseStale);
    stale->add_flag("--overdue", o.overdue, "also slots held past the maximum hold time");
    CLI::App* release = command(&app, "release", "free one slot by its fence", cmdRelease);
    provider(release, "the provider");
    CliOptions::addInteger(
        release, "--fence", o.fence, 1, INT64_MAX, "the fence printed by acquire (required)");
}

} // namespace tollgate::cli
