// LimitsCommand: limits set, show, export, import and remove, and how limits read in words.

#include "limitscommand.h"

#include "exitcodes.h"
#include "quotaformat.h"
#include "quotasession.h"
#include "system/fd.h"

#include <cstdio>
#include <fcntl.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tollgate::cli {

namespace {

using nlohmann::json;

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
        out << " per " << QuotaFormat::seconds(l.windowMs);
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

int cmdLimitsShow(const QuotaContext& context)
{
    QuotaSession c("limits show", context.options().common);
    bool exists = false;
    if (auto stop = c.openExisting(exists))
        return *stop;
    const std::string& only = context.options().provider;
    if (!exists) {
        c.sayNoHome();
        if (!only.empty())
            return c.console().fail(
                Error::make(ErrorKind::Usage, "", "unknown provider '" + only + "': no limits set yet"));
        c.console().emit(json::array());
        return EXIT_OK;
    }
    auto view = c.peek(false);
    if (!view)
        return c.console().fail(view.error());
    const QuotaLimits& all = view->limits;
    if (!only.empty() && !all.find(only))
        return c.console().fail(Error::make(ErrorKind::Usage, "",
            "unknown provider '" + only + "'; known providers: " + all.knownProviders()));
    json list = json::array();
    for (const auto& [name, l] : all.providers()) {
        if (!only.empty() && name != only)
            continue;
        list.push_back(QuotaFormat::limitsJson(name, l));
        c.console().say(name + ": " + describeLimits(l) + "; backoff " + QuotaFormat::seconds(l.backoffBaseMs)
            + " doubling to " + QuotaFormat::seconds(l.backoffCapMs) + "; max hold "
            + QuotaFormat::seconds(l.maxHoldMs));
        for (const auto& [m, ml] : l.models)
            c.console().say("  model " + m + ": " + describeLimits(modelShown(l, ml)));
    }
    if (all.providers().empty())
        c.console().say(
            "no providers yet; add one with: tollgate limits set PROVIDER --requests N --window SECONDS");
    c.console().emit(list);
    return EXIT_OK;
}

// The limits of a home as a document another home can import: the limits.json format.
int cmdLimitsExport(const QuotaContext& context)
{
    QuotaSession c("limits export", context.options().common);
    bool exists = false;
    if (auto stop = c.openExisting(exists))
        return *stop;
    QuotaLimits out;
    const std::string& only = context.options().provider;
    if (exists) {
        auto view = c.peek(false);
        if (!view)
            return c.console().fail(view.error());
        if (!only.empty() && !view->limits.find(only))
            return c.console().fail(Error::make(ErrorKind::Usage, "",
                "unknown provider '" + only + "'; known providers: " + view->limits.knownProviders()));
        for (const auto& [name, l] : view->limits.providers()) {
            if (only.empty() || name == only)
                (void)out.set(name, l); // valid: read through the same checks
        }
    } else if (!only.empty()) {
        return c.console().fail(
            Error::make(ErrorKind::Usage, "", "unknown provider '" + only + "': no limits set yet"));
    }
    const std::string doc = out.toJson();
    if (context.options().common.json)
        c.console().emit(json::parse(doc, nullptr, false));
    else
        std::cout << doc << (doc.empty() || doc.back() != '\n' ? "\n" : "") << std::flush;
    if (out.providers().empty())
        c.console().warn("no limits to export (home " + c.home() + ")");
    return EXIT_OK;
}

constexpr std::size_t MAX_IMPORT_BYTES = 1 << 20;

// The text of `limits import FILE` (- for standard input), up to one byte past the limit so
// that a longer one is noticed.
Result<std::string> readImportText(const std::string& file)
{
    if (file == "-") {
        std::string in;
        char buf[65536];
        std::size_t n = 0;
        while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0 && in.size() <= MAX_IMPORT_BYTES)
            in.append(buf, n);
        return in;
    }
    // Never blocks: a FIFO or device named here is refused, not waited on.
    auto fd = Fd::openRegular(file, O_RDONLY);
    return fd ? fd->readAll(MAX_IMPORT_BYTES + 1) : Result<std::string>(fd.error());
}

// Limits from a document (`limits export` of another home, or limits.json): checked whole
// before anything changes, then set in one operation.
int cmdLimitsImport(const QuotaContext& context)
{
    const QuotaOptions& o = context.options();
    QuotaSession c("limits import", o.common);
    const std::string& file = o.importFile;
    Result<std::string> text = readImportText(file);
    if (!text)
        return c.console().fail(text.error());
    const std::string shown = file == "-" ? std::string("standard input") : file;
    if (text->size() > MAX_IMPORT_BYTES)
        return c.console().fail(
            Error::make(ErrorKind::Usage, shown, "more than 1 MiB: not a limits document"));
    auto incoming = QuotaLimits::fromJson(*text);
    if (!incoming)
        return c.console().fail(
            Error::make(ErrorKind::Usage, shown, "not a limits document: " + incoming.error().message));
    if (incoming->providers().empty() && o.replace)
        return c.console().fail(Error::make(ErrorKind::Usage, shown,
            "names no provider: with --replace that would remove every limit (use limits remove)"));
    if (auto stop = c.open())
        return *stop;
    auto changed = c.limiter().importLimits(*incoming, o.replace, QuotaSession::who());
    if (!changed)
        return c.console().fail(changed.error());
    json out;
    out["changed"] = *changed;
    out["providers"] = incoming->providers().size();
    if (changed->empty()) {
        c.console().say("nothing changed: the limits are already those of " + shown);
    } else {
        std::string list;
        for (const auto& name : *changed)
            list += (list.empty() ? "" : ", ") + name;
        c.console().say("imported from " + shown + ": " + list);
    }
    c.console().emit(out);
    return EXIT_OK;
}

int cmdLimitsRemove(const QuotaContext& context)
{
    const QuotaOptions& o = context.options();
    QuotaSession c("limits remove", o.common);
    if (auto stop = c.needProvider(o.provider))
        return *stop;
    bool missing = false;
    if (auto stop = c.openUnlessMissing(missing))
        return *stop;
    if (missing)
        return c.failUnknownOnMissingHome(o.provider);
    const std::string& provider = o.provider;
    const auto& model = o.model;
    json result;
    result["provider"] = provider;
    result["removed"] = true;
    if (!model) {
        if (auto r = c.limiter().removeLimits(provider, QuotaSession::who()); !r)
            return c.console().fail(r.error());
        c.console().say("removed provider " + provider);
        c.console().emit(result);
        return EXIT_OK;
    }
    auto all = c.limiter().limits();
    if (!all)
        return c.console().fail(all.error());
    const ProviderLimits* existing = all->find(provider);
    if (!existing || !existing->models.count(*model))
        return c.console().fail(Error::make(
            ErrorKind::Usage, "", "provider '" + provider + "' has no limits for model '" + *model + "'"));
    ProviderLimits l = *existing;
    l.models.erase(*model);
    if (auto r = c.limiter().setLimits(provider, l, QuotaSession::who()); !r)
        return c.console().fail(r.error());
    c.console().say("removed model " + *model + " from " + provider);
    result["model"] = *model;
    c.console().emit(result);
    return EXIT_OK;
}

// limits set's values, each checked by QuotaLimits::check (in ms, percent or a count).
struct CheckedLimits
{
    std::optional<std::int64_t> requests, tokens, window, parallel, headroom, backoffBase, backoffCap,
        maxHold;
};

// Every value is checked before anything is opened or created, in this order: the first bad
// one is the one named.
StopCode checkLimitValues(QuotaSession& c, const QuotaOptions& o, CheckedLimits& out)
{
    struct Given
    {
        const std::optional<double>& value;
        LimitField field;
        const char* name;
        std::optional<std::int64_t>& checked;
    };
    const Given given[] = { { o.requests, LimitField::Requests, "--requests", out.requests },
        { o.limitTokens, LimitField::Tokens, "--tokens", out.tokens },
        { o.window, LimitField::WindowSeconds, "--window", out.window },
        { o.parallel, LimitField::Parallel, "--parallel", out.parallel },
        { o.headroom, LimitField::HeadroomPercent, "--headroom", out.headroom },
        { o.backoffBase, LimitField::BackoffBaseSeconds, "--backoff-base", out.backoffBase },
        { o.backoffCap, LimitField::BackoffCapSeconds, "--backoff-cap", out.backoffCap },
        { o.maxHold, LimitField::MaxHoldSeconds, "--max-hold", out.maxHold } };
    for (const Given& g : given) {
        if (!g.value)
            continue;
        auto v = QuotaLimits::check(g.field, *g.value, g.name);
        if (!v)
            return c.console().usage(v.error().message);
        g.checked = *v;
    }
    return std::nullopt;
}

// limits set --model M: the model's requests, tokens and window change.
StopCode applyModelLimits(QuotaSession& c, const QuotaOptions& o, const CheckedLimits& v, ProviderLimits& l)
{
    ModelLimits ml = l.models.count(*o.model) ? l.models[*o.model]
                                              : ModelLimits { std::nullopt, std::nullopt, l.windowMs };
    if (v.requests)
        ml.requests = v.requests;
    if (v.tokens)
        ml.tokens = v.tokens;
    if (v.window)
        ml.windowMs = *v.window;
    if (o.noTokens)
        ml.tokens.reset();
    if (o.noRequests)
        ml.requests.reset();
    if (!ml.requests && !ml.tokens)
        return c.console().usage("a model limit needs --requests or --tokens");
    l.models[*o.model] = ml;
    return std::nullopt;
}

// limits set without --model: the provider's own limits change.
StopCode applyProviderLimits(
    QuotaSession& c, const QuotaOptions& o, const CheckedLimits& v, ProviderLimits& l)
{
    if (v.requests)
        l.requests = v.requests;
    if (v.tokens)
        l.tokens = v.tokens;
    if (v.parallel)
        l.parallel = v.parallel;
    if (v.headroom)
        l.headroomPercent = *v.headroom;
    if (v.window)
        l.windowMs = *v.window;
    if (v.backoffBase)
        l.backoffBaseMs = *v.backoffBase;
    if (v.backoffCap)
        l.backoffCapMs = *v.backoffCap;
    if (v.maxHold)
        l.maxHoldMs = *v.maxHold;
    if (o.noTokens)
        l.tokens.reset();
    if (o.noParallel)
        l.parallel.reset();
    if (o.noRequests)
        l.requests.reset();
    if (!l.requests && !l.tokens && !l.parallel)
        return c.console().usage("give at least one of --requests, --tokens or --parallel");
    return std::nullopt;
}

int cmdLimitsSet(const QuotaContext& context)
{
    const QuotaOptions& o = context.options();
    QuotaSession c("limits set", o.common);
    if (auto stop = c.needProvider(o.provider))
        return *stop;
    if (auto r = QuotaLimits::validateName("provider", o.provider); !r)
        return c.console().fail(r.error());
    if (o.model) {
        if (auto r = QuotaLimits::validateName("model", *o.model); !r)
            return c.console().fail(r.error());
    }
    CheckedLimits values;
    if (auto stop = checkLimitValues(c, o, values))
        return *stop;
    if (auto stop = c.open())
        return *stop;
    auto all = c.limiter().limits();
    if (!all)
        return c.console().fail(all.error());
    ProviderLimits l = all->find(o.provider) ? *all->find(o.provider) : ProviderLimits {};
    if (auto stop = o.model ? applyModelLimits(c, o, values, l) : applyProviderLimits(c, o, values, l))
        return *stop;
    if (auto r = c.limiter().setLimits(o.provider, l, QuotaSession::who()); !r)
        return c.console().fail(r.error());
    if (o.model)
        c.console().say(
            o.provider + " model " + *o.model + ": " + describeLimits(modelShown(l, l.models[*o.model])));
    else
        c.console().say(o.provider + ": " + describeLimits(l));
    c.console().emit(QuotaFormat::limitsJson(o.provider, l));
    return EXIT_OK;
}

void addSet(CLI::App* limits, QuotaContext& context)
{
    QuotaOptions& o = context.options();
    CLI::App* set = context.addCommand(
        limits, "set", "set (or change) the limits of PROVIDER, or of one of its models", cmdLimitsSet);
    context.addProvider(set, "the provider (letters, digits and . _ - : @)");
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
}

} // namespace

void LimitsCommand::addTo(CLI::App& app, QuotaContext& context)
{
    QuotaOptions& o = context.options();
    CLI::App* limits = app.add_subcommand("limits", "set, show, remove, export or import providers' limits");
    limits->require_subcommand(0, 1);
    CliOptions::addCommon(limits, o.common);

    addSet(limits, context);
    CLI::App* show
        = context.addCommand(limits, "show", "show the limits (of PROVIDER, or of all)", cmdLimitsShow);
    context.addProvider(show, "only this provider");
    CLI::App* exportCmd = context.addCommand(limits, "export",
        "print the limits (of PROVIDER, or of all) as a document `limits import` reads", cmdLimitsExport);
    context.addProvider(exportCmd, "only this provider");
    CLI::App* importCmd = context.addCommand(limits, "import",
        "set the limits of every provider in FILE (from `limits export`; - reads standard input)",
        cmdLimitsImport);
    importCmd->add_option("FILE", o.importFile, "the limits document, or - for standard input")->required();
    importCmd->add_flag("--replace", o.replace, "also remove the providers FILE does not name");
    CLI::App* remove = context.addCommand(
        limits, "remove", "remove PROVIDER's limits, or only those of one model", cmdLimitsRemove);
    context.addProvider(remove, "the provider");
    CliOptions::addText(remove, "--model", o.model, "remove only this model's limits")->type_name("M");
}

} // namespace tollgate::cli
