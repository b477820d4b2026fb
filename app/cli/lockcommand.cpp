#include "lockcommand.h"

#include "base/systemclock.h"
#include "childrunner.h"
#include "clioptions.h"
#include "console.h"
#include "exitcodes.h"
#include "lock/lockfile.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <pwd.h>
#include <unistd.h>
#include <vector>

namespace tollgate::cli {

namespace {

struct Settings
{
    std::string command;
    std::string path;
    std::string tag;
    std::int64_t staleSeconds = 3600;
    double timeoutSeconds = CliOptions::DEFAULT_TIMEOUT_SECONDS;
    std::int64_t pid = 0; // 0: default holder
    bool json = false;
    bool quiet = false;
    bool force = false;
    int conflictExit = EXIT_REFUSED;
    std::vector<std::string> commandLine; // for run
};

// Defined below; an unreadable lock is described by its owner, the only thing known.
std::string describeOwner(std::int64_t uid);

// Why an unreadable lock stays: said wherever Tollgate declines to touch one.
constexpr const char* UNREADABLE_KEPT
    = "Tollgate cannot read it, so it cannot judge the holder and never removes "
      "or takes over this lock (its owner or root can remove it)";

std::string describeHolder(const LockStatus& s)
{
    if (!s.exists)
        return "free";
    if (s.unreadable)
        return "an unknown pid (the lock file of " + describeOwner(s.ownerUid)
            + " is not readable by us), age " + std::to_string(s.ageSeconds) + "s";
    if (s.corrupt)
        return "a corrupt lock file (" + s.corruptReason + "), " + std::to_string(s.ageSeconds) + "s old";
    std::string out = "pid " + std::to_string(s.info.pid);
    if (!s.info.tag.empty())
        out += " (tag \"" + s.info.tag + "\")";
    out += ", age " + std::to_string(s.ageSeconds) + "s, " + (s.holderAlive ? "alive" : "not running");
    if (s.stale)
        out += ", stale";
    if (!s.suspicion.empty())
        out += "; suspicious: " + s.suspicion;
    return out;
}

// The user name of a uid, when the password database knows it.
std::optional<std::string> userName(std::int64_t uid)
{
    if (uid < 0)
        return std::nullopt;
    long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
    std::vector<char> buf(size > 0 ? static_cast<std::size_t>(size) : 4096);
    struct passwd pw
    {
    };
    struct passwd* found = nullptr;
    int rc = 0;
    while ((rc = ::getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found)) == ERANGE
        && buf.size() < (1U << 20))
        buf.resize(buf.size() * 2);
    if (rc != 0 || !found || !found->pw_name)
        return std::nullopt;
    return std::string(found->pw_name);
}

// "uid 1000 (alice)", "uid 4242" without a name, "unknown".
std::string describeOwner(std::int64_t uid)
{
    if (uid < 0)
        return "unknown";
    const auto name = userName(uid);
    return "uid " + std::to_string(uid) + (name ? " (" + *name + ")" : std::string());
}

nlohmann::json statusJson(const std::string& path, const LockStatus& s)
{
    nlohmann::json j;
    j["path"] = path;
    j["locked"] = s.exists;
    if (s.exists) {
        j["owner_uid"] = s.ownerUid >= 0 ? nlohmann::json(s.ownerUid) : nlohmann::json(nullptr);
        const auto name = userName(s.ownerUid);
        j["owner_name"] = name ? nlohmann::json(*name) : nlohmann::json(nullptr);
        j["suspicion"] = s.suspicion.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.suspicion);
    }
    if (s.exists)
        j["readable"] = !s.unreadable;
    if (s.exists && s.unreadable) {
        j["corrupt"] = false;
        j["pid"] = nullptr; // unknown: the content cannot be read
        j["timestamp"] = nullptr;
        j["tag"] = nullptr;
        j["age"] = s.ageSeconds;
        j["alive"] = nullptr;
        j["stale"] = false;
    } else if (s.exists && s.corrupt) {
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

LockFile::Deadline deadlineAfter(double seconds)
{
    const auto d = std::chrono::duration<double>(seconds);
    return std::chrono::steady_clock::now()
        + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
}

int reportAcquire(const Settings& s, Console& console, const Result<AcquireOutcome>& r, bool waited)
{
    if (!r)
        return console.fail(r.error());
    if (r->acquired) {
        nlohmann::json j;
        j["path"] = s.path;
        j["acquired"] = true;
        j["pid"] = r->written.pid;
        j["timestamp"] = r->written.timestamp;
        j["tag"] = r->written.tag.empty() ? nlohmann::json(nullptr) : nlohmann::json(r->written.tag);
        j["took_over_stale"] = r->tookOverStale;
        console.say("acquired " + s.path + " (holder pid " + std::to_string(r->written.pid) + ")"
            + (r->tookOverStale ? ", after removing a stale lock" : ""));
        console.emit(j);
        return EXIT_OK;
    }
    auto j = statusJson(s.path, r->holder);
    j["acquired"] = false;
    j["timed_out"] = waited;
    console.tell("tollgate: " + s.path + ": " + (waited ? "timed out; still held by " : "held by ")
        + describeHolder(r->holder));
    console.emit(j);
    return EXIT_REFUSED;
}

int doStatus(const Settings& s, Console& console, const LockFile& lock)
{
    auto r = lock.status(s.staleSeconds);
    if (!r)
        return console.fail(r.error());
    console.say(std::string("locked: ") + (r->exists ? "true" : "false"));
    if (r->exists && r->unreadable) {
        console.say("pid: unknown (the lock file is not readable by us)");
        console.say("age: " + std::to_string(r->ageSeconds) + "s (file modification time)");
        console.say("stale: false (" + std::string(UNREADABLE_KEPT) + ")");
    } else if (r->exists && r->corrupt) {
        console.say("corrupt: " + r->corruptReason);
        console.say("age: " + std::to_string(r->ageSeconds) + "s (file modification time)");
        console.say(std::string("stale: ") + (r->stale ? "true" : "false"));
    } else if (r->exists) {
        console.say("pid: " + std::to_string(r->info.pid));
        console.say("timestamp: " + std::to_string(r->info.timestamp));
        if (!r->info.tag.empty())
            console.say("tag: " + r->info.tag);
        console.say("age: " + std::to_string(r->ageSeconds) + "s");
        console.say(std::string("holder: ") + (r->holderAlive ? "alive" : "not running"));
        console.say(std::string("stale: ") + (r->stale ? "true" : "false"));
    }
    if (r->exists) {
        console.say("owner: " + describeOwner(r->ownerUid));
        if (!r->suspicion.empty())
            console.say("suspicious: " + r->suspicion);
    }
    console.emit(statusJson(s.path, *r));
    if (r->exists && r->corrupt) {
        console.tell("tollgate: " + s.path + ": corrupt lock file: " + r->corruptReason
            + " (remove it with `tollgate lock release --force` or `tollgate lock clean`)");
        return EXIT_IO;
    }
    return EXIT_OK;
}

int doRelease(const Settings& s, Console& console, const LockFile& lock)
{
    const std::int64_t owner = s.pid > 0 ? s.pid : ProcessProbe::parentPid();
    auto r = lock.release(owner, s.force);
    if (!r)
        return console.fail(r.error());
    auto j = statusJson(s.path, r->before);
    j["released"] = r->state == ReleaseState::Released;
    j["result"] = r->state == ReleaseState::Released ? "released"
        : r->state == ReleaseState::NotLocked        ? "not-locked"
                                                     : "not-owner";
    console.emit(j);
    switch (r->state) {
    case ReleaseState::Released:
        console.say("released " + s.path + " (was " + describeHolder(r->before) + ")");
        return EXIT_OK;
    case ReleaseState::NotLocked:
        console.tell("tollgate: " + s.path + ": not locked");
        return EXIT_REFUSED;
    case ReleaseState::NotOwner:
        if (r->before.unreadable) {
            console.tell("tollgate: " + s.path + ": not released: held by " + describeHolder(r->before) + "; "
                + UNREADABLE_KEPT);
            return EXIT_REFUSED;
        }
        console.tell("tollgate: " + s.path + ": not released: held by " + describeHolder(r->before)
            + ", not by pid " + std::to_string(owner) + " (use --pid PID for another holder, or --force)");
        return EXIT_REFUSED;
    }
    return EXIT_IO;
}

int doWait(const Settings& s, Console& console, const LockFile& lock)
{
    auto r = lock.waitUntilFree(s.staleSeconds, deadlineAfter(s.timeoutSeconds));
    if (!r)
        return console.fail(r.error());
    const bool free = !r->exists || r->stale;
    auto j = statusJson(s.path, *r);
    j["free"] = free;
    if (free)
        console.say(s.path + ": free");
    else
        console.tell("tollgate: " + s.path + ": timed out; still held by " + describeHolder(*r));
    console.emit(j);
    return free ? EXIT_OK : EXIT_REFUSED;
}

int doClean(const Settings& s, Console& console, const LockFile& lock)
{
    auto r = lock.clean(s.staleSeconds);
    if (!r)
        return console.fail(r.error());
    if (r->removedLock)
        console.say("removed stale lock " + s.path + " (was " + describeHolder(r->lock) + ")");
    else if (r->lock.exists && r->lock.unreadable)
        console.say("kept " + s.path + ": " + describeHolder(r->lock) + "; " + UNREADABLE_KEPT);
    else if (r->lock.exists)
        console.say("kept " + s.path + ": " + describeHolder(r->lock));
    for (const auto& t : r->removedTemps)
        console.say("removed orphaned temp file " + t);
    if (!r->removedLock && r->removedTemps.empty())
        console.say("nothing to clean");
    nlohmann::json j;
    j["path"] = s.path;
    j["removed_lock"] = r->removedLock;
    j["removed_temp_files"] = r->removedTemps;
    j["lock"] = statusJson(s.path, r->lock);
    console.emit(j);
    return EXIT_OK;
}

int doRun(const Settings& s, Console& console, const LockFile& lock)
{
    // The command's keeper is the holder: it lives until the last process of the command is
    // gone, even when this runner is SIGKILLed (ChildRunner), so the lock is not free while
    // the command's tree still runs (nor tied to a long-lived shell). A keeper whose runner
    // died releases it once the tree is gone, as the owner it is recorded as: without that,
    // the dead keeper's lock would turn stale only after the stale timeout (an hour by
    // default). The release removes the lock only if it still names the keeper (--pid, a
    // takeover: left alone). A command that cannot run takes no lock (nor makes others wait).
    ChildRunner::Keeper keeper = ChildRunner::prepare(
        s.commandLine, [&lock] { (void)lock.release(static_cast<std::int64_t>(::getpid()), false); });
    if (!keeper.ok())
        return console.fail(Error::make(keeper.exitCode() == 127 ? ErrorKind::NotFound : ErrorKind::Io, "",
                                keeper.problem() + " (the lock was not taken)"),
            keeper.exitCode());
    LockOptions o;
    o.tag = s.tag;
    o.staleSeconds = s.staleSeconds;
    o.holderPid = s.pid > 0 ? s.pid : keeper.pid();
    auto r = lock.acquire(o, deadlineAfter(s.timeoutSeconds));
    if (!r || !r->acquired) {
        const int code = reportAcquire(s, console, r, true);
        return code == EXIT_REFUSED ? s.conflictExit : code;
    }

    // Only now: while waiting for the lock, Ctrl-C should simply end tollgate.
    ChildRunner::installSignalHandlers();
    const int code = ChildRunner::start(keeper, { { "TOLLGATE_LOCK_PATH", s.path } });
    auto rel = lock.release(r->written.pid, false);
    if (!rel)
        console.warn(rel.error().describe());
    else if (rel->state != ReleaseState::Released)
        console.warn(s.path + ": the lock was no longer ours when the command ended ("
            + describeHolder(rel->before) + ")");
    nlohmann::json j;
    j["path"] = s.path;
    j["exit_code"] = code;
    console.emit(j);
    return code;
}

struct Parsed
{
    std::string path;
    std::optional<std::string> tag;
    std::optional<std::int64_t> stale, pid, conflictExit;
    std::optional<double> timeout;
    bool force = false, json = false, quiet = false;
};

Parsed g_parsed;

int dispatch(const std::string& command, const CommandTable& table)
{
    const Parsed& p = g_parsed;
    Console console("lock " + command, p.json, p.quiet);
    if (p.path.empty())
        return console.usage("missing PATH");
    Settings s;
    s.command = command;
    s.path = p.path;
    s.tag = p.tag.value_or("");
    s.staleSeconds = p.stale.value_or(3600);
    // Far beyond any real wait, and still representable as a steady_clock deadline.
    s.timeoutSeconds = std::min(p.timeout.value_or(CliOptions::DEFAULT_TIMEOUT_SECONDS), CliOptions::MAX_TIMEOUT_SECONDS);
    s.pid = p.pid.value_or(0);
    s.force = p.force;
    s.json = p.json;
    s.quiet = p.quiet;
    s.conflictExit = static_cast<int>(p.conflictExit.value_or(EXIT_REFUSED));
    if (command == "run") {
        if (table.trailing.empty())
            return console.usage("run needs a command after --");
        s.commandLine = table.trailing;
    }

    const SystemClock clock;
    const ProcessProbe probe;
    auto lock = LockFile::open(s.path, clock, probe);
    if (!lock)
        return console.fail(lock.error());

    if (command == "status")
        return doStatus(s, console, *lock);
    if (command == "release")
        return doRelease(s, console, *lock);
    if (command == "wait")
        return doWait(s, console, *lock);
    if (command == "clean")
        return doClean(s, console, *lock);
    if (command == "run")
        return doRun(s, console, *lock);

    LockOptions o;
    o.tag = s.tag;
    o.staleSeconds = s.staleSeconds;
    // A script's lock should die with the script, so the default holder is our parent.
    o.holderPid = s.pid > 0 ? s.pid : ProcessProbe::parentPid();
    if (command == "try-acquire")
        return reportAcquire(s, console, lock->tryAcquire(o), false);
    return reportAcquire(s, console, lock->acquire(o, deadlineAfter(s.timeoutSeconds)), true);
}

} // namespace

void LockCommand::addTo(CLI::App& app, CommandTable& table)
{
    Parsed& p = g_parsed;
    CLI::App* lock
        = app.add_subcommand("lock", "sema/semats-compatible lock files (tollgate lock COMMAND PATH ...)");
    lock->require_subcommand(0, 1);
    CliOptions::addJsonQuiet(lock, p.json, p.quiet);
    const CommandTable* t = &table;
    enum Takes { TAG = 1, STALE = 2, TIMEOUT = 4, PID = 8, FORCE = 16, CONFLICT = 32 };
    auto command = [&](const std::string& name, const std::string& help, int takes) {
        CLI::App* sub = lock->add_subcommand(name, help);
        sub->add_option("PATH", p.path, "the lock file");
        CliOptions::addJsonQuiet(sub, p.json, p.quiet);
        if (takes & TAG)
            CliOptions::addText(
                sub, "--tag", p.tag, "description stored in the lock (control characters become spaces)")
                ->type_name("TEXT");
        if (takes & STALE)
            CliOptions::addInteger(sub, "--stale", p.stale, 0, INT64_MAX / 4,
                "a lock older than this whose holder is dead may be taken over (default 3600, 0 never)")
                ->type_name("SECONDS");
        if (takes & TIMEOUT)
            CliOptions::addSeconds(sub, "--timeout", p.timeout, "how long to wait at most (default 60)");
        if (takes & PID)
            CliOptions::addInteger(sub, "--pid", p.pid, 1, INT32_MAX,
                name == "run" ? "the holder to record (default: tollgate itself)"
                              : "the holder (default: the process that ran tollgate)")
                ->type_name("PID");
        if (takes & FORCE)
            sub->add_flag("--force", p.force, "remove the lock whoever holds it (also a corrupt one)");
        if (takes & CONFLICT)
            CliOptions::addInteger(sub, "--conflict-exit", p.conflictExit, 0, 255,
                "exit code when the lock could not be had (default 1)")
                ->type_name("N");
        table.add(sub, [name, t] { return dispatch(name, *t); });
        return sub;
    };
    command("try-acquire", "take the lock now or exit 1", TAG | STALE | PID)->alias("try");
    command("acquire", "wait for the lock (--timeout, default 60 s)", TAG | STALE | TIMEOUT | PID);
    command("release", "remove the lock if you hold it (--force: whoever holds it)", PID | FORCE);
    command("status", "show the holder", STALE);
    command("wait", "wait until the lock is free (--timeout, default 60 s)", STALE | TIMEOUT);
    command("clean", "remove a stale lock and orphaned temp files of dead writers", STALE);
    command("run",
        "hold the lock while a command runs (tollgate lock run PATH -- CMD ARGS...); exit with its code",
        TAG | STALE | TIMEOUT | PID | CONFLICT);
}

} // namespace tollgate::cli
