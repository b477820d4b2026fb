#include "proxy/limiterlease.h"

namespace tollgate::proxy {

LimiterLease::~LimiterLease()
{
    if (m_entry && !failed()) {
        m_store.reset();
        m_pool.give(std::move(m_entry));
        return;
    }
    if (m_entry) {
        m_store.reset();
        m_entry.reset(); // closed, not kept
        m_pool.forgetIdle();
    }
}

bool LimiterLease::open(std::string& why)
{
    auto e = m_pool.take();
    if (!e) {
        why = e.error().describe();
        return false;
    }
    m_entry = std::move(e).value();
    m_store.emplace(*m_entry->limiter, m_entry->probe);
    return true;
}

} // namespace tollgate::proxy
