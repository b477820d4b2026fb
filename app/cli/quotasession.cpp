// QuotaSession: opening a command's home (write side, read side) and peeking at it.

#include "quotasession.h"

#include "backend/storefactory.h"

#include <cerrno>
#include <sys/stat.h>

namespace tollgate::cli {

QuotaSession::QuotaSession(std::string command, const CliOptions::Common& common)
    : m_console(std::move(command), common.json, common.quiet)
    , m_homeOption(common.home)
{
}

QuotaSession::~QuotaSession()
{
    // Warnings of a store nobody printed a result for yet (a failure path) still reach stderr.
    m_console.collectWarnings(m_store.get());
}

std::string QuotaSession::who()
{
    return "tollgate CLI (pid " + std::to_string(ProcessProbe::selfPid()) + ", parent "
        + std::to_string(ProcessProbe::parentPid()) + ")";
}

StopCode QuotaSession::needProvider(const std::string& provider)
{
    if (provider.empty())
        return m_console.usage("missing PROVIDER");
    return std::nullopt;
}

StopCode QuotaSession::open()
{
    auto spec = HomeSpec::resolve(m_homeOption);
    if (!spec)
        return m_console.fail(spec.error());
    return open(*spec);
}

StopCode QuotaSession::openUnlessMissing(bool& missing)
{
    missing = false;
    auto spec = HomeSpec::resolve(m_homeOption);
    if (!spec)
        return m_console.fail(spec.error());
    m_home = spec->text();
    struct stat st
    {
    };
    // ENOENT also covers a missing parent (a mistyped --home): nothing to act on either.
    // A Redis home is only known to exist by asking the server: opened as always.
    if (spec->isDirectory() && ::lstat(spec->dir().c_str(), &st) != 0 && errno == ENOENT) {
        missing = true;
        return std::nullopt;
    }
    return open(*spec);
}

int QuotaSession::failUnknownOnMissingHome(const std::string& provider)
{
    return m_console.fail(Error::make(ErrorKind::Usage, "",
        "unknown provider '" + provider + "'; no Tollgate home at " + m_home
            + " yet, so no providers (add one with: tollgate limits set PROVIDER --requests N --window "
              "SECONDS)"));
}

StopCode QuotaSession::open(const HomeSpec& spec)
{
    m_home = spec.text();
    auto s = StoreFactory::openBackend(spec, m_clock, m_probe, nullptr, m_redisTimeout);
    if (!s)
        return m_console.fail(s.error());
    m_store = std::move(s).value();
    m_console.setStore(m_store.get());
    m_limiter = std::make_unique<QuotaLimiter>(*m_store, m_clock, m_probe);
    return std::nullopt;
}

StopCode QuotaSession::openExisting(bool& exists)
{
    exists = false;
    auto spec = HomeSpec::resolve(m_homeOption);
    if (!spec)
        return m_console.fail(spec.error());
    m_home = spec->text();
    auto r = StoreFactory::openReader(*spec);
    if (!r && r.error().kind == ErrorKind::NotFound)
        return std::nullopt;
    if (!r)
        return m_console.fail(r.error());
    m_reader = std::move(r).value();
    if (!spec->isDirectory()) {
        // A Redis home exists once something ran there: only a look at the server tells.
        auto look = m_reader->snapshot();
        if (!look && look.error().kind == ErrorKind::NotFound)
            return std::nullopt;
        if (!look)
            return m_console.fail(look.error());
        m_firstLook = std::move(look).value(); // the command's first peek (one round trip, not two)
    }
    exists = true;
    return std::nullopt;
}

void QuotaSession::sayNoHome() const
{
    // A directory that is not there has never been a home. A Redis home with no limits, no
    // state and no marker may be new — or a server that lost everything (a restart without
    // persistence, FLUSHALL): say both, and how to come back from the second.
    if (m_home.rfind("redis://", 0) == 0) {
        m_console.say("no Tollgate home at " + m_home
            + ": no limits, no state — a new home (nothing has run here), or Redis lost its data (a restart "
              "without persistence, a flush); if it ran before, restore the limits with: tollgate limits "
              "import FILE");
        return;
    }
    m_console.say("no Tollgate home at " + m_home + " yet (nothing has run here)");
}

Result<QuotaView> QuotaSession::peek(bool needState)
{
    Result<QuotaView> view = m_firstLook ? Result<QuotaView>(std::move(*m_firstLook)) : m_reader->snapshot();
    m_firstLook.reset();
    if (!view)
        return view.error();
    const bool limitsCorrupt = view->limitsCorrupt;
    if (!view->corruptFile.empty() && (limitsCorrupt || needState)) {
        std::string message = view->corruptReason;
        const bool redis = m_home.rfind("redis://", 0) == 0;
        if (!limitsCorrupt && redis)
            message += " (the next command that changes the quota sets it aside in the home's 'corrupt' key"
                       " and starts that provider from a conservative state)";
        else if (!limitsCorrupt)
            message += " (the next command that changes the quota sets it aside as " + view->corruptFile
                + ".corrupt-TIME and starts from a conservative state)";
        return Error::make(ErrorKind::Corrupt, view->corruptFile, message);
    }
    return view;
}

} // namespace tollgate::cli
