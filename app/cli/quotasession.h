#pragma once

// QuotaSession: one shared-quota command's hold on its home, made when the command runs: its
// Console, the clock and process probe, and the store it opened. Two ways in:
//   - the write side (open, openUnlessMissing): a backend and a QuotaLimiter; open creates
//     the home when needed, openUnlessMissing leaves a missing home uncreated;
//   - the read side (openExisting, peek): a QuotaReader, never creating anything.
// The opening steps return a StopCode: the exit code to stop with, or nothing to go on.

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "clioptions.h"
#include "console.h"
#include "store/homespec.h"
#include "store/quotareader.h"
#include "store/quotaview.h"
#include "store/redisconnection.h"
#include "system/processprobe.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace tollgate::cli {

// What a step of a command returns: the exit code to stop with (its message already
// printed), or std::nullopt to go on.
using StopCode = std::optional<int>;

class QuotaSession
{
public:
    // command: the words after "tollgate", for messages; common: --home, --json, -q.
    QuotaSession(std::string command, const CliOptions::Common& common);
    ~QuotaSession();
    QuotaSession(const QuotaSession&) = delete;
    QuotaSession& operator=(const QuotaSession&) = delete;

    // How the CLI names itself in the history of a change it makes.
    [[nodiscard]] static std::string who();

    [[nodiscard]] Console& console() { return m_console; }
    [[nodiscard]] const Console& console() const { return m_console; }
    [[nodiscard]] const SystemClock& clock() const { return m_clock; }
    [[nodiscard]] const ProcessProbe& probe() const { return m_probe; }
    // As shown and passed on: the directory or the URL (set by the opening functions).
    [[nodiscard]] const std::string& home() const { return m_home; }
    // After open or openUnlessMissing went on with a home.
    [[nodiscard]] QuotaLimiter& limiter() { return *m_limiter; }
    // After openExisting found the home.
    [[nodiscard]] QuotaReader& reader() { return *m_reader; }
    // Each Redis operation's deadline; acquire and run bound it by their --timeout.
    void setRedisTimeout(std::chrono::milliseconds timeout) { m_redisTimeout = timeout; }

    // A request's PROVIDER is required: a usage error when `provider` is empty.
    [[nodiscard]] StopCode needProvider(const std::string& provider);

    // The write side: creates the home when needed (a named home only as its last directory,
    // see StoreFactory::openBackend).
    [[nodiscard]] StopCode open();
    // The write side for commands that can do nothing on a home that does not exist yet
    // (release, a report or a switch of a named provider, which has no limits there): such a
    // home is left uncreated and `missing` is set, for the command to answer as the empty
    // home would. Otherwise as open().
    [[nodiscard]] StopCode openUnlessMissing(bool& missing);
    // What a command naming a provider answers on a missing home: no limits, so no provider
    // (the same refusal and exit code as on an empty home).
    int failUnknownOnMissingHome(const std::string& provider);

    // The read side: never creates anything. Goes on with `exists` set and reader() usable
    // when the home exists, or (exists false) when it does not.
    [[nodiscard]] StopCode openExisting(bool& exists);
    void sayNoHome() const;
    // A look at the home without a transaction: names a corrupt file as an error.
    [[nodiscard]] Result<QuotaView> peek(bool needState);

private:
    [[nodiscard]] StopCode open(const HomeSpec& spec);

    Console m_console;
    const SystemClock m_clock;
    const ProcessProbe m_probe;
    const std::optional<std::string> m_homeOption; // --home as given
    std::string m_home;
    std::unique_ptr<QuotaBackend> m_store;
    std::unique_ptr<QuotaReader> m_reader;
    std::optional<QuotaView> m_firstLook; // taken by openExisting on a Redis home, used by the first peek
    std::unique_ptr<QuotaLimiter> m_limiter;
    std::chrono::milliseconds m_redisTimeout = RedisConnection::DEFAULT_TIMEOUT;
};

} // namespace tollgate::cli
