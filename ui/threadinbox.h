#pragma once

// ThreadInbox: the one way work crosses between the dashboard's GUI thread and its observer
// thread.
//
// Invariants:
// - A job (a callable with its captured values) is built by the sending thread and handed over
//   under m_mutex, a std::mutex; the receiving thread takes every waiting job under the same
//   mutex and runs them in the order they were posted. ThreadSanitizer sees that mutex, so it
//   sees every value cross.
// - The wake-up is a queued call to drain() made by name: Qt builds and delivers it inside its
//   own library, carrying nothing of ours. Values passed as arguments of queued signals would
//   instead be copied by our code into Qt's event queue, whose locking (futexes inside Qt)
//   ThreadSanitizer cannot see: every such hand-over would read as a race, and those reports
//   had to be suppressed by Qt's module name, hiding real races in any slot.
// - A wake-up is pending (m_wakePending) whenever jobs wait: post() asks for one if none is,
//   and drain(), which runs jobs until none is left, asks for one before each job while others
//   wait, so a job that spins a nested event loop (a modal dialog) does not stall the rest;
//   they run in that loop, in their order.
// - Jobs still waiting when the inbox is destroyed are dropped, as queued events are when
//   their receiver goes; they run only in the inbox's thread. Its owner destroys it only
//   after the last post() of any thread has returned (post() asks for the wake-up after
//   letting go of the mutex).

#include <QObject>
#include <deque>
#include <functional>
#include <mutex>

namespace tollgate::ui {

class ThreadInbox final : public QObject
{
    Q_OBJECT
public:
    explicit ThreadInbox(QObject* parent = nullptr);

    // Any thread: run job in this object's thread, after every job posted before it.
    void post(std::function<void()> job);

private:
    Q_INVOKABLE void drain();

    std::mutex m_mutex;
    std::deque<std::function<void()>> m_jobs; // guarded by m_mutex
    bool m_wakePending = false; // guarded by m_mutex
};

} // namespace tollgate::ui
