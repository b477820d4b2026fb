#include "store/doorbell.h"

#include "store/lockqueue.h"
#include "system/futex.h"
#include "system/homedir.h"

#include <cerrno>
#include <climits>
#include <fcntl.h>
#include <unistd.h>

namespace tollgate {

namespace {

constexpr std::size_t MAP_BYTES = 4096;
constexpr int GAP_LOST = 16;
constexpr int GAP_ERRNO = 17;
constexpr int GAP_SINCE_LOW = 18;
constexpr int GAP_SINCE_HIGH = 19;
static_assert(sizeof(std::atomic<std::uint32_t>) == 4 && std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(
    LockQueue::END * sizeof(std::uint32_t) <= MAP_BYTES && LockQueue::NEXT > 5 && LockQueue::WAKE > 19);

} // namespace

Result<Doorbell> Doorbell::open(const Fd& home)
{
    auto fd = HomeDir::openFile(home, "doorbell", O_RDWR | O_CREAT, 0600);
    if (!fd)
        return fd.error();
    auto st = fd->stat();
    if (!st)
        return st.error();
    if (st->st_size < static_cast<off_t>(MAP_BYTES)) {
        // Growing with ftruncate keeps existing bytes and zero-fills: concurrent openers agree.
        if (auto t = fd->truncate(MAP_BYTES); !t)
            return t.error();
    }
    auto mapping = SharedMapping::map(*fd, MAP_BYTES);
    if (!mapping)
        return mapping.error();
    Doorbell d;
    d.m_mapping = std::move(mapping).value();
    return d; // the mapping outlives the descriptor
}

std::uint32_t Doorbell::generation() const
{
    return words() ? words()[0].load() : 0;
}

std::uint32_t Doorbell::counter(Counter c) const
{
    return words() ? words()[static_cast<int>(c)].load() : 0;
}

void Doorbell::bump(Counter c)
{
    if (words())
        words()[static_cast<int>(c)].fetch_add(1);
}

void Doorbell::ring()
{
    if (!words())
        return;
    words()[0].fetch_add(1);
    if (words()[1].load() != 0)
        futex::wake(&words()[0]);
}

Doorbell::HistoryGap Doorbell::historyGap() const
{
    HistoryGap g;
    if (!words())
        return g;
    g.lost = words()[GAP_LOST].load();
    g.sysErrno = static_cast<int>(words()[GAP_ERRNO].load());
    g.sinceMs = static_cast<std::int64_t>(
        (static_cast<std::uint64_t>(words()[GAP_SINCE_HIGH].load()) << 32) | words()[GAP_SINCE_LOW].load());
    return g;
}

Doorbell::HistoryGap Doorbell::takeHistoryGap()
{
    HistoryGap g;
    if (!words() || words()[GAP_LOST].load() == 0)
        return g; // the common case costs one load, no write to the shared line
    g = historyGap();
    g.lost = words()[GAP_LOST].exchange(0);
    return g;
}

void Doorbell::addHistoryGap(std::uint32_t lost, std::int64_t timeMs, int sysErrno)
{
    if (!words() || lost == 0)
        return;
    std::uint32_t before = words()[GAP_LOST].load();
    for (;;) {
        const std::uint32_t after = before + lost < before ? UINT32_MAX : before + lost; // saturate
        if (words()[GAP_LOST].compare_exchange_weak(before, after))
            break;
    }
    if (before == 0) {
        const auto t = static_cast<std::uint64_t>(timeMs);
        words()[GAP_SINCE_LOW].store(static_cast<std::uint32_t>(t));
        words()[GAP_SINCE_HIGH].store(static_cast<std::uint32_t>(t >> 32));
        words()[GAP_ERRNO].store(static_cast<std::uint32_t>(sysErrno));
    }
}

std::atomic<std::uint32_t>* Doorbell::counterWord(Counter c) const
{
    return words() ? &words()[static_cast<int>(c)] : nullptr;
}

void Doorbell::wait(std::uint32_t seen, std::chrono::nanoseconds timeout) const
{
    if (!words() || timeout <= std::chrono::nanoseconds::zero())
        return;
    words()[1].fetch_add(1);
    // Returns on a wake, a moved generation, a signal (the caller re-checks its state) or
    // the timeout.
    futex::wait(&words()[0], seen, timeout);
    words()[1].fetch_sub(1);
}

namespace {
constexpr int LOCK_TURN = LockQueue::TURN;
constexpr int LOCK_SLEEPERS = LockQueue::TURN_SLEEPERS;
} // namespace

void Doorbell::lockReleased()
{
    if (!words())
        return;
    words()[LOCK_TURN].fetch_add(1);
    if (words()[LOCK_SLEEPERS].load() != 0)
        futex::wake(&words()[LOCK_TURN], 1);
}

} // namespace tollgate
