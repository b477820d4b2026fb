#include "threadinbox.h"

#include <utility>

namespace tollgate::ui {

ThreadInbox::ThreadInbox(QObject* parent)
    : QObject(parent)
{
}

void ThreadInbox::post(std::function<void()> job)
{
    bool wake = false;
    {
        std::lock_guard lock(m_mutex);
        m_jobs.push_back(std::move(job));
        wake = !std::exchange(m_wakePending, true);
    }
    if (wake)
        QMetaObject::invokeMethod(this, "drain", Qt::QueuedConnection);
}

void ThreadInbox::drain()
{
    {
        std::lock_guard lock(m_mutex);
        m_wakePending = false;
    }
    for (;;) {
        std::function<void()> job;
        bool wake = false;
        {
            std::lock_guard lock(m_mutex);
            if (m_jobs.empty())
                return;
            job = std::move(m_jobs.front());
            m_jobs.pop_front();
            // A job may spin a nested event loop (a modal dialog): a wake-up stays pending
            // while others wait, so that loop runs them, in their order.
            if (!m_jobs.empty())
                wake = !std::exchange(m_wakePending, true);
        }
        if (wake)
            QMetaObject::invokeMethod(this, "drain", Qt::QueuedConnection);
        job();
    }
}

} // namespace tollgate::ui
