#include "lockcommand.h"

#include "argparser.h"
#include "childrunner.h"
#include "exitcodes.h"
#include "lockfile.h"
#include "systemclock.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace tollgate::cli {

namespace {

constexpr double DEFAULT_TIMEOUT_SECONDS = 60.0;

struct Settings {
    std::string command;
    std::string path;
    std::string tag;
    std::int64_t staleSeconds = 3600;
    double timeoutSeconds = DEFAULT_TIMEOUT_SECONDS;
    std::int64_t pid = 0; // 0: default holder
    bool json = false;
    bool quiet = false;
    bool force = false;
    int conflictExit = EXIT_REFUSED;
    std::vector<std::string> commandLine; // for run
};

std::string describeHolder(const LockStatus& s)
{
    if (!s.exists)
        return "free";
    if (s.corrupt)
        return "a corrupt lock file (" + s.corruptReason + "), " + std::to_string(s.ageSeconds) + "s old";
    std::string out = "pid " + std::to_string(s.info.pid);
    if (!s.info.tag.empty())
        out += " (tag \"" + s.info.tag + "\")";
    out += ", age " + std::to_string(s.ageSeconds) + "s, " + (s.holderAlive ? "alive" : "not running");
    if (s.stale)
        out += ", stale";
    return out;
}

nlohmann::json statusJson(const std::string& path, const LockStatus& s)
{
    nlohmann::json j;
    j["path"] = path;
    j["locked"] = s.exists;
    if (s.exists && s.corrupt) {
        j["corrupt"] = true;
        j["error"] = s.corruptReason;
        j["age"] = s.ageSeconds;
        j["stale"] = s.stale;
    } else if (s.exists) {
        j["corrupt"] = false;
        j["pid"] = s.info.pid;
        j["timestamp"] = s.info.timestamp;
        if (!s.info.tag.empty())
            j["tag"] = s.info.tag;
        else
            j["tag"] = nullptr;
        j["age"] = s.ageSeconds;
        j["alive"] = s.holderAlive;
        j["stale"] = s.stale;
    }
    return j;
}

void printJson(const nlohmann::json& j)
{
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

int fail(const Error& e)
{
    std::cerr << "tollgate: " << e.describe() << '\n';
    if (e.kind == ErrorKind::Usage)
        return EXIT_USAGE;
    if (e.kind == ErrorKind::Timeout || e.kind == ErrorKind::Busy)
        return EXIT_REFUSED;
    return EXIT_IO;
}

int usageError(const std::string& message)
{
    std::cerr << "tollgate lock: " << message << "\n" << LockCommand::usage();
    return EXIT_USAGE;
}

LockFile::Deadline deadlineAfter(double seconds)
{
    const auto d = std::chrono::duration<double>(seconds);
    return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
}

int reportAcquire(const Settings& s, const Result<AcquireOutcome>& r, bool waited)
{
    if (!r)
        return fail(r.error());
    if (r->acquired) {
        if (s.json) {
            nlohmann::json j;
            j["path"] = s.path;
            j["acquired"] = true;
            j["pid"] = r->written.pid;
            j["timestamp"] = r->written.timestamp;
            j["tag"] = r->written.tag.empty() ? nlohmann::json(nullptr) : nlohmann::json(r->written.tag);
            j["took_over_stale"] = r->tookOverStale;
            printJson(j);
        } else if (!s.quiet) {
            std::cout << "acquired " << s.path << " (holder pid " << r->written.pid << ")"
                      << (r->tookOverStale ? ", after removing a stale lock" : "") << '\n';
        }
        return EXIT_OK;
    }
    if (s.json) {
        auto j = statusJson(s.path, r->holder);
        j["acquired"] = false;
        j["timed_out"] = waited;
        printJson(j);
    }
    if (!s.quiet) {
        std::cerr << "tollgate: " << s.path << ": " << (waited ? "timed out; still held by " : "held by ")
                  << describeHolder(r->holder) << '\n';
    }
    return EXIT_REFUSED;
}

int doStatus(const Settings& s, const LockFile& lock)
{
    auto r = lock.status(s.staleSeconds);
    if (!r)
        return fail(r.error());
    if (s.json) {
        printJson(statusJson(s.path, *r));
    } else if (!s.quiet) {
        std::cout << "locked: " << (r->exists ? "true" : "false") << '\n';
        if (r->exists && r->corrupt) {
            std::cout << "corrupt: " << r->corruptReason << "\nage: " << r->ageSeconds
                      << "s (file modification time)\nstale: " << (r->stale ? "true" : "false") << '\n';
        } else if (r->exists) {
            std::cout << "pid: " << r->info.pid << "\ntimestamp: " << r->info.timestamp << '\n';
            if (!r->info.tag.empty())
                std::cout << "tag: " << r->info.tag << '\n';
            std::cout << "age: " << r->ageSeconds << "s\nholder: " << (r->holderAlive ? "alive" : "not running")
                      << "\nstale: " << (r->stale ? "true" : "false") << '\n';
        }
    }
    if (r->exists && r->corrupt) {
        std::cerr << "tollgate: " << s.path << ": corrupt lock file: " << r->corruptReason
                  << " (remove it with `tollgate lock release --force` or `tollgate lock clean`)\n";
        return EXIT_IO;
    }
    return EXIT_OK;
}

int doRelease(const Settings& s, const LockFile& lock)
{
    const std::int64_t owner = s.pid > 0 ? s.pid : ProcessProbe::parentPid();
    auto r = lock.release(owner, s.force);
    if (!r)
        return fail(r.error());
    if (s.json) {
        auto j = statusJson(s.path, r->before);
        j["released"] = r->state == ReleaseState::Released;
        j["result"] = r->state == ReleaseState::Released ? "released"
            : r->state == ReleaseState::NotLocked         ? "not-locked"
                                                          : "not-owner";
        printJson(j);
    }
    switch (r->state) {
    case ReleaseState::Released:
        if (!s.quiet && !s.json)
            std::cout << "released " << s.path << " (was " << describeHolder(r->before) << ")\n";
        return EXIT_OK;
    case ReleaseState::NotLocked:
        if (!s.quiet)
            std::cerr << "tollgate: " << s.path << ": not locked\n";
        return EXIT_REFUSED;
    case ReleaseState::NotOwner:
        if (!s.quiet)
            std::cerr << "tollgate: " << s.path << ": not released: held by " << describeHolder(r->before)
                      << ", not by pid " << owner << " (use --pid PID for another holder, or --force)\n";
        return EXIT_REFUSED;
    }
    return EXIT_IO;
}

int doWait(const Settings& s, const LockFile& lock)
{
    auto r = lock.waitUntilFree(s.staleSeconds, deadlineAfter(s.timeoutSeconds));
    if (!r)
        return fail(r.error());
    const bool free = !r->exists || r->stale;
    if (s.json) {
        auto j = statusJson(s.path, *r);
        j["free"] = free;
        printJson(j);
    } else if (!s.quiet) {
        if (free)
            std::cout << s.path << ": free\n";
        else
            std::cerr << "tollgate: " << s.path << ": timed out; still held by " << describeHolder(*r) << '\n';
    }
    return free ? EXIT_OK : EXIT_REFUSED;
}

int doClean(const Settings& s, const LockFile& lock)
{
    auto r = lock.clean(s.staleSeconds);
    if (!r)
        return fail(r.error());
    if (s.json) {
        nlohmann::json j;
        j["path"] = s.path;
        j["removed_lock"] = r->removedLock;
        j["removed_temp_files"] = r->removedTemps;
        j["lock"] = statusJson(s.path, r->lock);
        printJson(j);
    } else if (!s.quiet) {
        if (r->removedLock)
            std::cout << "removed stale lock " << s.path << " (was " << describeHolder(r->lock) << ")\n";
        else if (r->lock.exists)
            std::cout << "kept " << s.path << ": " << describeHolder(r->lock) << '\n';
        for (const auto& t : r->removedTemps)
            std::cout << "removed orphaned temp file " << t << '\n';
        if (!r->removedLock && r->removedTemps.empty())
            std::cout << "nothing to clean\n";
    }
    return EXIT_OK;
}

int doRun(const Settings& s, const LockFile& lock)
{
    LockOptions o;
    o.tag = s.tag;
    o.staleSeconds = s.staleSeconds;
    // tollgate itself lives as long as the command: record it, so a SIGKILL makes the lock
    // reclaimable instead of tying it to a long-lived parent shell.
    o.holderPid = s.pid > 0 ? s.pid : ProcessProbe::selfPid();
    auto r = lock.acquire(o, deadlineAfter(s.timeoutSeconds));
    if (!r || !r->acquired) {
        const int code = reportAcquire(s, r, true);
        return code == EXIT_REFUSED ? s.conflictExit : code;
    }

    // Only now: while waiting for the lock, Ctrl-C should simply end tollgate.
    ChildRunner::installSignalHandlers();
    const int code = ChildRunner::run(s.commandLine, { { "TOLLGATE_LOCK_PATH", s.path } });
    auto rel = lock.release(r->written.pid, false);
    if (!rel)
        std::cerr << "tollgate: " << rel.error().describe() << '\n';
    else if (rel->state != ReleaseState::Released)
        std::cerr << "tollgate: " << s.path << ": the lock was no longer ours when the command ended ("
                  << describeHolder(rel->before) << ")\n";
    return code;
}

} // namespace

const char* LockCommand::usage()
{
    return "usage: tollgate lock COMMAND PATH [options]\n"
           "commands:\n"
           "  try-acquire (try)  take the lock now or exit 1\n"
           "  acquire            wait for the lock (--timeout SECONDS, default 60)\n"
           "  release            remove the lock if you hold it (--force: whoever holds it)\n"
           "  status             show the holder\n"
           "  wait               wait until the lock is free (--timeout SECONDS, default 60)\n"
           "  clean              remove a stale lock and orphaned temp files of dead writers\n"
           "  run PATH -- CMD... hold the lock while CMD runs; exit with CMD's code\n"
           "options:\n"
           "  --tag TEXT         description stored in the lock (control characters become spaces)\n"
           "  --stale SECONDS    a lock older than this whose holder is dead may be taken over\n"
           "                     (default 3600, 0 never)\n"
           "  --timeout SECONDS  how long acquire/wait/run may wait (fractions allowed)\n"
           "  --pid PID          the holder to record/release (default: the process that ran tollgate;\n"
           "                     for run: tollgate itself)\n"
           "  --force            release: remove the lock whoever holds it (also a corrupt one)\n"
           "  --conflict-exit N  run: exit code when the lock could not be had (default 1)\n"
           "  --json             machine-readable output\n"
           "  -q, --quiet        no messages\n"
           "exit codes: 0 ok, 1 held / timed out / not the owner, 2 usage, 3 I/O or corrupt file\n";
}

int LockCommand::run(const std::vector<std::string>& args)
{
    ArgParser p({
        { "tag", true },
        { "stale", true },
        { "timeout", true },
        { "pid", true },
        { "force", false },
        { "conflict-exit", true },
        { "json", false },
        { "quiet", false, 'q' },
        { "help", false, 'h' },
    });
    if (auto ok = p.parse(args); !ok)
        return usageError(ok.error().message);
    if (p.has("help")) {
        std::cout << usage();
        return EXIT_OK;
    }
    const auto& pos = p.positional();
    if (pos.empty())
        return usageError("missing COMMAND");
    Settings s;
    s.command = pos[0];
    if (s.command == "try")
        s.command = "try-acquire";
    static const std::vector<std::string> known { "try-acquire", "acquire", "release", "status", "wait", "clean", "run" };
    if (std::find(known.begin(), known.end(), s.command) == known.end())
        return usageError("unknown command '" + pos[0] + "'");
    if (pos.size() < 2)
        return usageError("missing PATH");
    if (pos.size() > 2)
        return usageError("unexpected argument '" + pos[2] + "'");
    s.path = pos[1];
    if (s.command == "run") {
        if (p.trailing().empty())
            return usageError("run needs a command after --");
        s.commandLine = p.trailing();
    } else if (p.sawDoubleDash()) {
        return usageError("only run takes a command after --");
    }
    s.json = p.has("json");
    s.quiet = p.has("quiet");
    s.force = p.has("force");
    if (s.force && s.command != "release")
        return usageError("--force only applies to release");
    if (auto t = p.value("tag"))
        s.tag = *t;
    if (auto v = p.value("stale")) {
        auto n = ArgParser::parseInteger("stale", *v, 0, INT64_MAX / 4);
        if (!n)
            return usageError(n.error().message);
        s.staleSeconds = *n;
    }
    if (auto v = p.value("timeout")) {
        auto n = ArgParser::parseSeconds("timeout", *v);
        if (!n)
            return usageError(n.error().message);
        // Far beyond any real wait, and still representable as a steady_clock deadline.
        s.timeoutSeconds = std::min(*n, 10.0 * 365 * 24 * 3600);
    }
    if (auto v = p.value("pid")) {
        auto n = ArgParser::parseInteger("pid", *v, 1, INT32_MAX);
        if (!n)
            return usageError(n.error().message);
        s.pid = *n;
    }
    if (auto v = p.value("conflict-exit")) {
        auto n = ArgParser::parseInteger("conflict-exit", *v, 0, 255);
        if (!n)
            return usageError(n.error().message);
        s.conflictExit = static_cast<int>(*n);
    }

    const SystemClock clock;
    const ProcessProbe probe;
    auto lock = LockFile::open(s.path, clock, probe);
    if (!lock)
        return fail(lock.error());

    if (s.command == "status")
        return doStatus(s, *lock);
    if (s.command == "release")
        return doRelease(s, *lock);
    if (s.command == "wait")
        return doWait(s, *lock);
    if (s.command == "clean")
        return doClean(s, *lock);
    if (s.command == "run")
        return doRun(s, *lock);

    LockOptions o;
    o.tag = s.tag;
    o.staleSeconds = s.staleSeconds;
    // A script's lock should die with the script, so the default holder is our parent.
    o.holderPid = s.pid > 0 ? s.pid : ProcessProbe::parentPid();
    if (s.command == "try-acquire")
        return reportAcquire(s, lock->tryAcquire(o), false);
    return reportAcquire(s, lock->acquire(o, deadlineAfter(s.timeoutSeconds)), true);
}

} // namespace tollgate::cli
