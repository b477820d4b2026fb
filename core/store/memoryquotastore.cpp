#include "store/memoryquotastore.h"

#include "system/fd.h"

#include <algorithm>
#include <cerrno>
#include <sys/eventfd.h>
#include <unistd.h>

namespace tollgate {

class MemoryHistoryCursor final : public HistoryCursor
{
public:
    explicit MemoryHistoryCursor(const MemoryQuotaStore& store)
        : m_store(&store)
    {
    }
    Result<HistoryBatch> poll() override
    {
        HistoryBatch batch;
        std::uint64_t lost = 0;
        batch.events = m_store->eventsFrom(m_next, m_next, lost);
        batch.skippedEvents = lost;
        return batch;
    }

private:
    const MemoryQuotaStore* m_store; // not owned; outlives the cursor
    std::uint64_t m_next = 0;
};

class MemoryFeed final : public ChangeFeed
{
public:
    MemoryFeed(const MemoryQuotaStore& store, Fd event)
        : m_store(&store)
        , m_event(std::move(event))
    {
    }
    ~MemoryFeed() override
    {
        std::lock_guard lock(m_store->m_mutex);
        std::erase(m_store->m_feeds, m_event.get());
    }
    int fd() const override { return m_event.get(); }
    bool drain() override
    {
        std::uint64_t n = 0;
        return ::read(m_event.get(), &n, sizeof n) == static_cast<ssize_t>(sizeof n) && n > 0;
    }

private:
    const MemoryQuotaStore* m_store; // not owned; outlives the feed
    Fd m_event;
};

Result<std::unique_ptr<ChangeFeed>> MemoryQuotaStore::subscribe() const
{
    const int e = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e < 0)
        return Error::fromErrno(errno, "memory", "eventfd");
    std::lock_guard lock(m_mutex);
    m_feeds.push_back(e);
    return std::unique_ptr<ChangeFeed>(std::make_unique<MemoryFeed>(*this, Fd(e, "memory")));
}

Result<void> MemoryQuotaStore::run(const LimitsFunction* limitsFn, const TxFunction* fn)
{
    std::unique_lock lock(m_mutex);
    const int passes = m_strict ? 2 : 1;
    for (int pass = 0; pass < passes; ++pass) {
        const bool real = pass == passes - 1;
        QuotaState state = m_state; // a fresh copy each run, as the contract says
        QuotaLimits limits = m_limits;
        QuotaTransaction tx { state, m_limits, {}, false, false };
        if (limitsFn) {
            ++m_runs;
            if (auto r = (*limitsFn)(limits, tx); !r)
                return r;
            tx.changed = true;
            tx.ring = true;
        }
        if (fn) {
            ++m_runs;
            if (auto r = (*fn)(tx); !r)
                return r;
        }
        if (!real)
            continue;
        if (limitsFn)
            m_limits = std::move(limits);
        if (tx.changed) {
            m_state = std::move(state);
            m_hasState = true;
        }
        for (auto& e : tx.events) {
            m_history.push_back(std::move(e));
            if (m_history.size() > HISTORY_CAP) {
                m_history.pop_front();
                ++m_historyBase;
            }
        }
        if (tx.ring) {
            ++m_generation;
            m_rang.notify_all();
        }
        if (tx.changed || !tx.events.empty() || limitsFn) {
            const std::uint64_t one = 1;
            for (int e : m_feeds)
                (void)!::write(e, &one, sizeof one); // a full counter still reads as "changed"
        }
    }
    return {};
}

Result<void> MemoryQuotaStore::transact(const StoreWait& /*wait*/, const TxFunction& fn)
{
    return run(nullptr, &fn);
}

Result<void> MemoryQuotaStore::updateLimits(const LimitsFunction& fn)
{
    return run(&fn, nullptr);
}

std::uint32_t MemoryQuotaStore::changeMark() const
{
    std::lock_guard lock(m_mutex);
    return m_generation;
}

void MemoryQuotaStore::waitForChange(std::uint32_t mark, std::chrono::nanoseconds timeout) const
{
    std::unique_lock lock(m_mutex);
    m_rang.wait_for(lock, timeout, [&] { return m_generation != mark; });
}

Result<QuotaView> MemoryQuotaStore::snapshot()
{
    std::lock_guard lock(m_mutex);
    QuotaView view;
    view.limits = m_limits;
    if (m_hasState)
        view.state = m_state;
    return view;
}

std::unique_ptr<HistoryCursor> MemoryQuotaStore::history() const
{
    return std::make_unique<MemoryHistoryCursor>(*this);
}

std::uint64_t MemoryQuotaStore::functionRuns() const
{
    std::lock_guard lock(m_mutex);
    return m_runs;
}

std::vector<HistoryEvent> MemoryQuotaStore::eventsFrom(std::uint64_t from, std::uint64_t& next, std::uint64_t& lost) const
{
    std::lock_guard lock(m_mutex);
    lost = from < m_historyBase ? m_historyBase - from : 0;
    const std::uint64_t start = std::max(from, m_historyBase);
    std::vector<HistoryEvent> out(m_history.begin() + static_cast<std::ptrdiff_t>(start - m_historyBase), m_history.end());
    next = m_historyBase + m_history.size();
    return out;
}

} // namespace tollgate
