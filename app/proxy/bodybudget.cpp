#include "proxy/bodybudget.h"

namespace tollgate::proxy {

bool BodyBudget::take(std::size_t n)
{
    std::size_t used = m_used.load();
    do {
        if (n > m_limit || used > m_limit - n)
            return false;
    } while (!m_used.compare_exchange_weak(used, used + n));
    return true;
}

} // namespace tollgate::proxy
