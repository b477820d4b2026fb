#include "capihome.h"

#include "backend/statusreport.h"
#include "backend/storefactory.h"

#include <chrono>
#include <sys/stat.h>
#include <tuple>

namespace tollgate::capi {

namespace {
// The exchange's own queue timeout is not used: each call waits for its own timeout.
constexpr std::chrono::milliseconds UNUSED_QUEUE_TIMEOUT { 30000 };
// tollgate_call_cancel from another thread ends a wait within this (a look at the flag and the
// change mark, no store operation, each time).
constexpr std::chrono::milliseconds CANCEL_POLL { 10 };
} // namespace

CapiHome::CapiHome(HomeSpec spec)
    : m_spec(std::move(spec))
    , m_text(m_spec.text())
    , m_ownerPid(ProcessProbe::selfPid())
{
}

CapiHome::~CapiHome()
{
    if (forked()) {
        // The parent's connections: closing them here could give back what the parent holds
        // (see the invariants). The child's copy of their memory is left as it is.
        for (auto& c : m_idle)
            (void)c.release();
    }
}

Result<std::shared_ptr<CapiHome>> CapiHome::open(std::string_view text)
{
    auto spec
        = HomeSpec::resolve(text.empty() ? std::nullopt : std::optional<std::string>(std::string(text)));
    if (!spec)
        return spec.error();
    std::shared_ptr<CapiHome> home(new CapiHome(std::move(spec).value()));
    auto first = home->connect();
    if (!first)
        return first.error();
    home->m_idle.push_back(std::move(first).value());
    return home;
}

Result<std::unique_ptr<CapiHome::Connection>> CapiHome::connect() const
{
    auto c = std::make_unique<Connection>();
    auto backend = StoreFactory::openBackend(m_spec, c->clock, c->probe);
    if (!backend)
        return backend.error();
    c->backend = std::move(backend).value();
    c->limiter = std::make_unique<QuotaLimiter>(*c->backend, c->clock, c->probe);
    c->limiter->setCancelPoll(CANCEL_POLL);
    if (m_spec.isDirectory()) {
        // After the open: the directory the backend holds (an exchange of paths between the
        // open and this look shows as a mismatch at the next take, and is opened again).
        std::tie(c->dev, c->ino) = homeIdentity();
    }
    return c;
}

std::pair<std::uint64_t, std::uint64_t> CapiHome::homeIdentity() const
{
    struct stat st
    {
    };
    if (::lstat(m_spec.dir().c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return { 0, 0 };
    return { static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino) };
}

Result<std::unique_ptr<CapiHome::Connection>> CapiHome::take()
{
    std::vector<std::unique_ptr<Connection>> stale; // closed outside the mutex
    {
        const auto now = m_spec.isDirectory() ? homeIdentity() : std::pair<std::uint64_t, std::uint64_t> {};
        std::lock_guard lock(m_mutex);
        if (!m_idle.empty() && (m_idle.back()->dev != now.first || m_idle.back()->ino != now.second)) {
            // The path names another directory now (or none): every kept one is of the old.
            stale = std::move(m_idle);
            m_idle.clear();
        }
        if (!m_idle.empty()) {
            auto c = std::move(m_idle.back());
            m_idle.pop_back();
            return c;
        }
    }
    stale.clear();
    return connect();
}

void CapiHome::give(std::unique_ptr<Connection> c, bool broken)
{
    if (!c || broken || closed())
        return;
    std::lock_guard lock(m_mutex);
    if (m_idle.size() < MAX_IDLE)
        m_idle.push_back(std::move(c));
}

QuotaExchange& CapiHome::exchange(const std::string& provider)
{
    std::lock_guard lock(m_mutex);
    auto& e = m_exchanges[provider];
    if (!e)
        e = std::make_unique<QuotaExchange>(provider, UNUSED_QUEUE_TIMEOUT, m_clock);
    return *e;
}

Result<std::string> CapiHome::statusJson()
{
    auto reader = StoreFactory::openReader(m_spec);
    const std::int64_t now = m_clock.unixMs();
    nlohmann::json doc;
    if (!reader && reader.error().kind == ErrorKind::NotFound) {
        doc = StatusReport::homeJson(m_text, nullptr, now, m_probe);
    } else if (!reader) {
        return reader.error();
    } else {
        auto view = (*reader)->snapshot();
        if (!view)
            return view.error();
        // As `tollgate status` answers: what does not parse is named, never shown as empty.
        if (!view->corruptFile.empty())
            return Error::make(ErrorKind::Corrupt, view->corruptFile, view->corruptReason);
        doc = StatusReport::homeJson(m_text, &view.value(), now, m_probe);
    }
    return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace tollgate::capi
