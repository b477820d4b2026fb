// AdmitCommand: acquire and run (a request's options, the wait, the command run under a
// slot, its Retry-After file) and report-429 / report-ok.

#include "admitcommand.h"

#include "childrunner.h"
#include "clioptions.h"
#include "exitcodes.h"
#include "quota/retryafter.h"
#include "quotaformat.h"
#include "quotasession.h"
#include "retryafterfile.h"
#include "system/fd.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace tollgate::cli {

namespace {

using nlohmann::json;

constexpr std::chrono::milliseconds MIN_REDIS_OP { 500 };
constexpr std::int64_t MAX_AMOUNT = std::int64_t(1) << 40;

WallTime deadlineFrom(const Clock& clock, double seconds)
{
    return clock.now()
        + std::chrono::duration_cast<WallTime::duration>(std::chrono::duration<double>(seconds));
}

// acquire and run share their request options.
StopCode parseRequest(QuotaSession& c, const QuotaOptions& o, AdmitRequest& request, double& timeoutSeconds)
{
    if (auto stop = c.needProvider(o.provider))
        return *stop;
    request.provider = o.provider;
    if (!o.caller || o.caller->empty())
        return c.console().usage("--caller NAME is required (it names you in status and history)");
    request.caller = *o.caller;
    request.model = o.model.value_or("");
    if (!request.model.empty()) {
        if (auto r = QuotaLimits::validateName("model", request.model); !r)
            return c.console().fail(r.error());
    }
    request.tokens = o.tokens.value_or(0);
    if (o.askInputTokens || o.askOutputTokens) {
        // Stated by the caller: a fact, refused at once if it can never fit a limit.
        request.inputTokens = o.askInputTokens.value_or(0);
        request.outputTokens = o.askOutputTokens.value_or(0);
        request.tokens = request.inputTokens + request.outputTokens;
    }
    timeoutSeconds
        = std::min(o.timeout.value_or(CliOptions::DEFAULT_TIMEOUT_SECONDS), CliOptions::MAX_TIMEOUT_SECONDS);
    // A Redis home that does not answer fails the command within its --timeout: each
    // operation gets at most that long (but at least MIN_REDIS_OP, one round trip's room even
    // for a try, and at most the default).
    const auto wanted
        = std::chrono::milliseconds(static_cast<std::int64_t>(std::min(timeoutSeconds, 3600.0) * 1000.0));
    c.setRedisTimeout(std::clamp(wanted, MIN_REDIS_OP, RedisConnection::DEFAULT_TIMEOUT));
    return std::nullopt;
}

// A --model the provider has no limits for is counted against the provider only: say so.
void warnUnknownModel(QuotaSession& c, const AdmitRequest& request, double timeoutSeconds)
{
    if (request.model.empty())
        return;
    // Within --timeout, as the acquire that follows (the store's floor lets a try wait out a
    // transaction in progress).
    StoreWait wait;
    wait.deadline = std::chrono::steady_clock::now()
        + std::chrono::milliseconds(QuotaFormat::toMs(std::min(timeoutSeconds, 3600.0)));
    auto all = c.limiter().limits(wait);
    if (!all)
        return; // the acquire that follows reports it
    const ProviderLimits* l = all->find(request.provider);
    if (l && l->classesOf(request.model).empty())
        c.console().warn("provider " + request.provider + " has no limits for model " + request.model
            + "; only the provider's limits apply (set some with: tollgate limits set " + request.provider
            + " --model " + request.model + " --requests N)");
}

int reportRefusal(QuotaSession& c, const Error& e)
{
    if (e.kind != ErrorKind::Timeout || !e.path.empty())
        return c.console().fail(e);
    if (ChildRunner::interrupted().load())
        return c.console().fail(
            Error::make(ErrorKind::Timeout, "", "interrupted while waiting; left the queue"),
            128 + ChildRunner::interruptSignal());
    const QuotaLimiter::Refusal& refusal = c.limiter().lastRefusal();
    if (refusal.reason == WaitReason::None)
        return c.console().fail(e, EXIT_REFUSED);
    // Refused at the deadline, or before it (the earliest admission lies beyond it, or a
    // pause). The message names the time; --json carries it too (retry_at_ms, Unix ms; null:
    // no time ends the wait), so a script can fall back to another provider or come back then.
    if (!c.console().quiet())
        std::cerr << "tollgate: " << Console::printable(e.message) << '\n';
    json j;
    j["error"] = e.message;
    j["code"] = EXIT_REFUSED;
    j["kind"] = errorKindName(e.kind);
    j["path"] = "";
    j["reason"] = waitReasonName(refusal.reason);
    j["retry_at_ms"] = refusal.earliestMs ? json(*refusal.earliestMs) : json(nullptr);
    j["paused"] = refusal.paused;
    c.console().emit(j);
    return EXIT_REFUSED;
}

// acquire's and run's wait, once the request is complete: opens the home, warns of a model
// without limits, and waits for the admission until --timeout (an interrupt leaves the queue).
// A refusal is reported here, and its exit code returned.
StopCode waitForAdmission(QuotaSession& c, const AdmitRequest& request, double timeoutSeconds, Permit& permit)
{
    // A home that does not exist has no limits: the provider is unknown there, answered as on
    // an empty home, and nothing is created for a typo.
    bool missing = false;
    if (auto stop = c.openUnlessMissing(missing))
        return stop;
    if (missing)
        return c.failUnknownOnMissingHome(request.provider);
    warnUnknownModel(c, request, timeoutSeconds);
    ChildRunner::installSignalHandlers();
    auto admitted
        = c.limiter().acquire(request, deadlineFrom(c.clock(), timeoutSeconds), &ChildRunner::interrupted());
    if (!admitted)
        return reportRefusal(c, admitted.error());
    permit = std::move(*admitted);
    return std::nullopt;
}

int cmdAcquire(const QuotaContext& context)
{
    const QuotaOptions& o = context.options();
    QuotaSession c("acquire", o.common);
    AdmitRequest request;
    double timeoutSeconds = CliOptions::DEFAULT_TIMEOUT_SECONDS;
    if (auto stop = parseRequest(c, o, request, timeoutSeconds))
        return *stop;
    // A slot taken by `acquire` belongs to the calling script: reclaimed when it dies.
    request.wantsSlot = o.slot;
    // A holder that does not run here would have its slot reclaimed by the next command, after
    // spending a request: a mistyped --pid is refused before anything is spent.
    if (o.pid && !ProcessProbe().exists(*o.pid))
        return c.console().usage("--pid " + std::to_string(*o.pid)
            + ": no such process here (its slot would be reclaimed at once); give the pid of the "
              "process that holds the slot");
    request.pid = o.pid.value_or(o.slot ? ProcessProbe::callerPid() : ProcessProbe::parentPid());
    Permit permit;
    if (auto stop = waitForAdmission(c, request, timeoutSeconds, permit))
        return *stop;
    const bool slot = permit.holdsSlot();
    permit.detach();
    c.console().say("admitted provider=" + request.provider + " fence=" + std::to_string(permit.fence())
        + " waited_ms=" + std::to_string(permit.waitedMs()) + (slot ? " slot=held" : ""));
    json j;
    j["admitted"] = true;
    j["provider"] = request.provider;
    j["caller"] = QuotaLimiter::sanitizeCaller(request.caller);
    j["fence"] = permit.fence();
    j["waited_ms"] = permit.waitedMs();
    j["slot"] = slot;
    c.console().emit(j);
    return EXIT_OK;
}

// RetryAfter bounds every value to 24 h: one longer is honoured for 24 h, and said so once.
void warnIfClamped(QuotaSession& c, std::string_view value, const RetryAfter::Delay& delay)
{
    if (!delay.clamped)
        return;
    constexpr std::size_t SHOWN = 80;
    const std::string shown
        = value.size() > SHOWN ? std::string(value.substr(0, SHOWN)) + "..." : std::string(value);
    c.console().warn("Retry-After '" + shown + "' asks for more than 24 h; backing off 24 h (the maximum)");
}

// What the command wrote into $TOLLGATE_RETRY_AFTER_FILE. The command may have replaced the
// file with anything: opened without following a link and without blocking, and only read
// when it is a regular file, so a FIFO or a device cannot hang or feed us.
std::string readRetryAfterFile(QuotaSession& c, const std::string& path)
{
    auto fd = Fd::openRegular(path, O_RDONLY);
    if (!fd) {
        if (fd.error().sysErrno != ENOENT)
            c.console().warn("ignoring TOLLGATE_RETRY_AFTER_FILE: " + fd.error().describe());
        return "";
    }
    auto text = fd->readAll(256);
    if (!text) {
        c.console().warn("ignoring TOLLGATE_RETRY_AFTER_FILE: " + text.error().describe());
        return "";
    }
    return *text;
}

// Runs the admitted command in its keeper, renewing the slot's lease while it runs, and gives
// the slot back after. Returns the command's exit code.
//
// The lease is renewed every third of it; a renewal that fails (the store did not answer: a
// stalled or restarting Redis) is tried again every sixth, at most every second, so that the
// slot's lease is renewed within moments of the store coming back (the script discounts the
// stall, but only down to a third of the lease: see redisquota.lua, "Stalls"). A slot found gone
// is renewed on too: after a lost state the renewal takes it back (QuotaPolicy::reestablish).
int runAdmitted(QuotaSession& c, ChildRunner::Keeper& keeper, const AdmitRequest& request, Permit& permit,
    const std::string& retryPath, std::chrono::milliseconds lease, bool zeroIsSuccess)
{
    using Steady = std::chrono::steady_clock;
    const auto every = lease / 3;
    const auto tick
        = std::max(std::chrono::milliseconds(10), std::min(std::chrono::milliseconds(1000), lease / 6));
    auto lastTry = Steady::now();
    bool failing = false;
    const int code = ChildRunner::start(
        keeper,
        { { "TOLLGATE_PROVIDER", request.provider },
            { "TOLLGATE_CALLER", QuotaLimiter::sanitizeCaller(request.caller) },
            { "TOLLGATE_MODEL", request.model }, { "TOLLGATE_FENCE", std::to_string(permit.fence()) },
            { "TOLLGATE_HOME", c.home() }, { "TOLLGATE_RETRY_AFTER_FILE", retryPath } },
        [&, warned = false, lost = false]() mutable {
            const auto now = Steady::now();
            if (now - lastTry < (failing ? tick : every))
                return;
            lastTry = now;
            auto held = permit.renew();
            failing = !held;
            if (!held && !warned)
                c.console().warn("could not renew the slot's lease: " + held.error().describe());
            else if (held && !*held && !warned)
                c.console().warn("the slot (fence " + std::to_string(permit.fence())
                    + ") was taken away (released by hand or reclaimed); the command runs on without it");
            else if (held && *held && lost)
                c.console().warn("the slot (fence " + std::to_string(permit.fence())
                    + ") is held again (taken back after the store lost it)");
            warned = warned || !held || !*held;
            lost = held && !*held ? true : (held ? false : lost);
        },
        tick);
    // A success ends the admission in one store operation, the slot given back and the success
    // recorded together (QuotaBackend::finishAdmission): one call fewer per run on a shared
    // store. Anything else gives the slot back, and recordRunOutcome reports what it was.
    if (code == 0 && zeroIsSuccess) {
        if (auto r = permit.finish(-1, true); !r)
            c.console().warn("could not give the slot back and record the success: " + r.error().describe());
    } else if (auto r = permit.release(); !r) {
        c.console().warn("could not give the slot back: " + r.error().describe());
    }
    return code;
}

// The command said it was rate-limited (--rate-limited-exit): a 429 for every caller, with
// the Retry-After it wrote into its file, if any.
void recordRunRateLimited(
    QuotaSession& c, const AdmitRequest& request, int code, std::string retryAfter, json& j)
{
    j["rate_limited"] = true;
    std::optional<std::int64_t> ms;
    while (!retryAfter.empty() && (retryAfter.back() == '\n' || retryAfter.back() == '\r'))
        retryAfter.pop_back();
    if (!retryAfter.empty()) {
        // The command's word, not the user's: a value that cannot be read (an impossible
        // date) is warned about, and the 429 counts with the configured backoff.
        auto parsed = RetryAfter::parse(retryAfter, c.clock().unixSeconds() * 1000);
        if (parsed) {
            warnIfClamped(c, retryAfter, *parsed);
            ms = parsed->ms;
        } else {
            c.console().warn("ignoring TOLLGATE_RETRY_AFTER_FILE: " + parsed.error().message);
        }
    }
    auto b = c.limiter().report429(request.provider, request.caller, ms, ProcessProbe::selfPid());
    if (!b) {
        c.console().warn("could not record the 429: " + b.error().describe());
    } else {
        j["backoff_ms"] = *b;
        c.console().tell("tollgate: " + request.provider + " rate-limited (exit " + std::to_string(code)
            + "); all callers back off " + QuotaFormat::seconds(*b));
    }
}

// What a finished run tells the quota (a 429; a success was told with the slot's release by
// runAdmitted) and its result document.
json recordRunOutcome(QuotaSession& c, const QuotaOptions& o, const AdmitRequest& request,
    const Permit& permit, int code, const RetryAfterFile& retryFile)
{
    std::string retryAfter
        = retryFile.path().empty() ? std::string() : readRetryAfterFile(c, retryFile.path());
    json j;
    j["provider"] = request.provider;
    j["fence"] = permit.fence();
    j["waited_ms"] = permit.waitedMs();
    j["exit_code"] = code;
    j["rate_limited"] = false;
    if (o.rateLimitedExit && code == *o.rateLimitedExit)
        recordRunRateLimited(c, request, code, std::move(retryAfter), j);
    return j;
}

int cmdRun(const QuotaContext& context)
{
    const QuotaOptions& o = context.options();
    QuotaSession c("run", o.common);
    AdmitRequest request;
    double timeoutSeconds = CliOptions::DEFAULT_TIMEOUT_SECONDS;
    if (auto stop = parseRequest(c, o, request, timeoutSeconds))
        return *stop;
    if (context.trailing().empty())
        return c.console().usage("run needs a command after --");
    const RetryAfterFile retryFile(c.probe().pidNamespace());
    // The command's keeper holds the slot: it lives until the last process of the command is
    // gone, even when this runner is killed (ChildRunner). Forked before the store is opened,
    // so it holds none of the store's descriptors. A command that cannot run is found out
    // here: it spends no request, tokens or slot.
    ChildRunner::Keeper keeper = ChildRunner::prepare(context.trailing(), [path = retryFile.path()] {
        if (!path.empty())
            ::unlink(path.c_str());
    });
    if (!keeper.ok())
        return c.console().fail(Error::make(keeper.exitCode() == 127 ? ErrorKind::NotFound : ErrorKind::Io,
                                    "", keeper.problem() + " (nothing was spent)"),
            keeper.exitCode());
    // This runner renews the slot's lease that readers in other pid namespaces go by.
    request.wantsSlot = true;
    request.pid = keeper.pid();
    request.takesHandOff = true; // the keeper dies with this runner (ChildRunner)
    const auto lease = ChildRunner::lease(QuotaLimiter::RUN_LEASE);
    request.leaseMs = lease.count();
    Permit permit;
    if (auto stop = waitForAdmission(c, request, timeoutSeconds, permit))
        return *stop;
    const int code = runAdmitted(
        c, keeper, request, permit, retryFile.path(), lease, !(o.rateLimitedExit && *o.rateLimitedExit == 0));
    c.console().emit(recordRunOutcome(c, o, request, permit, code, retryFile));
    return code;
}

// What report-ok --fence says the call really used: the total, and its split when both
// halves are given (-1: not known, as AdmissionEnd has it).
struct Used
{
    std::int64_t tokens = -1;
    std::int64_t input = -1;
    std::int64_t output = -1;

    [[nodiscard]] bool known() const { return tokens >= 0; }
    [[nodiscard]] bool split() const { return input >= 0 && output >= 0; }
};

// The usage options of report-ok, checked against each other before anything is recorded:
// each needs --fence; the split comes as a pair (a window's input and output are corrected
// only when both are known); a total given with it must be their sum (a call's tokens are
// its input plus its output, as acquire counted them). Each half is corrected from what that
// half counted at admission: the slot keeps the estimate's split (Slot::inputTokens).
StopCode parseUsed(QuotaSession& c, const QuotaOptions& o, Used& used)
{
    const std::pair<const char*, const std::optional<std::int64_t>&> given[]
        = { { "--tokens-used", o.tokensUsed }, { "--input-tokens-used", o.inputTokensUsed },
              { "--output-tokens-used", o.outputTokensUsed } };
    for (const auto& [name, value] : given) {
        if (value && !o.fence)
            return c.console().usage(std::string(name)
                + " needs --fence N: the admission (acquire --slot) whose estimate it replaces");
    }
    if (o.inputTokensUsed.has_value() != o.outputTokensUsed.has_value())
        return c.console().usage("--input-tokens-used and --output-tokens-used go together: a window's input "
                                 "and output are corrected only when both are known (for a total alone, "
                                 "give --tokens-used)");
    used.tokens = o.tokensUsed.value_or(-1);
    if (!o.inputTokensUsed)
        return std::nullopt;
    used.input = *o.inputTokensUsed;
    used.output = *o.outputTokensUsed;
    const std::int64_t sum = used.input + used.output; // each at most 2^40: no overflow
    if (o.tokensUsed && *o.tokensUsed != sum)
        return c.console().usage("--tokens-used " + std::to_string(*o.tokensUsed)
            + " is not --input-tokens-used " + std::to_string(used.input) + " + --output-tokens-used "
            + std::to_string(used.output) + " (" + std::to_string(sum)
            + "): a call's tokens are its input plus its output; give the split alone");
    used.tokens = sum;
    return std::nullopt;
}

// "; the window counts 170 tokens for it (50 input, 120 output)": what report-ok counted.
std::string countedText(const Used& used)
{
    if (!used.known())
        return "";
    return "; the window counts " + std::to_string(used.tokens) + " tokens for it"
        + (used.split()
                ? " (" + std::to_string(used.input) + " input, " + std::to_string(used.output) + " output)"
                : std::string());
}

// report-ok --fence N: the end of a call admitted with `acquire --slot`: the slot, the real
// usage and the success in one store operation (the slot knows its admission time and
// estimate).
int finishAdmission(QuotaSession& c, const QuotaOptions& o, const Used& used, json& j)
{
    AdmissionEnd end;
    end.provider = o.provider;
    end.fence = static_cast<std::uint64_t>(*o.fence);
    end.usedTokens = used.tokens;
    end.usedInputTokens = used.input;
    end.usedOutputTokens = used.output;
    end.success = true;
    end.caller = *o.caller;
    auto r = c.limiter().finishAdmission(end);
    if (!r)
        return c.console().fail(r.error());
    j["recorded"] = "success";
    j["fence"] = end.fence;
    j["released"] = *r;
    if (!*r)
        return c.console().fail(Error::make(ErrorKind::Busy, "",
                                    o.provider + ": no slot with fence " + std::to_string(end.fence)
                                        + " (released or reclaimed already, or the admission took none: "
                                          "acquire --slot takes one only when the provider has --parallel): "
                                          "the success was recorded"
                                        + (used.known() ? ", the tokens were not corrected" : "")),
            EXIT_REFUSED);
    // What the window now counts for the call (null: its estimate stands).
    auto known = [](std::int64_t v) { return v >= 0 ? json(v) : json(nullptr); };
    j["tokens_used"] = known(used.tokens);
    j["input_tokens_used"] = known(used.input);
    j["output_tokens_used"] = known(used.output);
    c.console().say("recorded a success for " + o.provider + "; released slot fence "
        + std::to_string(end.fence) + countedText(used));
    c.console().emit(j);
    return EXIT_OK;
}

int reportSuccess(QuotaSession& c, const QuotaOptions& o, json& j)
{
    if (auto r = c.limiter().reportSuccess(o.provider, *o.caller); !r)
        return c.console().fail(r.error());
    c.console().say("recorded a success for " + o.provider + "; consecutive 429s reset");
    j["recorded"] = "success";
    c.console().emit(j);
    return EXIT_OK;
}

int report429(QuotaSession& c, const QuotaOptions& o, std::optional<std::int64_t> retryMs, json& j)
{
    // the caller that got the 429 is the script that ran us
    auto b = c.limiter().report429(o.provider, *o.caller, retryMs, ProcessProbe::parentPid());
    if (!b)
        return c.console().fail(b.error());
    c.console().say(
        o.provider + ": every caller now backs off for " + QuotaFormat::seconds(*b) + " (plus jitter)");
    j["recorded"] = "429";
    j["backoff_ms"] = *b;
    c.console().emit(j);
    return EXIT_OK;
}

int cmdReport(const QuotaContext& context, bool rateLimited)
{
    const QuotaOptions& o = context.options();
    QuotaSession c(rateLimited ? "report-429" : "report-ok", o.common);
    if (auto stop = c.needProvider(o.provider))
        return *stop;
    if (!o.caller || o.caller->empty())
        return c.console().usage("--caller NAME is required");
    std::optional<std::int64_t> retryMs;
    if (rateLimited && o.retryAfter) {
        auto delay = RetryAfter::parse(*o.retryAfter, c.clock().unixSeconds() * 1000);
        if (!delay)
            return c.console().usage("--retry-after: " + delay.error().message);
        warnIfClamped(c, *o.retryAfter, *delay);
        retryMs = delay->ms;
    }
    Used used;
    if (!rateLimited) {
        if (auto stop = parseUsed(c, o, used))
            return *stop;
    }
    bool missing = false;
    if (auto stop = c.openUnlessMissing(missing))
        return *stop;
    if (missing)
        return c.failUnknownOnMissingHome(o.provider);
    json j;
    j["provider"] = o.provider;
    if (!rateLimited && o.fence)
        return finishAdmission(c, o, used, j);
    if (!rateLimited)
        return reportSuccess(c, o, j);
    return report429(c, o, retryMs, j);
}

// acquire's and run's request options.
void addRequest(CLI::App* command, QuotaContext& context)
{
    QuotaOptions& o = context.options();
    context.addProvider(command, "the provider whose quota to use");
    context.addCaller(command, "who you are (required; shown in status and history)");
    CliOptions::addText(command, "--model", o.model, "count against this model's limits too")->type_name("M");
    CLI::Option* tokens = CliOptions::addInteger(
        command, "--tokens", o.tokens, 0, MAX_AMOUNT, "tokens this request will use (default 0)");
    CLI::Option* input = CliOptions::addInteger(command, "--input-tokens", o.askInputTokens, 0, MAX_AMOUNT,
        "input tokens it will use, as the provider counts them (with --output-tokens: instead of --tokens)");
    CLI::Option* output = CliOptions::addInteger(command, "--output-tokens", o.askOutputTokens, 0, MAX_AMOUNT,
        "output tokens it may use (max_tokens)");
    tokens->excludes(input);
    tokens->excludes(output);
    CliOptions::addSeconds(command, "--timeout", o.timeout, "how long to wait at most (default 60)");
}

void addReports(CLI::App& app, QuotaContext& context)
{
    QuotaOptions& o = context.options();
    CLI::App* r429 = context.addCommand(&app, "report-429", "report a 429: every caller backs off",
        [](const QuotaContext& ctx) { return cmdReport(ctx, true); });
    context.addProvider(r429, "the provider that answered 429");
    context.addCaller(r429, "who got it (required)");
    CliOptions::addText(r429, "--retry-after", o.retryAfter, "the Retry-After value: seconds or an HTTP date")
        ->type_name("SECONDS|DATE");
    CLI::App* ok
        = context.addCommand(&app, "report-ok", "report a success: resets the count of consecutive 429s",
            [](const QuotaContext& ctx) { return cmdReport(ctx, false); });
    context.addProvider(ok, "the provider");
    context.addCaller(ok, "who succeeded (required)");
    CliOptions::addInteger(ok, "--fence", o.fence, 1, INT64_MAX,
        "end the call admitted with `acquire --slot` (its fence): the slot is freed too")
        ->type_name("N");
    CliOptions::addInteger(ok, "--tokens-used", o.tokensUsed, 0, INT64_MAX,
        "what the call really used (needs --fence): replaces acquire's --tokens estimate in the window")
        ->type_name("N");
    CliOptions::addInteger(ok, "--input-tokens-used", o.inputTokensUsed, 0, MAX_AMOUNT,
        "the input tokens it really used (needs --fence and --output-tokens-used): corrects the "
        "window's input tokens too; the total is their sum")
        ->type_name("N");
    CliOptions::addInteger(ok, "--output-tokens-used", o.outputTokensUsed, 0, MAX_AMOUNT,
        "the output tokens it really used (with --input-tokens-used)")
        ->type_name("N");
}

} // namespace

void AdmitCommand::addTo(CLI::App& app, QuotaContext& context)
{
    QuotaOptions& o = context.options();
    CLI::App* acquire = context.addCommand(
        &app, "acquire", "wait for the quota of PROVIDER; exit 0 when admitted", cmdAcquire);
    addRequest(acquire, context);
    CLI::Option* slot = acquire->add_flag(
        "--slot", o.slot, "also take a parallel slot, held until released or the caller dies");
    // Only a slot has a holder: --pid alone would be taken and ignored.
    CliOptions::addInteger(acquire, "--pid", o.pid, 1, INT32_MAX,
        "the process that holds the slot (default: the one that ran tollgate)")
        ->needs(slot);

    CLI::App* run = context.addCommand(&app, "run",
        "run a command under the quota (tollgate run PROVIDER --caller NAME -- CMD ARGS...)", cmdRun);
    addRequest(run, context);
    CliOptions::addInteger(run, "--rate-limited-exit", o.rateLimitedExit, 1, 255,
        "the command's exit code that means it got a 429 (reported for every caller)")
        ->type_name("CODE");

    addReports(app, context);
}

} // namespace tollgate::cli
