#include "backend/redisquotareader.h"

#include "backend/redisquotabackend.h"
#include "history/historyreader.h"
#include "quota/quotapolicy.h"
#include "store/redisstatecodec.h"
#include "system/hostidentity.h"
#include "system/processprobe.h"

namespace tollgate {

namespace {

// Reads the stream after the last entry returned; counts what the cap trimmed unread.
class RedisHistoryCursor final : public HistoryCursor
{
public:
    static constexpr int BATCH = 1000;

    RedisHistoryCursor(RedisAddress address, std::chrono::milliseconds timeout)
        : m_address(std::move(address))
        , m_timeout(timeout)
        , m_key(RedisConnection::key(m_address, "history"))
    {
    }

    Result<HistoryBatch> poll() override
    {
        if (!m_connection || m_connection->broken()) {
            auto c = RedisConnection::open(m_address, m_timeout);
            if (!c)
                return c.error();
            m_connection = std::make_unique<RedisConnection>(std::move(c).value());
        }
        HistoryBatch out;
        // entries-added (Redis 7) tells how many were ever appended: what we did not read of
        // the new ones was trimmed by the cap before we came.
        std::int64_t added = -1;
        auto info = m_connection->command({ "XINFO", "STREAM", m_key });
        if (!info)
            return info.error();
        if (info->type == RedisReply::Type::Array) {
            for (std::size_t i = 0; i + 1 < info->elements.size(); i += 2) {
                if (info->elements[i].text == "entries-added")
                    added = info->elements[i + 1].integer;
            }
        }
        std::int64_t read = 0;
        for (;;) {
            auto r = m_connection->command({ "XRANGE", m_key, m_last.empty() ? "-" : "(" + m_last, "+",
                "COUNT", std::to_string(BATCH) });
            if (!r)
                return r.error();
            if (r->type != RedisReply::Type::Array)
                return Error::make(
                    ErrorKind::Io, m_address.url(), "Redis refused to read the history: " + r->text);
            for (const auto& entry : r->elements) {
                if (entry.type != RedisReply::Type::Array || entry.elements.size() != 2)
                    continue;
                m_last = entry.elements[0].text;
                ++read;
                const auto& fields = entry.elements[1].elements;
                bool parsed = false;
                for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
                    // A line longer than any event (planted) is skipped and counted, as the file
                    // home's reader does, never decoded.
                    if (fields[i].text != "e" || fields[i + 1].text.size() > HistoryReader::MAX_LINE)
                        continue;
                    if (auto e = HistoryEvent::fromJsonLine(fields[i + 1].text)) {
                        out.events.push_back(std::move(e).value());
                        parsed = true;
                    }
                }
                if (!parsed)
                    ++out.badLines;
            }
            if (r->elements.size() < static_cast<std::size_t>(BATCH))
                break;
        }
        if (added >= 0) {
            if (m_added >= 0 && added - m_added > read)
                out.skippedEvents = static_cast<std::uint64_t>(added - m_added - read);
            m_added = added;
        }
        return out;
    }

private:
    RedisAddress m_address;
    std::chrono::milliseconds m_timeout;
    std::string m_key;
    std::string m_last; // the id of the last entry returned
    std::int64_t m_added = -1;
    std::unique_ptr<RedisConnection> m_connection;
};

class RedisChangeFeed final : public ChangeFeed
{
public:
    explicit RedisChangeFeed(RedisConnection connection)
        : m_connection(std::move(connection))
    {
    }
    int fd() const override { return m_connection.fd(); }
    bool drain() override
    {
        auto n = m_connection.takeMessages();
        if (!n) {
            m_lost = true; // Redis went away: subscribe again (and re-read) to follow it
            return true;
        }
        return *n > 0;
    }
    bool lost() const override { return m_lost; }

private:
    RedisConnection m_connection;
    bool m_lost = false;
};

} // namespace

RedisQuotaReader::RedisQuotaReader(RedisAddress address, std::chrono::milliseconds timeout)
    : m_address(std::move(address))
    , m_timeout(timeout)
{
    const ProcessProbe probe;
    m_pidNs = probe.pidNamespace();
    if (auto host = HostIdentity::current(m_pidNs))
        m_host = std::move(host).value();
}

Result<QuotaView> RedisQuotaReader::snapshot()
{
    if (!m_connection || m_connection->broken()) {
        auto c = RedisConnection::open(m_address, m_timeout);
        if (!c)
            return c.error();
        m_connection = std::make_unique<RedisConnection>(std::move(c).value());
    }
    auto r = m_connection->callReadOnly(RedisQuotaBackend::library(), RedisQuotaBackend::keys(m_address),
        { "snapshot", "", RedisQuotaBackend::channelPrefix(m_address), "0", "" });
    if (!r)
        return r.error();
    if (r->type != RedisReply::Type::String)
        return Error::make(ErrorKind::Io, m_address.url(), "Redis refused the snapshot: " + r->text);
    const auto keys = RedisQuotaBackend::keys(m_address);
    auto s = RedisStateCodec::decodeSnapshot(r->text, keys[0], keys[1], m_host, m_pidNs);
    if (!s)
        return s.error();
    if (!s->homeExists && s->limits.providers().empty() && !s->state && s->corruptKey.empty())
        return Error::make(
            ErrorKind::NotFound, m_address.url(), "no Tollgate home here yet (nothing has run here)");
    QuotaView view;
    // A provider with limits but no state lost it: every operation restarts such a provider
    // conservatively before it decides anything (the script's fillConservatively, the same rule as
    // QuotaPolicy's). A look shows it so, at the server's time, instead of free capacity that the
    // next admission will not give. One whose state is there but unreadable is reported as
    // corrupt instead (corruptKey).
    if (!s->limits.providers().empty() && !s->limitsCorrupt) {
        QuotaState state = s->state.value_or(QuotaState {});
        for (const auto& [name, limits] : s->limits.providers()) {
            if (state.provider(name) || s->corruptKey == keys[1] + " field p:" + name)
                continue;
            QuotaPolicy::fillConservatively(state.ensureProvider(name), limits, s->nowMs);
            view.lostStates.push_back(name);
        }
        if (!view.lostStates.empty())
            s->state = std::move(state);
    }
    view.limits = std::move(s->limits);
    view.state = std::move(s->state);
    view.corruptFile = s->corruptKey;
    view.corruptReason = s->corruptReason;
    view.limitsCorrupt = s->limitsCorrupt;
    view.dataLostAtMs = s->dataLostAtMs;
    view.dataLostReason = std::move(s->dataLostReason);
    return view;
}

std::unique_ptr<HistoryCursor> RedisQuotaReader::history() const
{
    return std::make_unique<RedisHistoryCursor>(m_address, m_timeout);
}

Result<std::unique_ptr<ChangeFeed>> RedisQuotaReader::subscribe() const
{
    auto c = RedisConnection::open(m_address, m_timeout);
    if (!c)
        return c.error();
    if (auto s = c->subscribe({ RedisQuotaBackend::channelPrefix(m_address) + "changed" }); !s)
        return s.error();
    return std::unique_ptr<ChangeFeed>(std::make_unique<RedisChangeFeed>(std::move(c).value()));
}

} // namespace tollgate
