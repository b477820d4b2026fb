#include "democommand.h"

#include "backend/quotalimiter.h"
#include "backend/storefactory.h"
#include "base/systemclock.h"
#include "childrunner.h"
#include "clioptions.h"
#include "console.h"
#include "demoprovider.h"
#include "exitcodes.h"
#include "lock/lockfile.h"
#include "system/homedir.h"

#include <cerrno>
#include <csignal>
#include <iostream>
#include <random>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace tollgate::cli {

namespace {

// Tollgate is told 60 requests per minute; the provider really allows 40.
constexpr std::int64_t LIMIT_REQUESTS = 60;
constexpr std::int64_t LIMIT_TOKENS = 60000;
constexpr std::int64_t TRUE_QUOTA = 40;
constexpr std::int64_t WINDOW_MS = 60000;
constexpr std::int64_t PARALLEL = 4;
constexpr auto STOP_GRACE = std::chrono::seconds(5);

struct CallerSpec
{
    const char* name;
    int thinkMinMs;
    int thinkMaxMs;
    int tokens;
    bool slot;
};

// Different appetites, so that one caller visibly eats most of the quota.
const CallerSpec CALLERS[] = {
    { "batch-indexer", 0, 200, 800, true },
    { "chat-bot", 1000, 2500, 300, true },
    { "embedder", 400, 1200, 120, false },
    { "nightly-report", 5000, 9000, 2000, true },
};

std::int64_t nowMs(const Clock& clock)
{
    return clock.unixMs();
}

// Sleeps in short steps so that Ctrl-C ends it at once. Returns false when interrupted.
bool nap(std::int64_t ms)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
        if (ChildRunner::interrupted().load())
            return false;
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            std::chrono::milliseconds(50), end - std::chrono::steady_clock::now()));
    }
    return !ChildRunner::interrupted().load();
}

int fail(const std::string& what, const Error& e)
{
    std::cerr << "tollgate demo: " << Console::printable(what + ": " + e.describe()) << '\n';
    return e.kind == ErrorKind::Usage ? EXIT_USAGE : EXIT_IO;
}

std::string demoDir(const std::string& home)
{
    return home + "/demo";
}

std::string locksDir(const std::string& home)
{
    return home + "/demo/locks";
}

// One simulated caller: the loop every real client of a rate-limited API runs.
int runCaller(
    const std::string& home, const std::string& name, int thinkMin, int thinkMax, int tokens, bool slot)
{
    const SystemClock clock;
    const ProcessProbe probe;
    auto store = StoreFactory::openBackend(home, clock, probe);
    if (!store)
        return fail("cannot open the home", store.error());
    QuotaLimiter limiter(**store, clock, probe);
    auto provider = DemoProvider::open(demoDir(home), TRUE_QUOTA, WINDOW_MS);
    if (!provider)
        return fail("cannot open the simulated provider", provider.error());
    std::mt19937 rng(static_cast<unsigned>(::getpid()));
    auto between
        = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, std::max(lo, hi))(rng); };

    while (!ChildRunner::interrupted().load()) {
        AdmitRequest request;
        request.provider = DemoCommand::PROVIDER;
        request.caller = name;
        request.tokens = between(tokens / 2, tokens * 3 / 2);
        request.wantsSlot = slot;
        request.pid = ProcessProbe::selfPid();
        auto permit
            = limiter.acquire(request, clock.now() + std::chrono::seconds(30), &ChildRunner::interrupted());
        if (!permit) {
            if (ChildRunner::interrupted().load())
                break;
            if (permit.error().kind != ErrorKind::Timeout) {
                std::cerr << Console::printable("tollgate demo (" + name + "): " + permit.error().describe())
                          << '\n';
                nap(1000);
            }
            continue;
        }
        nap(between(150, 600)); // the request in flight
        auto answer = provider->call(nowMs(clock));
        if (answer && answer->rateLimited)
            (void)limiter.report429(DemoCommand::PROVIDER, name, answer->retryAfterMs);
        else if (answer)
            (void)limiter.reportSuccess(DemoCommand::PROVIDER, name);
        (void)permit->release();
        nap(between(thinkMin, thinkMax));
    }
    return EXIT_OK;
}

// A deploy script that takes a lock file now and then: shows up under Holders.
int runLocker(const std::string& home)
{
    const SystemClock clock;
    const ProcessProbe probe;
    auto lock = LockFile::open(locksDir(home) + "/deploy.lock", clock, probe);
    if (!lock)
        return fail("cannot open the demo lock", lock.error());
    std::mt19937 rng(static_cast<unsigned>(::getpid()));
    LockOptions options;
    options.tag = "demo deploy";
    while (nap(std::uniform_int_distribution<int>(3000, 8000)(rng))) {
        auto got = lock->tryAcquire(options);
        if (!got || !got->acquired)
            continue;
        nap(std::uniform_int_distribution<int>(8000, 15000)(rng));
        (void)lock->release(ProcessProbe::selfPid(), false);
    }
    (void)lock->release(ProcessProbe::selfPid(), false);
    return EXIT_OK;
}

// A cron job that dies holding its lock: a dead holder for "Clean stale" to remove.
int runCrasher(const std::string& home)
{
    const SystemClock clock;
    const ProcessProbe probe;
    auto lock = LockFile::open(locksDir(home) + "/cron-cleanup.lock", clock, probe);
    if (!lock)
        return fail("cannot open the demo lock", lock.error());
    LockOptions options;
    options.tag = "cron cleanup (crashed)";
    (void)lock->tryAcquire(options);
    ::_exit(1); // no release: that is the point
}

pid_t spawn(const std::vector<std::string>& args)
{
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid != 0)
        return pid;
    // If the demo itself is killed without a chance to stop us, we go too.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
        ::_exit(0);
    std::vector<char*> argv;
    for (const auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
}

int runDemo(const std::string& home, std::optional<double> durationSeconds)
{
    const SystemClock clock;
    const ProcessProbe probe;
    auto store = StoreFactory::openBackend(home, clock, probe);
    if (!store)
        return fail("cannot open the home", store.error());
    QuotaLimiter limiter(**store, clock, probe);
    ProviderLimits limits;
    limits.requests = LIMIT_REQUESTS;
    limits.tokens = LIMIT_TOKENS;
    limits.windowMs = WINDOW_MS;
    limits.parallel = PARALLEL;
    limits.backoffBaseMs = 5000; // short, so the demo cycles through storms and recoveries
    limits.backoffCapMs = 40000;
    limits.maxHoldMs = 60000;
    if (auto r = limiter.setLimits(DemoCommand::PROVIDER, limits, "tollgate demo"); !r)
        return fail("cannot set the demo limits", r.error());
    for (const std::string& dir : { demoDir(home), locksDir(home) }) {
        if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
            return fail("cannot create " + dir, Error::fromErrno(errno, dir, "mkdir"));
    }

    std::cout << "tollgate demo: " << std::size(CALLERS) << " simulated callers share \""
              << DemoCommand::PROVIDER << "\" in " << Console::printable(home) << "\n"
              << "  Tollgate's limit: " << LIMIT_REQUESTS << " requests per " << WINDOW_MS / 1000 << " s, "
              << PARALLEL << " parallel. The simulated provider really allows " << TRUE_QUOTA << ",\n"
              << "  so 429 storms will happen and every caller backs off together.\n"
              << "  Watch it:  tollgate-dashboard --home " << Console::printable(home) << " --locks "
              << Console::printable(locksDir(home)) << "\n"
              << "  Ctrl-C stops every caller (their slots are given back).\n"
              << std::flush;

    ChildRunner::installSignalHandlers();
    std::vector<pid_t> children;
    const std::string self = "tollgate";
    for (const auto& c : CALLERS) {
        std::vector<std::string> args { self, "demo", "--home", home, "--internal-caller", c.name,
            "--think-min", std::to_string(c.thinkMinMs), "--think-max", std::to_string(c.thinkMaxMs),
            "--tokens", std::to_string(c.tokens) };
        if (c.slot)
            args.push_back("--slot");
        children.push_back(spawn(args));
    }
    children.push_back(spawn({ self, "demo", "--home", home, "--internal-locker" }));
    const pid_t crasher = spawn({ self, "demo", "--home", home, "--internal-crasher" });

    const auto start = std::chrono::steady_clock::now();
    while (!ChildRunner::interrupted().load()) {
        if (durationSeconds
            && std::chrono::steady_clock::now() - start >= std::chrono::duration<double>(*durationSeconds))
            break;
        int status = 0;
        const pid_t gone = ::waitpid(-1, &status, WNOHANG);
        if (gone > 0 && gone != crasher) {
            std::cerr << "tollgate demo: a simulated caller (pid " << gone << ") ended unexpectedly\n";
            std::erase(children, gone);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }

    std::cout << "tollgate demo: stopping " << children.size() << " simulated processes...\n" << std::flush;
    for (pid_t pid : children)
        ::kill(pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + STOP_GRACE;
    while (!children.empty() && std::chrono::steady_clock::now() < deadline) {
        std::erase_if(children, [](pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) == pid; });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (pid_t pid : children) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
    }
    ::waitpid(crasher, nullptr, WNOHANG);
    std::cout << "tollgate demo: stopped. The limits of " << DemoCommand::PROVIDER
              << " stay in place (remove them with: tollgate limits remove " << DemoCommand::PROVIDER
              << " --home " << Console::printable(home) << ")\n";
    return EXIT_OK;
}

} // namespace

void DemoCommand::addTo(CLI::App& app, CommandTable& table)
{
    struct Parsed
    {
        CliOptions::Common common;
        std::optional<double> duration;
        std::optional<std::string> caller;
        std::optional<std::int64_t> thinkMin, thinkMax, tokens;
        bool slot = false, locker = false, crasher = false;
    };
    static Parsed p;
    CLI::App* demo = app.add_subcommand("demo", "simulated callers and 429 storms to watch in the dashboard");
    demo->add_option_function<std::string>(
            "--home", [](const std::string& v) { p.common.home = v; }, "the Tollgate home to run the demo in")
        ->type_name("DIR")
        ->check(CLI::Validator(
            [](std::string& v) { return v.empty() ? std::string("must not be empty") : std::string(); }, ""));
    CliOptions::addSeconds(
        demo, "--duration", p.duration, "stop by itself after this long (default: at Ctrl-C)");
    // The simulated processes are this binary re-executed in hidden modes.
    CliOptions::addText(demo, "--internal-caller", p.caller, "")->group("");
    CliOptions::addInteger(demo, "--think-min", p.thinkMin, 0, 3600000, "")->group("");
    CliOptions::addInteger(demo, "--think-max", p.thinkMax, 0, 3600000, "")->group("");
    CliOptions::addInteger(demo, "--tokens", p.tokens, 0, 3600000, "")->group("");
    demo->add_flag("--slot", p.slot, "")->group("");
    demo->add_flag("--internal-locker", p.locker, "")->group("");
    demo->add_flag("--internal-crasher", p.crasher, "")->group("");
    table.add(demo, [] {
        Console console("demo", false, false);
        auto spec = HomeSpec::resolve(p.common.home);
        if (!spec)
            return console.fail(spec.error());
        if (!spec->isDirectory())
            return console.fail(Error::make(ErrorKind::Usage, spec->text(),
                "the demo runs in a directory home (its simulated provider and locks are files)"));
        const std::optional<std::string> home = spec->dir();
        // The default home may still lack its parents (~/.local/state): made here, since the
        // demo and its processes then open the home by name, as a named home (last directory only).
        if (spec->isDefault()) {
            if (auto made = HomeDir::ensure(*home); !made)
                return console.fail(made.error());
        }
        if (p.caller) {
            ChildRunner::installSignalHandlers();
            return runCaller(*home, *p.caller, static_cast<int>(p.thinkMin.value_or(500)),
                static_cast<int>(p.thinkMax.value_or(1500)), static_cast<int>(p.tokens.value_or(100)),
                p.slot);
        }
        if (p.locker) {
            ChildRunner::installSignalHandlers();
            return runLocker(*home);
        }
        if (p.crasher)
            return runCrasher(*home);
        return runDemo(*home, p.duration);
    });
}

} // namespace tollgate::cli
