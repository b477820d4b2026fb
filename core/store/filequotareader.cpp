#include "store/filequotareader.h"

#include "history/historyreader.h"
#include "store/quotapeek.h"

namespace tollgate {

namespace {

class FileHistoryCursor final : public HistoryCursor
{
public:
    explicit FileHistoryCursor(std::string dir)
        : m_reader(std::move(dir))
    {
    }
    Result<HistoryBatch> poll() override { return m_reader.poll(); }

private:
    HistoryReader m_reader;
};

} // namespace

Result<QuotaView> FileQuotaReader::snapshot()
{
    return QuotaPeek::read(m_dir, m_options.lockTimeout, m_options.longestPause);
}

std::unique_ptr<HistoryCursor> FileQuotaReader::history() const
{
    return std::make_unique<FileHistoryCursor>(m_dir);
}

} // namespace tollgate
