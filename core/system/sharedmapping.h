#pragma once

// SharedMapping: a file mapped MAP_SHARED that a truncation cannot turn into a crash.
//
// The hazard: a load or store on a page of a shared file mapping that now lies past the end
// of the file raises SIGBUS, whose default action kills the process. Any process of the same
// user can truncate a file that every process of a home maps (`: > HOME/doorbell`), and so
// could kill a running proxy and every queued waiter with it.
//
// The remedy: every SharedMapping registers its address range in a fixed table that one
// process-wide SIGBUS handler reads. A fault the kernel raises inside a registered range is
// answered by mapping anonymous zero pages over the whole range (MAP_FIXED, so the addresses
// stay valid) and marking that mapping broken; the faulting instruction then re-executes on
// the private pages and succeeds. The owner sees broken() at its next operation and maps the
// file again. The private pages are shared with nobody, so what such a mapping holds must
// never decide safety (the doorbell's words are hints; the flock on state.lock is the lock).
//
// Any other SIGBUS goes on as before: to the handler that was installed before ours (a
// sanitizer's, a test framework's), or to the default action, which kills the process. A
// SIGBUS sent by kill(2) is never taken for a truncation.
//
// The handler is async-signal-safe: it reads the table through lock-free atomics, and its
// only calls are mmap (as a raw system call) and, when it passes the signal on to the
// default action, sigaction and raise. A range is taken out of the table before it is
// unmapped, so the handler never maps over an address that is no longer ours (unless a
// mapping is used while it is being destroyed, which is a bug of its own).
//
// futex(2) on a truncated page answers EFAULT instead of raising SIGBUS: see futex.h.

#include "base/result.h"
#include "system/fd.h"

#include <cstddef>

namespace tollgate {

class SharedMapping
{
public:
    // Mappings alive at once in a process (a fixed table: the handler cannot allocate).
    static constexpr int MAX_MAPPINGS = 256;

    SharedMapping() = default;
    ~SharedMapping();
    SharedMapping(SharedMapping&& other) noexcept;
    SharedMapping& operator=(SharedMapping&& other) noexcept;
    SharedMapping(const SharedMapping&) = delete;
    SharedMapping& operator=(const SharedMapping&) = delete;

    // Maps `bytes` of `fd` from offset 0, read-write and shared, and installs the SIGBUS
    // handler (once per process). The mapping outlives the descriptor.
    static Result<SharedMapping> map(const Fd& fd, std::size_t bytes);

    [[nodiscard]] void* data() const { return m_data; }
    [[nodiscard]] std::size_t size() const { return m_bytes; }
    // A fault on it was answered with private zero pages (the file was truncated under us):
    // it no longer shares anything with other processes. Map the file again.
    [[nodiscard]] bool broken() const;

private:
    void unmap();

    void* m_data = nullptr;
    std::size_t m_bytes = 0;
    int m_slot = -1; // its row in the handler's table
};

} // namespace tollgate
