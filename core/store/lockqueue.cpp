#include "store/lockqueue.h"

#include "system/futex.h"

#include <algorithm>
#include <thread>

namespace tollgate {

namespace {

using SteadyClock = std::chrono::steady_clock;

// How far a is after b, in the wrapping ticket space.
std::int32_t after(std::uint32_t a, std::uint32_t b)
{
    return static_cast<std::int32_t>(a - b);
}

void cpuRelax()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// Spins until `done()` or `until`; returns done(). The clock is read every 64 turns only.
template <class Done> bool spinUntil(Done done, SteadyClock::time_point until)
{
    for (unsigned i = 1;; ++i) {
        if (done())
            return true;
        if ((i & 63U) == 0 && SteadyClock::now() >= until)
            return false;
        cpuRelax();
    }
}

// The value an `asleep` word holds when its ticket is awake: a ticket 2^31 away.
std::uint32_t awake(std::uint32_t ticket)
{
    return ticket ^ 0x80000000U;
}

// Microseconds of the monotonic clock (shared by every process of the machine), wrapping.
std::uint32_t nowMicros()
{
    return static_cast<std::uint32_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now().time_since_epoch()).count());
}

// A queue longer than this is not a queue but garbage (a hostile writer, a torn older
// layout): start over rather than wait behind tickets nobody holds.
constexpr std::int32_t MAX_QUEUE = 1 << 20;

constexpr std::chrono::milliseconds TURN_FALLBACK { 1 };

// How many waiters may spin at once here: one CPU is left to the lock's holder.
int spinnersAllowed()
{
    static const int allowed = [] {
        const unsigned cpus = std::thread::hardware_concurrency();
        return cpus <= 1 ? 0 : std::min<int>(LockQueue::MAX_SPINNERS, static_cast<int>(cpus) - 1);
    }();
    return allowed;
}

} // namespace

LockQueue::SpinLease LockQueue::takeSpinLease()
{
    const auto stale = static_cast<std::int32_t>(2 * SPIN.count());
    for (int i = 0; i < spinnersAllowed(); ++i) {
        auto& lease = word(SPIN_LEASE + i);
        std::uint32_t held = lease.load();
        // The clock is read after the word, so a lease taken meanwhile is never "in the
        // future"; one far in the future is garbage (a hostile or torn writer), and free.
        const std::uint32_t now = nowMicros() | 1U; // 0 means free
        const std::int32_t age = after(now, held);
        if ((held == 0 || age > stale || age < -(1 << 20)) && lease.compare_exchange_strong(held, now)) {
            ++m_spinLeases;
            return { i, now };
        }
    }
    return {};
}

void LockQueue::giveSpinLease(const SpinLease& lease)
{
    // Only our own stamp: a lease that outlived SPIN (we were preempted) may be someone
    // else's by now, and theirs stays.
    std::uint32_t mine = lease.stamp;
    if (lease.index >= 0)
        word(SPIN_LEASE + lease.index).compare_exchange_strong(mine, 0);
}

template <class Done> bool LockQueue::spinWithLease(Done done, SteadyClock::time_point until)
{
    const SpinLease lease = takeSpinLease();
    if (lease.index < 0)
        return done();
    const bool r = spinUntil(done, until);
    giveSpinLease(lease);
    return r;
}

LockQueue::LockQueue(std::atomic<std::uint32_t>* words, std::chrono::nanoseconds stall)
    : m_words(words)
    , m_stall(stall)
{
}

Result<bool> LockQueue::acquire(
    const TryLock& tryLock, SteadyClock::time_point deadline, const std::atomic<bool>* cancel)
{
    m_cancel = cancel;
    if (!m_words)
        return poll(tryLock, deadline);
    std::uint32_t serving = word(SERVING).load();
    const std::uint32_t next = word(NEXT).load();
    const std::int32_t queued = after(next, serving);
    if (queued < 0 || queued > MAX_QUEUE)
        word(SERVING).compare_exchange_strong(serving, next);
    if (queued == 0
        || after(nowMicros(), word(HEAD_SINCE).load()) < std::chrono::microseconds(HANDOFF_AFTER).count()) {
        // A running process takes a free lock at once (no ticket, one syscall): handing it
        // to a waiter that is not on a CPU right now would leave the lock unused for a whole
        // wake-up. Once the head of the queue has waited HANDOFF_AFTER, running processes
        // queue behind it instead (they sleep, which also frees a CPU for it).
        auto r = tryLock();
        if (!r || *r)
            return r;
        // Held: a process with a spin lease watches for the unlock and tries once more
        // before it queues. Holders keep the lock for microseconds, so this is usually the
        // next owner, already running: two such processes alternate on two CPUs, one in its
        // transaction while the other does the work outside it (the history append), where
        // queueing would put it to sleep and leave a CPU idle for a wake-up each time.
        const std::uint32_t seen = word(TURN).load();
        if (spinWithLease([this, seen] { return word(TURN).load() != seen; }, SteadyClock::now() + SPIN)) {
            r = tryLock();
            if (!r || *r)
                return r;
        }
    }
    const std::uint32_t ticket = word(NEXT).fetch_add(1);
    if (ticket == word(SERVING).load())
        word(HEAD_SINCE).store(nowMicros()); // we are the head at once
    bool holding = false;
    auto turn = waitForTurn(tryLock, ticket, deadline, holding);
    if (turn && *turn && !holding) {
        // At the head. Wake the ticket behind us now, outside the lock, so that it is
        // running (spinning) by the time our turn ends.
        wakeIfAsleep(ticket + 1);
        turn = takeAtHead(tryLock, deadline);
    }
    if (!turn || !*turn) {
        leave(ticket);
        return turn;
    }
    advancePast(ticket);
    return true;
}

Result<bool> LockQueue::waitForTurn(
    const TryLock& tryLock, std::uint32_t ticket, SteadyClock::time_point deadline, bool& holding)
{
    const std::uint32_t slot = ticket % RING;
    std::uint32_t lastServing = word(SERVING).load();
    SteadyClock::time_point lastMove = SteadyClock::now();
    for (;;) {
        const std::uint32_t s = word(SERVING).load();
        if (after(ticket, s) <= 0)
            return true; // our turn, or we were passed over (then we try like a head)
        const auto now = SteadyClock::now();
        if (s != lastServing) {
            lastServing = s;
            lastMove = now;
        } else if (now - lastMove >= m_stall) {
            // Nobody moved the queue for a long while: the head may be a process that died.
            // The flock is the real lock; try it.
            auto r = tryLock();
            if (!r)
                return r.error();
            if (*r) {
                holding = true;
                return true;
            }
            lastMove = now;
        }
        if (over(now, deadline))
            return false;
        const auto until = std::min(deadline, lastMove + m_stall);
        if (after(ticket, s) == 1
            && spinWithLease([this, s] { return word(SERVING).load() != s; }, std::min(until, now + SPIN)))
            continue;
        const std::uint32_t seen = word(WAKE + slot).load();
        word(ASLEEP + slot).store(ticket);
        // Re-read after announcing the sleep: a waker that moved serving before it could see
        // the announcement is seen here instead (both are sequentially consistent).
        if (word(SERVING).load() == s)
            futex::wait(&word(WAKE + slot), seen, until - SteadyClock::now());
        word(ASLEEP + slot).store(awake(ticket));
    }
}

Result<bool> LockQueue::takeAtHead(const TryLock& tryLock, SteadyClock::time_point deadline)
{
    for (;;) {
        const std::uint32_t seen = word(TURN).load();
        auto r = tryLock();
        if (!r || *r)
            return r;
        const auto now = SteadyClock::now();
        if (over(now, deadline))
            return false;
        // The holder keeps the flock for microseconds: watch its unlock, then sleep on it.
        if (spinWithLease([this, seen] { return word(TURN).load() != seen; }, std::min(deadline, now + SPIN)))
            continue;
        const auto until = std::min(deadline, SteadyClock::now() + TURN_FALLBACK);
        word(TURN_SLEEPERS).fetch_add(1);
        if (word(TURN).load() == seen)
            futex::wait(&word(TURN), seen, until - SteadyClock::now());
        word(TURN_SLEEPERS).fetch_sub(1);
    }
}

Result<bool> LockQueue::poll(const TryLock& tryLock, SteadyClock::time_point deadline)
{
    for (;;) {
        auto r = tryLock();
        if (!r || *r)
            return r;
        const auto now = SteadyClock::now();
        if (over(now, deadline))
            return false;
        std::this_thread::sleep_for(std::min<SteadyClock::duration>(deadline - now, m_stall));
    }
}

void LockQueue::advancePast(std::uint32_t ticket)
{
    std::uint32_t target = ticket + 1;
    for (;;) {
        while (after(word(NEXT).load(), target) > 0 && word(GONE + target % RING).load() == target)
            ++target;
        std::uint32_t current = word(SERVING).load();
        if (after(target, current) <= 0)
            return; // someone moved it as far or further (never move it back)
        if (!word(SERVING).compare_exchange_strong(current, target))
            continue;
        word(HEAD_SINCE).store(nowMicros());
        // The ticket may have left between the check and the store; it saw no turn then
        // (or it moves serving on itself: the compare-and-set keeps that single).
        if (word(GONE + target % RING).load() == target && after(word(NEXT).load(), target) > 0) {
            ++target;
            continue;
        }
        wakeIfAsleep(target);
        return;
    }
}

void LockQueue::leave(std::uint32_t ticket)
{
    word(GONE + ticket % RING).store(ticket);
    // If our turn came meanwhile, nobody else will move the queue past us.
    if (after(ticket, word(SERVING).load()) <= 0)
        advancePast(ticket);
}

void LockQueue::wakeIfAsleep(std::uint32_t ticket)
{
    const std::uint32_t slot = ticket % RING;
    if (word(ASLEEP + slot).load() != ticket)
        return;
    word(WAKE + slot).fetch_add(1);
    futex::wake(&word(WAKE + slot));
}

} // namespace tollgate
