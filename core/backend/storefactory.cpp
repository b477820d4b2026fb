#include "backend/storefactory.h"

#include "backend/localquotabackend.h"
#include "backend/redisquotabackend.h"
#include "backend/redisquotareader.h"
#include "store/filequotastore.h"
#include "system/homedir.h"

#include <cerrno>
#include <sys/stat.h>

namespace tollgate {

namespace {

Error noLocalStore(const HomeSpec& home)
{
    return Error::make(ErrorKind::Unsupported, home.text(),
        "a Redis home has no local store: its operations run on the server (use openBackend)");
}

} // namespace

Result<std::unique_ptr<QuotaStore>> StoreFactory::openStore(const HomeSpec& home, const Clock& clock)
{
    if (!home.isDirectory())
        return noLocalStore(home);
    auto store = FileQuotaStore::open(
        home.dir(), clock, home.isDefault() ? HomeDir::Create::WithParents : HomeDir::Create::Home);
    if (!store)
        return store.error();
    return std::unique_ptr<QuotaStore>(std::move(store).value());
}

Result<std::unique_ptr<QuotaReader>> StoreFactory::openReader(
    const HomeSpec& home, const FileQuotaReader::Options& options)
{
    if (!home.isDirectory())
        return std::unique_ptr<QuotaReader>(std::make_unique<RedisQuotaReader>(home.redis()));
    struct stat st
    {
    };
    if (::lstat(home.dir().c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
        return Error::make(
            ErrorKind::NotFound, home.dir(), "no Tollgate home here yet (nothing has run here)");
    if (auto ok = HomeDir::check(home.dir()); !ok)
        return ok.error();
    return std::unique_ptr<QuotaReader>(std::make_unique<FileQuotaReader>(home.dir(), options));
}

Result<std::unique_ptr<QuotaBackend>> StoreFactory::openBackend(const HomeSpec& home, const Clock& clock,
    const ProcessProbe& probe, const Clock* redisTestClock, std::chrono::milliseconds redisTimeout)
{
    if (!home.isDirectory()) {
        auto backend = RedisQuotaBackend::open(home.redis(), probe, redisTestClock, redisTimeout);
        if (!backend)
            return backend.error();
        return std::unique_ptr<QuotaBackend>(std::move(backend).value());
    }
    auto store = openStore(home, clock);
    if (!store)
        return store.error();
    return std::unique_ptr<QuotaBackend>(
        std::make_unique<LocalQuotaBackend>(std::move(store).value(), clock, probe));
}

Result<std::unique_ptr<QuotaBackend>> StoreFactory::openBackend(
    std::string_view home, const Clock& clock, const ProcessProbe& probe)
{
    auto spec = HomeSpec::parse(home);
    if (!spec)
        return spec.error();
    return openBackend(*spec, clock, probe);
}

Result<std::unique_ptr<QuotaStore>> StoreFactory::openStore(std::string_view home, const Clock& clock)
{
    auto spec = HomeSpec::parse(home);
    if (!spec)
        return spec.error();
    return openStore(*spec, clock);
}

Result<std::unique_ptr<QuotaReader>> StoreFactory::openReader(
    std::string_view home, const FileQuotaReader::Options& options)
{
    auto spec = HomeSpec::parse(home);
    if (!spec)
        return spec.error();
    return openReader(*spec, options);
}

} // namespace tollgate
