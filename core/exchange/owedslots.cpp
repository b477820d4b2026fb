#include "exchange/owedslots.h"

#include <utility>

namespace tollgate {

void OwedSlots::add(Owed owed)
{
    std::lock_guard lock(m_mutex);
    if (m_owed.size() >= MAX)
        m_owed.erase(m_owed.begin());
    m_owed.push_back(std::move(owed));
}

std::vector<OwedSlots::Owed> OwedSlots::takeAll()
{
    std::lock_guard lock(m_mutex);
    return std::exchange(m_owed, {});
}

bool OwedSlots::empty() const
{
    std::lock_guard lock(m_mutex);
    return m_owed.empty();
}

std::size_t OwedSlots::size() const
{
    std::lock_guard lock(m_mutex);
    return m_owed.size();
}

} // namespace tollgate
