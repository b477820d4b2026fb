#pragma once

// BodyBudget: the bytes of request bodies all connections hold together (--max-buffered): a
// request takes its share as its body grows (BodyShare) and gives it back when it is done.
// Invariant: what is taken never exceeds the limit (a compare-and-swap loop, no lock: every
// connection asks as its body grows).

#include "proxy/proxyserver.h"

#include <atomic>
#include <cstddef>

namespace tollgate::proxy {

class BodyBudget
{
public:
    // Once, at the start (--max-buffered). It also has malloc map every buffer of
    // MMAP_THRESHOLD bytes or more (a held body, up to MAX_BODY_BYTES) on its own, so that
    // freeing it gives its memory back to the system: glibc's own threshold rises to the size
    // of the first such buffer freed (up to 32 MiB), and the next ones then stay resident in
    // its heaps after the burst (615-676 MiB after 8 bodies of 31 MiB, issue 26).
    void setLimit(std::size_t limit);
    static constexpr int MMAP_THRESHOLD = 1 << 20;
    [[nodiscard]] std::size_t limit() const { return m_limit; }
    // Takes `n` more bytes; false (nothing taken) when that would pass the limit.
    [[nodiscard]] bool take(std::size_t n);
    void give(std::size_t n) { m_used.fetch_sub(n); }

private:
    std::size_t m_limit = ProxyServer::MAX_BUFFERED_BYTES; // start() sets --max-buffered
    std::atomic<std::size_t> m_used { 0 };
};

} // namespace tollgate::proxy
