#include "doorbell.h"

#include "fd.h"

#include <cerrno>
#include <climits>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace tollgate {

namespace {

constexpr std::size_t MAP_BYTES = 4096;
static_assert(sizeof(std::atomic<std::uint32_t>) == 4 && std::atomic<std::uint32_t>::is_always_lock_free);

long futex(std::atomic<std::uint32_t>* addr, int op, std::uint32_t val, const struct timespec* timeout)
{
    // Shared (not FUTEX_PRIVATE) ops: the word lives in a file mapping shared across processes.
    return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), op, val, timeout, nullptr, 0);
}

} // namespace

Doorbell::~Doorbell()
{
    unmap();
}

Doorbell::Doorbell(Doorbell&& other) noexcept
    : m_words(other.m_words)
{
    other.m_words = nullptr;
}

Doorbell& Doorbell::operator=(Doorbell&& other) noexcept
{
    if (this != &other) {
        unmap();
        m_words = other.m_words;
        other.m_words = nullptr;
    }
    return *this;
}

void Doorbell::unmap()
{
    if (m_words) {
        ::munmap(m_words, MAP_BYTES);
        m_words = nullptr;
    }
}

Result<Doorbell> Doorbell::open(const std::string& path)
{
    auto fd = Fd::open(path, O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
    if (!fd)
        return fd.error();
    auto st = fd->stat();
    if (!st)
        return st.error();
    if (!S_ISREG(st->st_mode))
        return Error::make(ErrorKind::Permission, path, "is not a regular file");
    if (st->st_size < static_cast<off_t>(MAP_BYTES)) {
        // Growing with ftruncate keeps existing bytes and zero-fills: concurrent openers agree.
        if (auto t = fd->truncate(MAP_BYTES); !t)
            return t.error();
    }
    void* p = ::mmap(nullptr, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
    if (p == MAP_FAILED)
        return Error::fromErrno(errno, path, "cannot map the doorbell");
    Doorbell d;
    d.m_words = static_cast<std::atomic<std::uint32_t>*>(p);
    return d; // the mapping outlives the descriptor
}

std::uint32_t Doorbell::generation() const
{
    return m_words ? m_words[0].load() : 0;
}

std::uint32_t Doorbell::counter(Counter c) const
{
    return m_words ? m_words[static_cast<int>(c)].load() : 0;
}

void Doorbell::bump(Counter c)
{
    if (m_words)
        m_words[static_cast<int>(c)].fetch_add(1);
}

void Doorbell::ring()
{
    if (!m_words)
        return;
    m_words[0].fetch_add(1);
    if (m_words[1].load() != 0)
        futex(&m_words[0], FUTEX_WAKE, INT_MAX, nullptr);
}

void Doorbell::wait(std::uint32_t seen, std::chrono::nanoseconds timeout) const
{
    if (!m_words || timeout <= std::chrono::nanoseconds::zero())
        return;
    struct timespec ts {};
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
    ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
    m_words[1].fetch_add(1);
    // EAGAIN: the generation already moved; EINTR: a signal (the caller re-checks its state).
    futex(&m_words[0], FUTEX_WAIT, seen, &ts);
    m_words[1].fetch_sub(1);
}

} // namespace tollgate
