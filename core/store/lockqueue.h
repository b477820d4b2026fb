#pragma once

// LockQueue: a first-come-first-served hand-over of state.lock between processes.
//
// The flock on state.lock stays the ONLY exclusion; this queue is a hint that decides who
// tries next, so that under contention the lock goes to the process that has waited longest
// and that process is already running when the lock comes free (a hand-over costs a store
// and a cache miss, not a wake-up and a scheduling delay). Without it, eight processes on two
// CPUs spent a third of their time waking up, failing, and going back to sleep.
//
// Words (in the doorbell mapping, so every process of the home shares them):
//   next     the next ticket to hand out          serving  the ticket whose turn it is
//   wake[i]  futex word ticket t sleeps on (i = t % RING)
//   asleep[i] t while ticket t sleeps (so a waker skips the syscall otherwise)
//   gone[i]  t when ticket t left the queue without its turn (deadline, error)
// A running process first tries the flock without a ticket (one syscall): handing the lock
// to a waiter that is not on a CPU right now would leave it unused for a whole wake-up, and
// on two CPUs that cost a third of the throughput. That barging is bounded: once the head of
// the queue has waited HANDOFF_AFTER, newcomers take a ticket instead, so no waiter is passed
// over for long. With a ticket: sleep until serving reaches it (the ticket just behind the
// head spins instead, briefly, and the head wakes it as it becomes the head, so the next
// hand-over finds it running); at the head, spin on the flock's release word, then take the
// flock and move serving on, skipping tickets that are gone. A spin needs a spin lease: with
// more waiters than CPUs, spinners took the CPU the lock's holder needed to finish (on two
// CPUs, four processes got a third of the throughput of two), so one CPU is always left
// to the holder, and a waiter without a lease sleeps at once (it is woken by the futex).
//
// What survives a crash: nothing here is trusted for safety. A spin lease of a process that
// died expires by itself: a lease older than SPIN (plus slack) is free. A process killed while queued
// or at the head leaves serving stuck at its ticket; the ticket behind it notices that
// serving has not moved for STALL and tries the flock anyway (and, once in, moves serving
// past both), so a dead waiter costs the others at most STALL once. Garbage in the words (a
// hostile or older writer) degrades to polling the flock every STALL, never to a wait
// without end: every wait here is bounded by the caller's deadline. So does a doorbell
// truncated under us: its words read as zero in this process from then on (see Doorbell),
// a futex call on it before that answers EFAULT and pauses briefly (futex.h), and either way
// this process polls the flock every STALL or TURN_FALLBACK until the store opens the
// doorbell again at its next operation.

#include "base/result.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

namespace tollgate {

class LockQueue
{
public:
    static constexpr std::uint32_t RING = 32;
    // Word indexes inside the doorbell mapping (see Doorbell).
    static constexpr int TURN = 4; // moved by every unlock (Doorbell::lockReleased)
    static constexpr int TURN_SLEEPERS = 5;
    static constexpr int NEXT = 6;
    static constexpr int SERVING = 7;
    static constexpr int HEAD_SINCE = 8; // when the head got its turn (monotonic µs, wrapping)
    // Leases to spin (monotonic µs when taken, 0 when free): a waiter spins only with one, so
    // at most MAX_SPINNERS (one CPU fewer than the machine has, at most 2) spin at a time.
    static constexpr int SPIN_LEASE = 9;
    static constexpr int MAX_SPINNERS = 2;
    static constexpr int WAKE = 32;
    static constexpr int ASLEEP = WAKE + RING;
    static constexpr int GONE = ASLEEP + RING;
    static constexpr int END = GONE + RING;

    static constexpr std::chrono::microseconds SPIN { 50 };
    static constexpr std::chrono::milliseconds STALL { 2 };
    static constexpr std::chrono::microseconds HANDOFF_AFTER { 250 };

    // `words`: the doorbell's mapped words (Doorbell::mapped), which include the turn word
    // the unlocker moves and wakes (Doorbell::lockReleased). Null: no queue, the flock is
    // polled every STALL.
    explicit LockQueue(std::atomic<std::uint32_t>* words, std::chrono::nanoseconds stall = STALL);

    // Returns true once `tryLock` succeeded, false when the deadline passed first or `cancel`
    // was set while the lock was held (looked at only then: a free lock costs no more); the
    // error of `tryLock` otherwise. `tryLock` is called only by this process's turn (or after
    // a stall) and must not block. A signal that sets `cancel` interrupts the sleeps here;
    // one that comes just before a sleep is seen when it ends (TURN_FALLBACK or STALL).
    using TryLock = std::function<Result<bool>()>;
    Result<bool> acquire(const TryLock& tryLock, std::chrono::steady_clock::time_point deadline,
        const std::atomic<bool>* cancel = nullptr);

    // How many times this queue took a spin lease (tests: a waiter without one never spins).
    [[nodiscard]] std::uint64_t spinLeasesTaken() const { return m_spinLeases; }

private:
    Result<bool> waitForTurn(const TryLock& tryLock, std::uint32_t ticket,
        std::chrono::steady_clock::time_point deadline, bool& holding);
    Result<bool> takeAtHead(const TryLock& tryLock, std::chrono::steady_clock::time_point deadline);
    Result<bool> poll(const TryLock& tryLock, std::chrono::steady_clock::time_point deadline);
    // The wait is over: the deadline passed or the caller cancelled it.
    [[nodiscard]] bool over(
        std::chrono::steady_clock::time_point now, std::chrono::steady_clock::time_point deadline) const
    {
        return now >= deadline || (m_cancel && m_cancel->load());
    }
    void advancePast(std::uint32_t ticket);
    void leave(std::uint32_t ticket);
    void wakeIfAsleep(std::uint32_t ticket);
    // A free spin lease taken (index -1: none free; the caller sleeps instead of spinning).
    struct SpinLease
    {
        int index = -1;
        std::uint32_t stamp = 0;
    };
    SpinLease takeSpinLease();
    void giveSpinLease(const SpinLease& lease);
    template <class Done> bool spinWithLease(Done done, std::chrono::steady_clock::time_point until);

    std::atomic<std::uint32_t>& word(int i) { return m_words[i]; }

    std::atomic<std::uint32_t>* m_words;
    std::chrono::nanoseconds m_stall;
    const std::atomic<bool>* m_cancel = nullptr; // of the acquire() in progress
    std::uint64_t m_spinLeases = 0;
};

} // namespace tollgate
