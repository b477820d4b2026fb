#include "proxy/bodyshare.h"

namespace tollgate::proxy {

bool BodyShare::hold(std::size_t bytes)
{
    if (bytes <= m_held)
        return true;
    if (!m_budget.take(bytes - m_held))
        return false;
    m_held = bytes;
    return true;
}

void BodyShare::release()
{
    m_budget.give(m_held);
    m_held = 0;
}

} // namespace tollgate::proxy
