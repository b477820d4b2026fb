#include "proxy/bodybudget.h"

#include <malloc.h>

namespace tollgate::proxy {

void BodyBudget::setLimit(std::size_t limit)
{
    m_limit = limit;
    (void)::mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD); // 0 when refused (not glibc's): harmless
}

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
