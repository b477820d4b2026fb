#include "system/sharedmapping.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>

namespace tollgate {

namespace {

// One row per live mapping. A row is claimed (used) before its range is published (begin
// last), and its range withdrawn (begin first) before it is freed, so the handler sees a
// whole range or none.
struct Row
{
    std::atomic<bool> used { false };
    std::atomic<std::uintptr_t> begin { 0 }; // 0: no range
    std::atomic<std::uintptr_t> end { 0 };
    std::atomic<bool> broken { false };
};
static_assert(std::atomic<std::uintptr_t>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

Row g_rows[SharedMapping::MAX_MAPPINGS];
// SIGBUS as it was before ours: written once, before our handler can run.
struct sigaction g_previous
{
};
std::once_flag g_installed;

// mmap without any library wrapper in between (a sanitizer intercepts mmap): the handler
// must only make the system call.
void* rawMmap(void* addr, std::size_t length, int prot, int flags)
{
#if defined(SYS_mmap) && (defined(__x86_64__) || defined(__aarch64__))
    // (On 32-bit x86, SYS_mmap is the old mmap that takes its arguments in a struct.)
    return reinterpret_cast<void*>(::syscall(SYS_mmap, addr, length, prot, flags, -1, 0L));
#else
    return ::mmap(addr, length, prot, flags, -1, 0);
#endif
}

// Not ours: whatever SIGBUS did before we came.
void passOn(int sig, siginfo_t* info, void* context)
{
    // SIG_DFL and SIG_IGN are handler values whatever the flags say (SA_SIGINFO with SIG_DFL
    // is possible): only a real function is called.
    const bool function = g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN;
    if (function && (g_previous.sa_flags & SA_SIGINFO)) {
        g_previous.sa_sigaction(sig, info, context);
        return;
    }
    const bool fault = info && info->si_code > 0; // raised by the kernel, not sent
    if (g_previous.sa_handler == SIG_IGN && !fault)
        return; // a SIGBUS sent to a process that ignores it (a fault cannot be ignored)
    if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
        g_previous.sa_handler(sig);
        return;
    }
    // The default action: put it back and raise the signal again. It is blocked while we run,
    // so it is delivered as we return, and kills the process as it would have without us.
    struct sigaction dfl
    {
    };
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGBUS, &dfl, nullptr);
    ::raise(SIGBUS);
}

void onSigbus(int sig, siginfo_t* info, void* context)
{
    const int savedErrno = errno;
    // BUS_ADRERR: an access to a page with nothing behind it, which is what a page past the
    // end of a mapped file is. Not a sent signal (si_code <= 0), not a hardware error.
    if (info && info->si_code == BUS_ADRERR) {
        const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
        for (Row& row : g_rows) {
            // One range, read whole: end between two reads of begin (a row is published begin
            // last and withdrawn begin first), so a row freed and claimed again meanwhile is
            // seen as changed, never as one mapping's begin with another's end.
            const std::uintptr_t begin = row.begin.load();
            const std::uintptr_t end = row.end.load();
            if (begin == 0 || row.begin.load() != begin || at < begin || at >= end)
                continue;
            if (row.broken.exchange(true)) {
                // Another thread is answering this very fault: retry the instruction, which
                // faults again until its zero pages are in place.
                errno = savedErrno;
                return;
            }
            void* zero = reinterpret_cast<void*>(begin);
            if (rawMmap(zero, end - begin, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED)
                == zero) {
                errno = savedErrno;
                return;
            }
            break; // could not: the fault stays what it was
        }
    }
    errno = savedErrno;
    passOn(sig, info, context);
}

void install()
{
    struct sigaction ours
    {
    };
    ours.sa_sigaction = onSigbus;
    sigemptyset(&ours.sa_mask);
    // SA_ONSTACK: on a thread with an alternate signal stack (a sanitizer sets one up), use it.
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    ::sigaction(SIGBUS, &ours, &g_previous);
}

int claimRow(std::uintptr_t begin, std::uintptr_t end)
{
    for (int i = 0; i < SharedMapping::MAX_MAPPINGS; ++i) {
        bool used = false;
        if (g_rows[i].used.compare_exchange_strong(used, true)) {
            g_rows[i].broken.store(false);
            g_rows[i].end.store(end);
            g_rows[i].begin.store(begin);
            return i;
        }
    }
    return -1;
}

void freeRow(int i)
{
    g_rows[i].begin.store(0);
    g_rows[i].end.store(0);
    g_rows[i].broken.store(false);
    g_rows[i].used.store(false);
}

} // namespace

SharedMapping::~SharedMapping()
{
    unmap();
}

SharedMapping::SharedMapping(SharedMapping&& other) noexcept
    : m_data(std::exchange(other.m_data, nullptr))
    , m_bytes(std::exchange(other.m_bytes, 0))
    , m_slot(std::exchange(other.m_slot, -1))
{
}

SharedMapping& SharedMapping::operator=(SharedMapping&& other) noexcept
{
    if (this != &other) {
        unmap();
        m_data = std::exchange(other.m_data, nullptr);
        m_bytes = std::exchange(other.m_bytes, 0);
        m_slot = std::exchange(other.m_slot, -1);
    }
    return *this;
}

void SharedMapping::unmap()
{
    if (!m_data)
        return;
    if (m_slot >= 0)
        freeRow(m_slot); // first: the handler must not answer for an address we give back
    ::munmap(m_data, m_bytes);
    m_data = nullptr;
    m_bytes = 0;
    m_slot = -1;
}

Result<SharedMapping> SharedMapping::map(const Fd& fd, std::size_t bytes)
{
    std::call_once(g_installed, install);
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED)
        return Error::fromErrno(errno, fd.path(), "cannot map");
    SharedMapping m;
    m.m_data = p;
    m.m_bytes = bytes;
    const auto begin = reinterpret_cast<std::uintptr_t>(p);
    m.m_slot = claimRow(begin, begin + bytes);
    if (m.m_slot < 0) {
        // Unprotected, a truncation would kill us: refuse instead (a process holds a few).
        return Error::make(ErrorKind::Unsupported, fd.path(),
            "cannot map: more than " + std::to_string(MAX_MAPPINGS) + " shared mappings in this process");
    }
    return m;
}

bool SharedMapping::broken() const
{
    return m_slot >= 0 && g_rows[m_slot].broken.load();
}

} // namespace tollgate
