#include "proxy/connectionplaces.h"

namespace tollgate::proxy {

std::unique_ptr<ConnectionPlaces::Place> ConnectionPlaces::take(const net::any_io_executor& executor)
{
    if (m_taken >= m_capacity) {
        if (m_idle.empty())
            return nullptr;
        m_idle.front()->evict();
    }
    ++m_taken;
    return std::make_unique<Place>(*this, executor);
}

ConnectionPlaces::Place::~Place()
{
    leaveIdle();
    if (m_holds)
        --m_places.m_taken;
}

void ConnectionPlaces::Place::evict()
{
    leaveIdle();
    if (!m_holds)
        return;
    m_holds = false;
    --m_places.m_taken;
    m_evicted.expires_at(Steady::time_point::min()); // cancels the wait: it completes now
}

void ConnectionPlaces::Place::leaveIdle()
{
    if (!m_isIdle)
        return;
    m_places.m_idle.erase(m_at);
    m_isIdle = false;
}

ConnectionPlaces::Place::Idle::Idle(Place& place)
    : m_place(place)
{
    if (m_place.m_holds && !m_place.m_isIdle) {
        m_place.m_at = m_place.m_places.m_idle.insert(m_place.m_places.m_idle.end(), &m_place);
        m_place.m_isIdle = true;
    }
}

ConnectionPlaces::Place::Idle::~Idle()
{
    m_place.leaveIdle();
}

} // namespace tollgate::proxy
