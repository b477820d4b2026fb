#include "store/filequotareader.h"

#include "base/systemclock.h"
#include "history/historyreader.h"
#include "quota/quotapolicy.h"
#include "store/quotapeek.h"
#include "system/homedir.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <sys/inotify.h>
#include <unistd.h>

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

// The files whose change matters to a reader (the rest — state.lock, doorbell, temp files —
// change on every transaction or say nothing).
bool relevant(std::string_view name)
{
    return name == "state.bin" || name == "limits.json" || name == "history.jsonl" || name == "history.1.jsonl";
}

class InotifyFeed final : public ChangeFeed
{
public:
    explicit InotifyFeed(Fd inotify)
        : m_inotify(std::move(inotify))
    {
    }
    int fd() const override { return m_inotify.get(); }
    bool lost() const override { return m_lost; }
    bool drain() override
    {
        bool changed = false;
        alignas(inotify_event) std::array<char, 4096> buf {};
        for (;;) {
            const ssize_t n = ::read(m_inotify.get(), buf.data(), buf.size());
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return changed; // EAGAIN: drained
            for (ssize_t at = 0; at < n;) {
                const auto* e = reinterpret_cast<const inotify_event*>(buf.data() + at);
                if (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
                    changed = true; // the home went away: this watch is over
                    m_lost = true;
                } else if (e->mask & IN_Q_OVERFLOW) {
                    changed = true; // events were lost: look again
                }
                else if (e->len > 0 && relevant(std::string_view(e->name)))
                    changed = true;
                at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
            }
        }
    }

private:
    Fd m_inotify;
    bool m_lost = false;
};

} // namespace

Result<std::unique_ptr<ChangeFeed>> FileQuotaReader::subscribe() const
{
    auto home = HomeDir::open(m_dir, false);
    if (!home)
        return home.error();
    const int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (in < 0)
        return Error::fromErrno(errno, m_dir, "cannot watch the home (inotify_init1)");
    Fd inotify(in, m_dir);
    // The directory we opened and checked, through its descriptor: not whatever the path
    // names by now.
    const std::string self = "/proc/self/fd/" + std::to_string(home->get());
    const std::uint32_t mask = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE
        | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
    if (::inotify_add_watch(inotify.get(), self.c_str(), mask) < 0)
        return Error::fromErrno(errno, m_dir, "cannot watch the home (inotify_add_watch)");
    return std::unique_ptr<ChangeFeed>(std::make_unique<InotifyFeed>(std::move(inotify)));
}

Result<QuotaView> FileQuotaReader::snapshot()
{
    auto view = QuotaPeek::read(m_dir, m_options.lockTimeout, m_options.longestPause);
    if (!view || view->state || !view->corruptFile.empty() || view->limits.providers().empty())
        return view;
    static const SystemClock systemClock;
    const std::int64_t now = (m_options.clock ? *m_options.clock : systemClock).unixMs();
    QuotaState state;
    for (const auto& [name, limits] : view->limits.providers()) {
        QuotaPolicy::fillConservatively(state.ensureProvider(name), limits, now);
        view->lostStates.push_back(name);
    }
    view->state = std::move(state);
    return view;
}

std::unique_ptr<HistoryCursor> FileQuotaReader::history() const
{
    return std::make_unique<FileHistoryCursor>(m_dir);
}

} // namespace tollgate
