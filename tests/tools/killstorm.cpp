// tollgate-killstorm: callers are killed at random while they use the shared quota, and the
// quota must hold anyway. N caller processes loop over `tollgate run` (a recorder command
// inside the slot), `tollgate acquire`, 429 reports and short pauses; a tuner keeps changing
// the limits; a killer sends SIGKILL to a random caller's current tollgate process group
// (tollgate and its command) every 50-250 ms, and after every kill checks that the state is
// still readable and the limits are still there. Afterwards, from logs the callers and the
// recorder kept outside Tollgate (and from Tollgate's history, for precision), it checks:
// no rolling-window overrun (requests, tokens, per-model), no parallel overrun, no limit lost,
// every killed holder's slot reclaimed, and progress (no wedge) by events, never by a time
// threshold that a slow or loaded machine could miss: admissions after the storm's middle
// kill, every caller finished once the storm stops, then fresh callers admitted one after
// another, each within a generous deadline.
//
//   tollgate-killstorm --cli PATH [--callers 16] [--seconds 30] [--seed S] [--workdir DIR]
// Exits 0 when every check holds; prints a summary ending "killstorm: N passed, M failed".
// Without --workdir the run's home and logs go to a new directory in $TMPDIR (else /tmp), kept
// for inspection when a check fails and removed when every check holds.

#include "history/historyreader.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

constexpr long long WINDOW_US = 1'000'000;
constexpr int MAX_REQUESTS = 20; // the tuner moves requests between 16 and 20
constexpr int MAX_TOKENS = 3000;
constexpr int MODEL_REQUESTS = 6;
constexpr int MAX_PARALLEL = 4; // the tuner moves parallel between 3 and 4
constexpr int RATE_LIMITED_EXIT = 75;
// After the storm: how many fresh callers must be admitted, one after another, and the
// deadline of each (its --timeout) and of the callers' last calls. Generous (the window and
// the backoff cap are 1 s, a caller's call waits 3 s at most): only a quota that does not
// admit again (a slot, a queue place, a pause or a backoff that nobody ends) misses them. A
// wedged run still ends within the ctest timeout: 60 + 30 + 30 s after the storm.
constexpr int FRESH_CALLERS = 4;
constexpr int FRESH_TIMEOUT_S = 30;
constexpr int FINISH_DEADLINE_S = 60;

long long nowUs()
{
    return std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::system_clock::now().time_since_epoch())
        .count();
}

void appendLine(const std::string& path, const std::string& line)
{
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    const std::string l = line + "\n";
    (void)!::write(fd, l.data(), l.size());
    ::close(fd);
}

struct Shared
{
    std::atomic<int> stop;
    std::atomic<int> pgid[64];
};

Shared* g_shared = nullptr;
int g_self = -1;

void onKillRequest(int)
{
    const int pg = g_shared ? g_shared->pgid[g_self].load() : 0;
    if (pg > 0)
        ::kill(-pg, SIGKILL);
}

struct Ran
{
    int code = -1;
    std::string out;
};

// Runs tollgate in its own process group (so the killer can take it and its command at
// once), capturing stdout. Returns -9 when it was killed.
Ran runTool(const std::vector<std::string>& args, int callerIndex)
{
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC) != 0)
        return {};
    const pid_t child = ::fork();
    if (child == 0) {
        ::setpgid(0, 0);
        ::dup2(pipefd[1], 1);
        const int devnull = ::open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            ::dup2(devnull, 2);
        std::vector<char*> argv;
        for (const auto& a : args)
            argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    ::close(pipefd[1]);
    if (callerIndex >= 0 && child > 0) {
        ::setpgid(child, child); // both sides set it: no window in which the group is unset
        g_shared->pgid[callerIndex].store(child);
    }
    Ran r;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(pipefd[0], buf, sizeof buf);
        if (n > 0) {
            r.out.append(buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        break;
    }
    ::close(pipefd[0]);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) { }
    if (callerIndex >= 0)
        g_shared->pgid[callerIndex].store(0);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return r;
}

// The command run inside a slot: logs its start, heartbeats while it "calls the API", and
// its end. Its true lifetime always covers [start, last heartbeat].
int recordMode(char** argv)
{
    const std::string log = argv[2];
    const long holdMs = std::atol(argv[3]);
    const std::string ask = argv[4];
    const std::string tokens = argv[5];
    const std::string model = argv[6];
    const bool limited = std::atoi(argv[7]) != 0;
    const char* fenceEnv = std::getenv("TOLLGATE_FENCE");
    const std::string fence = fenceEnv ? fenceEnv : "0";
    appendLine(log, "B " + fence + " " + ask + " " + std::to_string(nowUs()) + " " + tokens + " " + model);
    const long long end = nowUs() + holdMs * 1000;
    while (nowUs() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        appendLine(log, "H " + fence + " " + std::to_string(nowUs()));
    }
    appendLine(log, "E " + fence + " " + std::to_string(nowUs()));
    if (limited) {
        if (const char* f = std::getenv("TOLLGATE_RETRY_AFTER_FILE"); f && *f)
            appendLine(f, "0.3");
        return RATE_LIMITED_EXIT;
    }
    return 0;
}

struct Options
{
    std::string cli;
    std::string self;
    std::string workdir;
    std::string home;
    int callers = 16;
    int seconds = 30;
    unsigned seed = 1;
};

std::vector<std::string> tool(const Options& o, std::vector<std::string> args)
{
    // right after the command word: what follows "--" belongs to the command run
    args.insert(args.begin() + 1, { "--home", o.home });
    args.insert(args.begin(), o.cli);
    return args;
}

// A caller refused at once (exit 1: no room before its deadline, or paused: the limiter answers
// at once instead of holding it until --timeout) comes back after a short pause, as a real
// client retries, not in a tight loop: otherwise the storm's random 429 reports and pauses,
// drawn per attempt, would come tens of times a second and keep the provider backing off.
void refusedBackOff(const Ran& r, std::mt19937& rng)
{
    if (r.code == 1 && !g_shared->stop.load())
        std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 300));
}

void callerLoop(const Options& o, int index)
{
    g_self = index;
    struct sigaction sa
    {
    };
    sa.sa_handler = onKillRequest;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGUSR1, &sa, nullptr);
    std::mt19937 rng(o.seed * 1000 + static_cast<unsigned>(index));
    const std::string log = o.workdir + "/logs/caller" + std::to_string(index) + ".log";
    const std::string caller = "c" + std::to_string(index);
    while (!g_shared->stop.load()) {
        const unsigned roll = rng() % 100;
        const std::string tokens = std::to_string(rng() % 400);
        const bool withModel = rng() % 10 < 3;
        if (roll < 85) {
            const std::string ask = std::to_string(nowUs());
            std::vector<std::string> args { "run", "storm", "--caller", caller, "--tokens", tokens,
                "--timeout", "3", "--rate-limited-exit", std::to_string(RATE_LIMITED_EXIT) };
            if (withModel) {
                args.push_back("--model");
                args.push_back("m1");
            }
            args.insert(args.end(),
                { "--", o.self, "--record", log, std::to_string(rng() % 150), ask, tokens,
                    withModel ? "m1" : "-", rng() % 100 < 4 ? "1" : "0" });
            refusedBackOff(runTool(tool(o, args), index), rng);
        } else if (roll < 92) {
            const std::string ask = std::to_string(nowUs());
            std::vector<std::string> args { "acquire", "storm", "--caller", caller, "--tokens", tokens,
                "--timeout", "2" };
            if (withModel) {
                args.push_back("--model");
                args.push_back("m1");
            }
            const Ran r = runTool(tool(o, args), index);
            refusedBackOff(r, rng);
            const auto at = r.out.find("fence=");
            if (r.code == 0 && at != std::string::npos)
                appendLine(log,
                    "A " + std::to_string(std::atoll(r.out.c_str() + at + 6)) + " " + ask + " "
                        + std::to_string(nowUs()) + " " + tokens + " " + (withModel ? "m1" : "-"));
        } else if (roll < 97) {
            (void)runTool(
                tool(o, { "report-429", "storm", "--caller", caller, "--retry-after", "0.2" }), index);
        } else {
            (void)runTool(tool(o, { "pause", "storm", "--reason", "storm test" }), -1);
            std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 200));
            (void)runTool(tool(o, { "resume", "storm" }), -1);
        }
    }
}

void tunerLoop(const Options& o)
{
    std::mt19937 rng(o.seed);
    const std::string log = o.workdir + "/logs/tuner.log";
    while (!g_shared->stop.load()) {
        const std::string requests = rng() % 2 ? "16" : "20";
        const std::string parallel = rng() % 2 ? "3" : "4";
        const Ran r = runTool(
            tool(o, { "limits", "set", "storm", "--requests", requests, "--parallel", parallel }), -1);
        if (r.code == 0)
            appendLine(log, requests + " " + parallel);
        std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 400));
    }
}

struct Admission
{
    unsigned long long fence = 0;
    long long lo = 0, hi = 0; // the admission happened within [lo, hi]
    long long start = 0, last = 0; // a run's command lifetime (start > 0 for runs)
    long long tokens = 0;
    bool model = false;
};

std::map<unsigned long long, Admission> readLogs(const Options& o)
{
    std::map<unsigned long long, Admission> out;
    for (int i = 0; i < o.callers; ++i) {
        FILE* f = std::fopen((o.workdir + "/logs/caller" + std::to_string(i) + ".log").c_str(), "r");
        if (!f)
            continue;
        char line[512];
        while (std::fgets(line, sizeof line, f)) {
            std::istringstream in(line);
            char kind = 0;
            unsigned long long fence = 0;
            in >> kind >> fence;
            if (!in || fence == 0)
                continue; // a line torn by a kill
            Admission& a = out[fence];
            a.fence = fence;
            if (kind == 'B' || kind == 'A') {
                long long ask = 0, t = 0, tokens = 0;
                std::string model;
                in >> ask >> t >> tokens >> model;
                if (!in)
                    continue;
                a.lo = ask;
                a.hi = t;
                a.tokens = tokens;
                a.model = model == "m1";
                if (kind == 'B')
                    a.start = a.last = t;
            } else if (kind == 'H' || kind == 'E') {
                long long t = 0;
                in >> t;
                if (in)
                    a.last = std::max(a.last, t);
            }
        }
        std::fclose(f);
    }
    for (auto it = out.begin(); it != out.end();)
        it = it->second.hi == 0 ? out.erase(it) : std::next(it); // heartbeat without a start line
    return out;
}

// Definite overrun: `limit + 1` admissions that surely lie within one window, whatever
// their exact times: max(hi) - min(lo) < window.
int sureOverruns(std::vector<Admission> v, int limit, bool byTokens)
{
    std::sort(v.begin(), v.end(), [](const Admission& a, const Admission& b) { return a.lo < b.lo; });
    int worst = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        long long sum = 0;
        for (std::size_t j = i; j < v.size() && v[j].lo < v[i].lo + WINDOW_US; ++j) {
            if (v[j].hi < v[i].lo + WINDOW_US)
                sum += byTokens ? v[j].tokens : 1;
        }
        worst = std::max<int>(worst, static_cast<int>(sum - limit));
    }
    return std::max(0, worst);
}

} // namespace

int main(int argc, char** argv)
{
    if (argc == 8 && std::string(argv[1]) == "--record")
        return recordMode(argv);
    Options o;
    o.self = argv[0];
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--cli")
            o.cli = v;
        else if (k == "--callers")
            o.callers = std::clamp(std::atoi(v.c_str()), 1, 64);
        else if (k == "--seconds")
            o.seconds = std::max(1, std::atoi(v.c_str()));
        else if (k == "--seed")
            o.seed = static_cast<unsigned>(std::atol(v.c_str()));
        else if (k == "--workdir")
            o.workdir = v;
        else {
            std::fprintf(stderr,
                "usage: tollgate-killstorm --cli PATH [--callers N] [--seconds T] [--seed S] [--workdir "
                "DIR]\n");
            return 2;
        }
    }
    if (o.cli.empty()) {
        std::fprintf(stderr, "tollgate-killstorm: --cli PATH (the tollgate binary) is required\n");
        return 2;
    }
    if (o.self.find('/') == std::string::npos || o.self[0] != '/') {
        char buf[4096];
        const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (n > 0)
            o.self.assign(buf, static_cast<std::size_t>(n));
    }
    const bool ownWorkdir = o.workdir.empty();
    if (ownWorkdir) {
        const char* tmp = std::getenv("TMPDIR");
        std::string tmpl = std::string(tmp && tmp[0] == '/' ? tmp : "/tmp") + "/tollgate-killstorm-XXXXXX";
        if (!::mkdtemp(tmpl.data()))
            return 3;
        o.workdir = tmpl;
    }
    o.home = o.workdir + "/home";
    ::mkdir((o.workdir + "/logs").c_str(), 0700);
    g_shared = static_cast<Shared*>(
        ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    new (g_shared) Shared {};

    if (runTool(tool(o,
                    { "limits", "set", "storm", "--requests", "20", "--window", "1", "--tokens",
                        std::to_string(MAX_TOKENS), "--parallel", "4", "--backoff-base", "0.2",
                        "--backoff-cap", "1" }),
            -1)
                .code
            != 0
        || runTool(tool(o,
                       { "limits", "set", "storm", "--model", "m1", "--requests",
                           std::to_string(MODEL_REQUESTS), "--window", "1" }),
               -1)
                .code
            != 0) {
        std::fprintf(stderr, "tollgate-killstorm: cannot set up limits in %s\n", o.home.c_str());
        return 3;
    }
    appendLine(o.workdir + "/logs/tuner.log", "20 4");

    std::vector<pid_t> children;
    for (int i = 0; i < o.callers; ++i) {
        const pid_t p = ::fork();
        if (p == 0) {
            callerLoop(o, i);
            ::_exit(0);
        }
        children.push_back(p);
    }
    const pid_t tuner = ::fork();
    if (tuner == 0) {
        tunerLoop(o);
        ::_exit(0);
    }

    std::mt19937 rng(o.seed + 7);
    long kills = 0, unreadable = 0, limitsMissing = 0;
    std::vector<long long> killTimes; // nowUs() of each kill, in order
    std::string firstProblem;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(o.seconds);
    while (std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 200));
        const int victim = static_cast<int>(rng() % static_cast<unsigned>(o.callers));
        if (g_shared->pgid[victim].load() <= 0)
            continue;
        ::kill(children[static_cast<std::size_t>(victim)], SIGUSR1);
        ++kills;
        killTimes.push_back(nowUs());
        const Ran status = runTool(tool(o, { "status", "--json" }), -1);
        if (status.code != 0 || nlohmann::json::parse(status.out, nullptr, false).is_discarded()) {
            ++unreadable;
            if (firstProblem.empty())
                firstProblem
                    = "status exited " + std::to_string(status.code) + " after kill " + std::to_string(kills);
        }
        const Ran limits = runTool(tool(o, { "limits", "show", "storm", "--json" }), -1);
        if (limits.code != 0 || limits.out.find("\"storm\"") == std::string::npos)
            ++limitsMissing;
    }
    g_shared->stop.store(1);
    // Every caller finishes: its last call ends by its own --timeout (or is admitted). One still
    // running at the deadline is stuck: killed with its tollgate, and counted.
    children.push_back(tuner);
    int unfinished = 0;
    const auto finishBy = std::chrono::steady_clock::now() + std::chrono::seconds(FINISH_DEADLINE_S);
    for (std::size_t i = 0; i < children.size(); ++i) {
        while (::waitpid(children[i], nullptr, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() < finishBy) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                continue;
            }
            ++unfinished;
            if (i < children.size() - 1 && g_shared->pgid[i].load() > 0)
                ::kill(-g_shared->pgid[i].load(), SIGKILL);
            ::kill(children[i], SIGKILL);
            while (::waitpid(children[i], nullptr, 0) < 0 && errno == EINTR) { }
            break;
        }
    }

    // No wedge: whatever the storm left (dead holders' slots, ghosts in the queue, a backoff, a
    // pause), fresh callers are admitted, one after another, each running a command in a slot.
    int freshAdmitted = 0;
    std::string freshProblem;
    for (int i = 0; i < FRESH_CALLERS; ++i) {
        const Ran fresh
            = runTool(tool(o,
                          { "run", "storm", "--caller", "fresh" + std::to_string(i), "--tokens", "100",
                              "--timeout", std::to_string(FRESH_TIMEOUT_S), "--", "/bin/true" }),
                -1);
        if (fresh.code != 0) {
            freshProblem = ", fresh caller " + std::to_string(i) + " exited " + std::to_string(fresh.code);
            break; // wedged: the next would wait as long
        }
        ++freshAdmitted;
    }

    // Final: one more slot transaction reclaims every killed holder; nobody dead may hold one.
    const Ran final = runTool(tool(o,
                                  { "acquire", "storm", "--caller", "final", "--slot", "--timeout",
                                      std::to_string(FRESH_TIMEOUT_S) }),
        -1);
    const Ran status = runTool(tool(o, { "status", "--json" }), -1);
    int deadSlots = -1;
    unsigned long long finalFence = 0;
    if (const auto at = final.out.find("fence="); at != std::string::npos)
        finalFence = std::strtoull(final.out.c_str() + at + 6, nullptr, 10);
    const auto sj = nlohmann::json::parse(status.out, nullptr, false);
    if (!sj.is_discarded()) {
        deadSlots = 0;
        for (const auto& p : sj.value("providers", nlohmann::json::array()))
            for (const auto& s : p.value("slots", nlohmann::json::array()))
                deadSlots += s.value("state", "") == "alive" ? 0 : 1;
    }
    if (finalFence)
        (void)runTool(tool(o, { "release", "storm", "--fence", std::to_string(finalFence) }), -1);

    // Limits: what the tuner set last is what is there.
    std::string lastSet;
    if (FILE* f = std::fopen((o.workdir + "/logs/tuner.log").c_str(), "r")) {
        char line[64];
        while (std::fgets(line, sizeof line, f))
            lastSet = line;
        std::fclose(f);
    }
    const Ran shown = runTool(tool(o, { "limits", "show", "storm", "--json" }), -1);
    const auto lj = nlohmann::json::parse(shown.out, nullptr, false);
    bool limitsKept = false;
    if (!lj.is_discarded() && lj.is_array() && !lj.empty()) {
        const auto& l = lj[0];
        std::ostringstream now;
        now << l.value("requests", 0) << " " << l.value("parallel", 0) << "\n";
        limitsKept = now.str() == lastSet && l.value("tokens", 0) == MAX_TOKENS && l["models"].contains("m1");
    }

    // The logs kept outside Tollgate.
    const auto admissions = readLogs(o);
    std::vector<Admission> all, model;
    for (const auto& [fence, a] : admissions) {
        all.push_back(a);
        if (a.model)
            model.push_back(a);
    }
    const int overRequests = sureOverruns(all, MAX_REQUESTS, false);
    const int overTokens = sureOverruns(all, MAX_TOKENS, true);
    const int overModel = sureOverruns(model, MODEL_REQUESTS, false);
    std::vector<std::pair<long long, int>> edges;
    for (const auto& a : all) {
        if (a.start > 0 && a.last >= a.start) {
            edges.emplace_back(a.start, 1);
            edges.emplace_back(a.last, -1);
        }
    }
    std::sort(edges.begin(), edges.end());
    int inFlight = 0, peak = 0;
    for (const auto& e : edges) {
        inFlight += e.second;
        peak = std::max(peak, inFlight);
    }
    // Progress through the storm, by events: admissions made after its middle kill. The longest
    // gap between admissions is shown, for a reader, and judged by nobody: it depends on the
    // machine.
    std::vector<long long> times;
    for (const auto& a : all)
        times.push_back(a.hi);
    std::sort(times.begin(), times.end());
    long long maxGapMs = 0;
    for (std::size_t i = 1; i < times.size(); ++i)
        maxGapMs = std::max(maxGapMs, (times[i] - times[i - 1]) / 1000);
    const long long middleKill = killTimes.empty() ? 0 : killTimes[killTimes.size() / 2];
    const auto afterMiddle
        = std::count_if(times.begin(), times.end(), [&](long long t) { return t > middleKill; });

    // Tollgate's history, to the millisecond.
    tollgate::HistoryReader reader(o.home);
    auto batch = reader.poll();
    std::vector<tollgate::HistoryEvent> admits;
    long reclaims = 0;
    if (batch) {
        for (const auto& e : batch->events) {
            if (e.type == tollgate::EventType::Admit && e.caller != "final")
                admits.push_back(e);
            reclaims += e.type == tollgate::EventType::Reclaim ? 1 : 0;
        }
    }
    std::sort(admits.begin(), admits.end(), [](const auto& a, const auto& b) { return a.timeMs < b.timeMs; });
    int historyOver = 0;
    for (std::size_t i = 0; i < admits.size(); ++i) {
        int n = 0, m = 0;
        long long tokens = 0;
        for (std::size_t j = i; j < admits.size() && admits[j].timeMs < admits[i].timeMs + WINDOW_US / 1000;
             ++j) {
            ++n;
            tokens += admits[j].tokens;
            m += admits[j].model == "m1" ? 1 : 0;
        }
        historyOver = std::max(
            { historyOver, n - MAX_REQUESTS, static_cast<int>(tokens - MAX_TOKENS), m - MODEL_REQUESTS });
    }

    struct Check
    {
        const char* name;
        bool ok;
        std::string detail;
    };
    const std::vector<Check> checks {
        // Only proof that the run exercised something; how much depends on the machine.
        { "enough traffic", admissions.size() >= 20 && kills >= 3,
            std::to_string(admissions.size()) + " admissions logged, " + std::to_string(kills) + " kills" },
        { "no request overrun (callers' logs)", overRequests == 0, std::to_string(overRequests) },
        { "no token overrun (callers' logs)", overTokens == 0, std::to_string(overTokens) },
        { "no per-model overrun (callers' logs)", overModel == 0, std::to_string(overModel) },
        { "no parallel overrun (commands' lifetimes)", peak <= MAX_PARALLEL, "peak " + std::to_string(peak) },
        { "no overrun in Tollgate's history", historyOver <= 0,
            std::to_string(admits.size()) + " admits, worst excess " + std::to_string(historyOver) },
        { "state readable after every kill", unreadable == 0,
            std::to_string(unreadable) + " " + firstProblem },
        { "limits present after every kill", limitsMissing == 0, std::to_string(limitsMissing) },
        { "last limits set are kept", limitsKept, "tuner last set " + lastSet },
        { "progress through the storm", !killTimes.empty() && afterMiddle > 0,
            std::to_string(afterMiddle) + " admissions after kill " + std::to_string(killTimes.size() / 2 + 1)
                + " of " + std::to_string(kills) + "; longest gap between admissions "
                + std::to_string(maxGapMs) + " ms (shown, not judged)" },
        { "every caller finished after the storm", unfinished == 0,
            std::to_string(unfinished) + " still running after " + std::to_string(FINISH_DEADLINE_S) + " s" },
        { "no wedge: fresh callers admitted after the storm",
            freshAdmitted == FRESH_CALLERS && final.code == 0,
            std::to_string(freshAdmitted) + "/" + std::to_string(FRESH_CALLERS)
                + " runs admitted, final acquire exited " + std::to_string(final.code) + freshProblem },
        { "every killed holder's slot reclaimed", deadSlots == 0,
            std::to_string(deadSlots) + " dead slots left, " + std::to_string(reclaims) + " reclaims" },
    };
    int passed = 0, failed = 0;
    std::printf("killstorm: %d callers, %d s, %ld kills, %zu admissions (%zu in history), workdir %s\n",
        o.callers, o.seconds, kills, admissions.size(), admits.size(), o.workdir.c_str());
    for (const auto& c : checks) {
        std::printf("  %s %s (%s)\n", c.ok ? "PASS" : "FAIL", c.name, c.detail.c_str());
        (c.ok ? passed : failed)++;
    }
    std::printf("killstorm: %d passed, %d failed\n", passed, failed);
    if (ownWorkdir && failed == 0) {
        std::error_code ec; // remove_all does not follow symlinks; a failure only leaves files behind
        std::filesystem::remove_all(o.workdir, ec);
        std::printf("killstorm: workdir %s %s\n", o.workdir.c_str(),
            ec ? ("not removed: " + ec.message()).c_str() : "removed");
    }
    return failed == 0 ? 0 : 1;
}
