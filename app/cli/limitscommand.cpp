// LimitsCommand: limits set, show, export, import and remove, and how limits read in words.

#include "limitscommand.h"

#include "exitcodes.h"
#include "quotaformat.h"
#include "quotasession.h"
#include "quota/limitlearning.h"
#include "system/fd.h"

#include <algorithm>

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

// "1000 input tokens, 500 output tokens" of the metrics a budget splits (effective values).
std::string splitAmounts(const ProviderLimits& l, const Budget& b)
{
    std::string out;
    if (b.inputTokens)
        out += std::to_string(l.effective(*b.inputTokens)) + " input tokens";
    if (b.outputTokens)
        out += (out.empty() ? "" : ", ") + std::to_string(l.effective(*b.outputTokens)) + " output tokens";
    return out;
}

std::string budgetWords(const ProviderLimits& l, const Budget& b)
{
    const std::optional<std::int64_t> req
        = b.requests ? std::optional(l.effective(*b.requests)) : std::nullopt;
    const std::optional<std::int64_t> tok = b.tokens ? std::optional(l.effective(*b.tokens)) : std::nullopt;
    std::string out = amounts(req, tok);
    const std::string split = splitAmounts(l, b);
    return out.empty() ? split : (split.empty() ? out : out + ", " + split);
}

std::string describeLimits(const ProviderLimits& l)
{
    std::ostringstream out;
    const Budget window = l.perWindow();
    out << budgetWords(l, window);
    if (window.any())
        out << " per " << QuotaFormat::seconds(l.windowMs);
    if (l.perDay.any())
        out << (window.any() ? ", " : "") << budgetWords(l, l.perDay) << " per day"
            << (l.dayReset.rolling() ? "" : " (resets " + l.dayReset.text() + ")");
    if (l.parallel)
        out << ((window.any() || l.perDay.any()) ? ", " : "") << *l.parallel << " parallel";
    if (!window.any() && !l.perDay.any() && !l.parallel)
        out << "no limits";
    if (!l.learned.empty()) {
        out << " (from the provider:";
        for (const auto& key : l.learned)
            out << " " << key;
        out << ")";
    }
    if (l.learn)
        out << ", learning the provider's limits";
    if (l.headroomPercent != 100 && (window.any() || l.perDay.any())) {
        ProviderLimits given = l;
        given.headroomPercent = 100;
        const std::string window = budgetWords(given, l.perWindow());
        const std::string day = budgetWords(given, l.perDay);
        out << " (headroom " << l.headroomPercent << "% of " << window
            << (window.empty() || day.empty() ? "" : "; ") << (day.empty() ? "" : day + " per day") << ")";
    }
    return out.str();
}

ProviderLimits modelShown(const ProviderLimits& l, const ModelLimits& ml)
{
    ProviderLimits shown;
    shown.requests = ml.requests;
    shown.tokens = ml.tokens;
    shown.inputTokens = ml.inputTokens;
    shown.outputTokens = ml.outputTokens;
    shown.perDay = ml.perDay;
    shown.dayReset = l.dayReset;
    shown.windowMs = ml.windowMs;
    shown.headroomPercent = l.headroomPercent;
    shown.learned = ml.learned;
    return shown;
}

// "class opus (claude-opus-4*, claude-opus-5*)" or "model gpt-4o".
std::string scopeName(const std::string& name, const ModelLimits& ml)
{
    if (ml.match.empty())
        return "model " + name;
    std::string patterns;
    for (const auto& p : ml.match)
        patterns += (patterns.empty() ? "" : ", ") + p;
    return "class " + name + " (" + patterns + ")";
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
            c.console().say("  " + scopeName(m, ml) + ": " + describeLimits(modelShown(l, ml)));
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
    auto changed = c.limiter().importLimits(*incoming, o.replace, QuotaSession::who(), o.fresh);
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
        maxHold, inputTokens, outputTokens;
    Budget perDay;
    std::optional<DayReset> dayReset;
    std::vector<std::string> patterns;
};

// --models 'claude-opus-4*,claude-opus-5*': the patterns, as given (checked with the limits).
std::vector<std::string> patternList(const std::string& text)
{
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at <= text.size()) {
        const auto comma = text.find(',', at);
        std::string one = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        while (!one.empty() && one.front() == ' ')
            one.erase(0, 1);
        while (!one.empty() && one.back() == ' ')
            one.pop_back();
        out.push_back(one);
        if (comma == std::string::npos)
            break;
        at = comma + 1;
    }
    return out;
}

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
        { o.maxHold, LimitField::MaxHoldSeconds, "--max-hold", out.maxHold },
        { o.inputTokens, LimitField::InputTokens, "--input-tokens", out.inputTokens },
        { o.outputTokens, LimitField::OutputTokens, "--output-tokens", out.outputTokens },
        { o.requestsPerDay, LimitField::Requests, "--requests-per-day", out.perDay.requests },
        { o.tokensPerDay, LimitField::Tokens, "--tokens-per-day", out.perDay.tokens },
        { o.inputTokensPerDay, LimitField::InputTokens, "--input-tokens-per-day", out.perDay.inputTokens },
        { o.outputTokensPerDay, LimitField::OutputTokens, "--output-tokens-per-day",
            out.perDay.outputTokens } };
    for (const Given& g : given) {
        if (!g.value)
            continue;
        auto v = QuotaLimits::check(g.field, *g.value, g.name);
        if (!v)
            return c.console().usage(v.error().message);
        g.checked = *v;
    }
    if (o.dayResets) {
        auto reset = DayReset::parse(*o.dayResets);
        if (!reset)
            return c.console().usage("--day-resets: " + reset.error().message);
        out.dayReset = *reset;
    }
    if (o.classModels)
        out.patterns = patternList(*o.classModels);
    return std::nullopt;
}

// The metrics both a provider and a class have: per window and per day, set or dropped.
template <class Limits> void applyBudgets(const QuotaOptions& o, const CheckedLimits& v, Limits& l)
{
    if (v.requests)
        l.requests = v.requests;
    if (v.tokens)
        l.tokens = v.tokens;
    if (v.inputTokens)
        l.inputTokens = v.inputTokens;
    if (v.outputTokens)
        l.outputTokens = v.outputTokens;
    if (v.window)
        l.windowMs = *v.window;
    if (o.noTokens)
        l.tokens.reset();
    if (o.noRequests)
        l.requests.reset();
    if (o.noInputTokens)
        l.inputTokens.reset();
    if (o.noOutputTokens)
        l.outputTokens.reset();
    if (o.noPerDay)
        l.perDay = {};
    for (auto member : { &Budget::requests, &Budget::tokens, &Budget::inputTokens, &Budget::outputTokens }) {
        if (v.perDay.*member)
            l.perDay.*member = v.perDay.*member;
    }
    // A limit the user gives or drops is the user's from now on: no longer the provider's.
    const std::pair<const char*, bool> touched[] = { { "requests", v.requests || o.noRequests },
        { "tokens", v.tokens || o.noTokens }, { "input_tokens", v.inputTokens || o.noInputTokens },
        { "output_tokens", v.outputTokens || o.noOutputTokens } };
    for (const auto& [key, mine] : touched) {
        if (mine)
            std::erase(l.learned, std::string(key));
    }
}

// limits set --model M (or --class C [--models PATTERNS]): that class's budgets change.
StopCode applyModelLimits(QuotaSession& c, const QuotaOptions& o, const CheckedLimits& v, ProviderLimits& l)
{
    const std::string& name = o.model ? *o.model : *o.modelClass;
    ModelLimits ml
        = l.models.count(name) ? l.models[name] : ModelLimits { std::nullopt, std::nullopt, l.windowMs };
    applyBudgets(o, v, ml);
    if (!v.patterns.empty())
        ml.match = v.patterns;
    if (!ml.perWindow().any() && !ml.perDay.any())
        return c.console().usage(std::string(o.model ? "a model" : "a class")
            + " limit needs --requests, --tokens, --input-tokens, --output-tokens or a per-day limit");
    l.models[name] = ml;
    return std::nullopt;
}

// limits set without --model: the provider's own limits change.
StopCode applyProviderLimits(
    QuotaSession& c, const QuotaOptions& o, const CheckedLimits& v, ProviderLimits& l)
{
    applyBudgets(o, v, l);
    if (v.dayReset)
        l.dayReset = *v.dayReset;
    if (v.parallel)
        l.parallel = v.parallel;
    if (v.headroom)
        l.headroomPercent = *v.headroom;
    if (v.backoffBase)
        l.backoffBaseMs = *v.backoffBase;
    if (v.backoffCap)
        l.backoffCapMs = *v.backoffCap;
    if (v.maxHold)
        l.maxHoldMs = *v.maxHold;
    if (o.noParallel)
        l.parallel.reset();
    if (o.learn)
        l.learn = true;
    if (o.noLearn) {
        // What was learned stays, as the user's: nothing the key relies on disappears.
        l.learn = false;
        l.learned.clear();
        for (auto& [name, ml] : l.models)
            ml.learned.clear();
    }
    if (!l.perWindow().any() && !l.perDay.any() && !l.parallel && !l.learn)
        return c.console().usage(
            "give at least one of --requests, --tokens, --input-tokens, --output-tokens, "
            "a per-day limit, --parallel or --learn");
    return std::nullopt;
}

// What --learn will and will not change, said once when it is turned on: the limits the user
// set stay theirs (flagged when the provider's differ), the unset ones follow the provider's.
std::string learningNote(const ProviderLimits& l)
{
    std::string mine;
    const std::pair<const char*, const std::optional<std::int64_t>*> metrics[] = { { "requests", &l.requests },
        { "tokens", &l.tokens }, { "input_tokens", &l.inputTokens }, { "output_tokens", &l.outputTokens } };
    for (const auto& [key, value] : metrics) {
        if (value->has_value() && !std::binary_search(l.learned.begin(), l.learned.end(), std::string(key)))
            mine += (mine.empty() ? "" : ", ") + std::string(key);
    }
    std::string out = "learning: the limits you have not set follow those the provider's answers state (through "
                      "tollgate proxy), each change a history event";
    if (!mine.empty())
        out += "; " + mine + (mine.find(',') == std::string::npos ? " is" : " are")
            + " yours and will not follow (a difference is flagged; tollgate limits adopt takes the provider's)";
    return out;
}

// Learning turned on takes at once what the provider's answers already stated (the proxy tells
// the store only when the figures change, or once a minute). Best effort: the limits are set
// already, and the proxy learns with its next report anyway.
void learnWhatWasStated(QuotaSession& c, const std::string& provider)
{
    auto snap = c.limiter().snapshot();
    if (!snap)
        return;
    const ProviderLimits* l = snap->limits.find(provider);
    const ReportedLimits reported = LimitLearning::keptIn(snap->state.provider(provider));
    if (!l || !reported.any())
        return;
    const auto lesson = LimitLearning::learn(*l, reported);
    if (!lesson || lesson->changes.empty())
        return;
    const std::string what = lesson->describe("learned from what the provider last stated");
    auto set = c.limiter().setLimitsIf(provider, *l, lesson->limits, QuotaSession::who(), nullptr, what);
    if (set && *set)
        c.console().say(provider + ": " + what);
}

int cmdLimitsSet(const QuotaContext& context)
{
    const QuotaOptions& o = context.options();
    QuotaSession c("limits set", o.common);
    if (auto stop = c.needProvider(o.provider))
        return *stop;
    if (auto r = QuotaLimits::validateName("provider", o.provider); !r)
        return c.console().fail(r.error());
    if (o.model || o.modelClass) {
        if (auto r
            = QuotaLimits::validateName(o.model ? "model" : "class", o.model ? *o.model : *o.modelClass);
            !r)
            return c.console().fail(r.error());
    }
    if (o.classModels && !o.modelClass)
        return c.console().usage("--models names the members of a class: give it with --class NAME");
    CheckedLimits values;
    if (auto stop = checkLimitValues(c, o, values))
        return *stop;
    if (auto stop = c.open())
        return *stop;
    auto all = c.limiter().limits();
    if (!all)
        return c.console().fail(all.error());
    ProviderLimits l = all->find(o.provider) ? *all->find(o.provider) : ProviderLimits {};
    const bool perClass = o.model || o.modelClass;
    if (auto stop = perClass ? applyModelLimits(c, o, values, l) : applyProviderLimits(c, o, values, l))
        return *stop;
    if (auto r = c.limiter().setLimits(o.provider, l, QuotaSession::who()); !r)
        return c.console().fail(r.error());
    if (o.learn) {
        c.console().say(learningNote(l));
        learnWhatWasStated(c, o.provider);
    }
    if (perClass) {
        const std::string& name = o.model ? *o.model : *o.modelClass;
        c.console().say(o.provider + " " + scopeName(name, l.models[name]) + ": "
            + describeLimits(modelShown(l, l.models[name])));
    } else
        c.console().say(o.provider + ": " + describeLimits(l));
    c.console().emit(QuotaFormat::limitsJson(o.provider, l));
    return EXIT_OK;
}

// limits adopt P: the provider's own limits, as its answers last stated them, become the
// limits of their scope — the user's too (the dashboard's "use the provider's limits").
int cmdLimitsAdopt(const QuotaContext& context)
{
    const QuotaOptions& o = context.options();
    QuotaSession c("limits adopt", o.common);
    if (auto stop = c.needProvider(o.provider))
        return *stop;
    if (auto stop = c.open())
        return *stop;
    auto snap = c.limiter().snapshot();
    if (!snap)
        return c.console().fail(snap.error());
    const ProviderLimits* l = snap->limits.find(o.provider);
    if (!l)
        return c.console().fail(Error::make(ErrorKind::Usage, "",
            "unknown provider '" + o.provider + "'; known providers: " + snap->limits.knownProviders()));
    const ReportedLimits reported = LimitLearning::keptIn(snap->state.provider(o.provider));
    if (!reported.any())
        return c.console().fail(Error::make(ErrorKind::Usage, "",
            "provider '" + o.provider
                + "' has stated no limits yet: they are read from its answers' headers by tollgate proxy"));
    const auto lesson = LimitLearning::adopt(*l, reported);
    if (!lesson || lesson->changes.empty()) {
        c.console().say(o.provider + ": the limits are already the provider's");
        c.console().emit(QuotaFormat::limitsJson(o.provider, *l));
        return EXIT_OK;
    }
    const std::string what = lesson->describe("adopted the provider's limits");
    auto set = c.limiter().setLimitsIf(o.provider, *l, lesson->limits, QuotaSession::who(), nullptr, what);
    if (!set)
        return c.console().fail(set.error());
    if (!*set)
        return c.console().fail(Error::make(ErrorKind::Busy, "",
            "the limits of '" + o.provider + "' changed while they were read; nothing was set: run it again"));
    c.console().say(o.provider + ": " + what);
    c.console().emit(QuotaFormat::limitsJson(o.provider, lesson->limits));
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
    CLI::Option* input = CliOptions::addNumber(set, "--input-tokens", o.inputTokens,
        "input tokens per window, as the provider counts them (1 to 2^40)")
                             ->type_name("N");
    CLI::Option* output = CliOptions::addNumber(
        set, "--output-tokens", o.outputTokens, "output tokens per window (1 to 2^40)")
                              ->type_name("N");
    CliOptions::addNumber(set, "--requests-per-day", o.requestsPerDay, "requests per day (1 to 2^40)")
        ->type_name("N");
    CliOptions::addNumber(set, "--tokens-per-day", o.tokensPerDay, "tokens per day (1 to 2^40)")
        ->type_name("N");
    CliOptions::addNumber(
        set, "--input-tokens-per-day", o.inputTokensPerDay, "input tokens per day (1 to 2^40)")
        ->type_name("N");
    CliOptions::addNumber(
        set, "--output-tokens-per-day", o.outputTokensPerDay, "output tokens per day (1 to 2^40)")
        ->type_name("N");
    CLI::Option* dayResets = CliOptions::addText(set, "--day-resets", o.dayResets,
        "when a day starts: rolling (the last 24 h, default), HH:MM (UTC) or HH:MM@Area/City")
                                 ->type_name("WHEN");
    CLI::Option* modelClass = CliOptions::addText(
        set, "--class", o.modelClass, "set the limits of this model class (a pool of model names)")
                                  ->type_name("NAME");
    CLI::Option* classModels = CliOptions::addText(set, "--models", o.classModels,
        "with --class: the model names it pools, as patterns ('claude-opus-4*,claude-opus-5*')")
                                   ->type_name("PATTERNS");
    CLI::Option* noTokens = set->add_flag("--no-tokens", o.noTokens, "drop the token limit");
    CLI::Option* noParallel = set->add_flag("--no-parallel", o.noParallel, "drop the parallel limit");
    CLI::Option* noRequests = set->add_flag("--no-requests", o.noRequests, "drop the request limit");
    CLI::Option* noInput = set->add_flag("--no-input-tokens", o.noInputTokens, "drop the input token limit");
    CLI::Option* noOutput
        = set->add_flag("--no-output-tokens", o.noOutputTokens, "drop the output token limit");
    set->add_flag(
        "--no-per-day", o.noPerDay, "drop every per-day limit (those given again with it are kept)");
    CLI::Option* learn = set->add_flag("--learn", o.learn,
        "limits you have not set follow those the provider's answers state (through tollgate proxy)");
    CLI::Option* noLearn = set->add_flag(
        "--no-learn", o.noLearn, "stop following the provider's limits (what was learned stays, as yours)");
    noLearn->excludes(learn);
    noRequests->excludes(requests);
    noTokens->excludes(tokens);
    noParallel->excludes(parallel);
    noInput->excludes(input);
    noOutput->excludes(output);
    model->excludes(modelClass);
    classModels->needs(modelClass);
    for (CLI::Option* perProvider : { parallel, noParallel, headroom, base, cap, hold, dayResets, learn, noLearn }) {
        model->excludes(perProvider);
        modelClass->excludes(perProvider);
    }
}

} // namespace

void LimitsCommand::addTo(CLI::App& app, QuotaContext& context)
{
    QuotaOptions& o = context.options();
    CLI::App* limits = app.add_subcommand("limits", "set, show, remove, export or import providers' limits");
    limits->require_subcommand(0, 1);
    CliOptions::addCommon(limits, o.common);

    addSet(limits, context);
    CLI::App* adopt = context.addCommand(limits, "adopt",
        "take the limits PROVIDER's answers last stated (through tollgate proxy) as its limits, yours too",
        cmdLimitsAdopt);
    context.addProvider(adopt, "the provider");
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
    importCmd->add_flag("--fresh", o.fresh,
        "a new home whose quota is used nowhere else: providers new to it start empty, not "
        "conservatively (windows full, slots held) as after a loss");
    CLI::App* remove = context.addCommand(
        limits, "remove", "remove PROVIDER's limits, or only those of one model", cmdLimitsRemove);
    context.addProvider(remove, "the provider");
    CliOptions::addText(remove, "--model", o.model, "remove only this model's limits")->type_name("M");
}

} // namespace tollgate::cli
