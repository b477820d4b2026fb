#pragma once

// FileQuotaReader: the read side of a directory home (QuotaReader): snapshots through
// QuotaPeek (state.bin under a shared flock of state.lock) and a history cursor through
// HistoryReader. The home is opened by its path for each read and checked each time (it must
// be a directory of ours; see HomeDir), and nothing is ever created: a home that was removed
// reads as ErrorKind::NotFound. A home with limits but no state (state.bin deleted or empty)
// lost it: the next transaction starts conservatively (FileQuotaStore::readState), and a
// snapshot shows it so (QuotaView::lostStates), not as the free capacity it will not give.

#include "base/clock.h"
#include "store/quotareader.h"

#include <chrono>

namespace tollgate {

class FileQuotaReader final : public QuotaReader
{
public:
    struct Options
    {
        // How long a snapshot waits for a writer inside its transaction.
        std::chrono::milliseconds lockTimeout { 10000 };
        // Longest pause between tries while a writer holds state.lock (see QuotaPeek).
        std::chrono::microseconds longestPause { 200 };
        // The time a lost state is shown at (below); nullptr: the system's. Not owned.
        const Clock* clock = nullptr;
    };

    explicit FileQuotaReader(std::string dir, Options options)
        : m_dir(std::move(dir))
        , m_options(options)
    {
    }
    explicit FileQuotaReader(std::string dir)
        : FileQuotaReader(std::move(dir), Options {})
    {
    }

    [[nodiscard]] Result<QuotaView> snapshot() override;
    [[nodiscard]] std::unique_ptr<HistoryCursor> history() const override;
    [[nodiscard]] Result<std::unique_ptr<ChangeFeed>> subscribe() const override;
    [[nodiscard]] std::string describe() const override { return m_dir; }

private:
    std::string m_dir;
    Options m_options;
};

} // namespace tollgate
