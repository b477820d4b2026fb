#include "proxy/limiterpool.h"

#include "backend/storefactory.h"
#include "store/homespec.h"

#include <optional>

namespace tollgate::proxy {

void LimiterPool::setHome(std::string home)
{
    m_home = std::move(home);
    m_idle.reserve(MAX_IDLE); // give() runs in a destructor: it must not allocate
}

Result<std::unique_ptr<LimiterPool::Entry>> LimiterPool::take()
{
    // Entries too old to keep go after the mutex is let go of: destroying one may wait for its
    // store (a clean-up it owes, QuotaBackend::owesCleanUp), and every take and give would wait
    // with it.
    std::vector<std::unique_ptr<Entry>> aged;
    {
        std::lock_guard lock(m_mutex);
        while (!m_idle.empty()) {
            std::unique_ptr<Entry> e = std::move(m_idle.back());
            m_idle.pop_back();
            if (Steady::now() - e->opened < MAX_AGE)
                return e;
            aged.push_back(std::move(e));
        }
    }
    aged.clear();
    auto spec = HomeSpec::resolve(m_home.empty() ? std::nullopt : std::optional<std::string>(m_home));
    if (!spec)
        return spec.error();
    auto e = std::make_unique<Entry>();
    auto backend = StoreFactory::openBackend(*spec, e->clock, e->probe);
    if (!backend)
        return backend.error();
    e->backend = std::move(backend).value();
    e->limiter = std::make_unique<QuotaLimiter>(*e->backend, e->clock, e->probe);
    e->opened = Steady::now();
    e->directory = spec->isDirectory();
    m_directory = e->directory;
    return e;
}

void LimiterPool::give(std::unique_ptr<Entry> e)
{
    {
        std::lock_guard lock(m_mutex);
        if (m_idle.size() < MAX_IDLE) {
            m_idle.push_back(std::move(e));
            return;
        }
    }
    e.reset(); // not kept: destroyed outside the mutex (see take)
}

void LimiterPool::forgetIdle()
{
    // At most the entries idle now: one given back meanwhile worked, and is kept.
    std::size_t left = 0;
    {
        std::lock_guard lock(m_mutex);
        left = m_idle.size();
    }
    for (; left > 0; --left) {
        std::unique_ptr<Entry> e;
        {
            std::lock_guard lock(m_mutex);
            if (m_idle.empty())
                return;
            e = std::move(m_idle.front());
            m_idle.erase(m_idle.begin());
        }
        e.reset();
    }
}

} // namespace tollgate::proxy
