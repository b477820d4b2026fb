#include "watchcommand.h"

#include "backend/storefactory.h"
#include "base/systemclock.h"
#include "clioptions.h"
#include "console.h"
#include "exitcodes.h"
#include "quotaformat.h"
#include "quota/capacity.h"
#include "system/fd.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fcntl.h>
#include <map>
#include <memory>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>
#include <vector>

namespace tollgate::cli {

namespace {

// ---- signals: the handlers only write the signal's number to a self-pipe -------------------

int g_signalPipe = -1;

extern "C" void onWatchSignal(int sig)
{
    const int saved = errno;
    const unsigned char byte = static_cast<unsigned char>(sig);
    if (g_signalPipe >= 0)
        (void)!::write(g_signalPipe, &byte, 1);
    errno = saved;
}

class SignalRoute
{
public:
    static constexpr int SIGNALS[] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGTSTP, SIGCONT };

    SignalRoute()
    {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
            return;
        m_read = Fd(fds[0], "signal pipe");
        m_write = Fd(fds[1], "signal pipe");
        g_signalPipe = m_write.get();
        for (std::size_t i = 0; i < std::size(SIGNALS); ++i)
            install(SIGNALS[i], &m_old[i]);
    }
    ~SignalRoute()
    {
        for (std::size_t i = 0; i < std::size(SIGNALS); ++i)
            ::sigaction(SIGNALS[i], &m_old[i], nullptr);
        g_signalPipe = -1;
    }
    SignalRoute(const SignalRoute&) = delete;
    SignalRoute& operator=(const SignalRoute&) = delete;

    [[nodiscard]] bool valid() const { return m_read.valid(); }
    [[nodiscard]] int readFd() const { return m_read.get(); }
    static void install(int sig, struct sigaction* old = nullptr)
    {
        struct sigaction sa
        {
        };
        sa.sa_handler = onWatchSignal;
        sigemptyset(&sa.sa_mask);
        ::sigaction(sig, &sa, old);
    }

private:
    Fd m_read;
    Fd m_write;
    struct sigaction m_old[std::size(SIGNALS)] {};
};

// ---- the terminal: alternate screen, hidden cursor, non-canonical stdin; always given back ----

bool writeScreen(int fd, std::string_view text)
{
    while (!text.empty()) {
        const ssize_t n = ::write(fd, text.data(), text.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        text.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

constexpr std::string_view ENTER_SCREEN = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J";
constexpr std::string_view LEAVE_SCREEN = "\x1b[?25h\x1b[?1049l";

class Terminal
{
public:
    Terminal(bool screen, bool keys)
        : m_screen(screen)
        , m_keys(keys)
    {
        enter();
    }
    ~Terminal() { leave(); }
    Terminal(const Terminal&) = delete;
    Terminal& operator=(const Terminal&) = delete;

    void enter()
    {
        if (m_entered)
            return;
        if (m_keys && ::tcgetattr(STDIN_FILENO, &m_saved) == 0) {
            termios raw = m_saved;
            // Keys one by one, not echoed; Ctrl-C and Ctrl-Z still send their signals.
            raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
            raw.c_cc[VMIN] = 0;
            raw.c_cc[VTIME] = 0;
            m_restoreTermios = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
        }
        if (m_screen)
            (void)writeScreen(STDOUT_FILENO, ENTER_SCREEN);
        m_entered = true;
    }
    void leave()
    {
        if (!m_entered)
            return;
        if (m_screen)
            (void)writeScreen(STDOUT_FILENO, LEAVE_SCREEN);
        if (m_restoreTermios)
            (void)::tcsetattr(STDIN_FILENO, TCSANOW, &m_saved);
        m_restoreTermios = false;
        m_entered = false;
    }

private:
    bool m_screen;
    bool m_keys;
    bool m_entered = false;
    bool m_restoreTermios = false;
    termios m_saved {};
};

// ---- formatting ----------------------------------------------------------------------------

enum class Colour { None, Green, Yellow, Red, Dim };

struct Line
{
    std::string text; // already printable
    Colour colour = Colour::None;
};

std::string duration(std::int64_t ms)
{
    if (ms == Capacity::NEVER)
        return "-";
    if (ms <= 0)
        return "now";
    char buf[48];
    if (ms < 10000) {
        std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>((ms + 99) / 100) / 10.0);
        return buf;
    }
    const std::int64_t s = (ms + 999) / 1000;
    if (s < 120)
        std::snprintf(buf, sizeof buf, "%lld s", static_cast<long long>(s));
    else if (s < 7200)
        std::snprintf(buf, sizeof buf, "%lld min %02lld s", static_cast<long long>(s / 60),
            static_cast<long long>(s % 60));
    else if (s < 3 * 86400)
        std::snprintf(buf, sizeof buf, "%lld h %02lld min", static_cast<long long>(s / 3600),
            static_cast<long long>(s % 3600 / 60));
    else
        std::snprintf(buf, sizeof buf, "%lld days", static_cast<long long>(s / 86400));
    return buf;
}

std::string num(std::int64_t v)
{
    return std::to_string(v);
}

std::string blockedText(const ProviderCapacity& c)
{
    switch (c.blockedBy) {
    case WaitReason::Paused:
        return c.pausedAll ? "everything is paused" : "paused";
    case WaitReason::Backoff:
        return c.backoffRemainingMs > 0 ? "backing off after a 429" : "restart paced after a backoff";
    case WaitReason::Queue:
        return num(static_cast<std::int64_t>(c.waiting)) + " caller(s) queued ahead";
    case WaitReason::Window:
        return "no request left in the window";
    case WaitReason::Tokens:
        return "no token left in the window";
    case WaitReason::Slots:
        return "all " + num(c.slotLimit.value_or(0)) + " slot(s) in use";
    case WaitReason::None:
        break;
    }
    return "blocked";
}

std::string headline(const ProviderCapacity& c)
{
    std::string h = Console::printable(c.provider) + "  ";
    switch (c.level) {
    case CapacityLevel::Ok:
        h += "OK       next call can go now";
        break;
    case CapacityLevel::Near:
        h += "NEAR     next call can go now, close to a limit";
        break;
    case CapacityLevel::Blocked:
        h += "BLOCKED  " + blockedText(c);
        if (c.blockedUntilMs)
            h += ", next call in " + duration(c.nextCallInMs);
        else if (c.blockedBy == WaitReason::Paused)
            h += ", until resumed";
        else if (c.blockedBy == WaitReason::Slots)
            h += ", until a slot is released";
        break;
    }
    if (!c.hasLimits)
        h += " (no limits set)";
    return h;
}

void windowLines(
    const WindowCapacity& w, const std::string& indent, std::int64_t headroom, std::vector<Line>& out)
{
    const std::string window = duration(w.windowMs);
    auto limitNote = [&](const std::optional<std::int64_t>& given, const std::optional<std::int64_t>& eff) {
        return headroom != 100 && given && eff
            ? ", limit " + num(*given) + " at " + num(headroom) + " % headroom"
            : std::string();
    };
    if (w.requestLimit) {
        // The answer first (what is left, when more frees up): a narrow terminal cuts the end.
        std::string l = indent + "requests  " + num(w.requestsLeft.value_or(0)) + " left of "
            + num(*w.requestLimit) + " in " + window + " (" + num(w.requestsUsed) + " used)";
        if (w.nextRequestInMs > 0)
            l += ", next frees in " + duration(w.nextRequestInMs);
        out.push_back({ l + limitNote(w.requestLimitGiven, w.requestLimit) });
    }
    if (w.tokenLimit) {
        std::string l = indent + "tokens    " + num(w.tokensLeft.value_or(0)) + " left of "
            + num(*w.tokenLimit) + " in " + window + " (" + num(w.tokensUsed) + " used)";
        if (w.tokensFreeInMs > 0)
            l += ", more free in " + duration(w.tokensFreeInMs);
        out.push_back({ l + limitNote(w.tokenLimitGiven, w.tokenLimit) });
    }
    // Input and output tokens per window, then every per-day budget (issue 25's metrics).
    for (const BudgetCapacity& b : w.budgets) {
        const char* name = b.metric == "input_tokens" ? "input     "
            : b.metric == "output_tokens"             ? "output    "
            : b.metric == "requests"                  ? "requests  "
                                                      : "tokens    ";
        std::string l = indent + name + num(b.left) + " left of " + num(b.limit)
            + (b.perDay ? (b.dayEndsAtMs > 0 ? " today" : " in 24 h") : " in " + window) + " (" + num(b.used)
            + " used)";
        if (b.freeInMs > 0)
            l += b.freeInMs == Capacity::NEVER ? ", never by waiting"
                                               : ", more free in " + duration(b.freeInMs);
        out.push_back({ l + limitNote(b.given, b.limit) });
    }
}

struct CallerRate
{
    std::int64_t admitted = 0;
    std::int64_t rateLimited = 0;
};

// The history's admissions and 429s of the last RATE_SPAN_MS, read incrementally.
class Rates
{
public:
    static constexpr std::size_t MAX_EVENTS = 200000; // beyond: the oldest are dropped

    void reset()
    {
        m_reader.reset();
        m_events.clear();
    }
    // Returns a note for the frame ("" when all is well).
    std::string update(const QuotaReader& reader, std::int64_t nowMs)
    {
        if (!m_reader)
            m_reader = reader.history();
        auto batch = m_reader->poll();
        std::string note;
        if (!batch) {
            note = "history: " + batch.error().message;
        } else {
            for (auto& e : batch->events) {
                if ((e.type != EventType::Admit && e.type != EventType::RateLimited)
                    || e.timeMs < nowMs - WatchCommand::RATE_SPAN_MS)
                    continue;
                m_events.push_back({ e.timeMs, std::move(e.provider), std::move(e.caller),
                    e.type == EventType::RateLimited });
                if (m_events.size() > MAX_EVENTS)
                    m_events.pop_front();
            }
        }
        while (!m_events.empty() && m_events.front().timeMs < nowMs - WatchCommand::RATE_SPAN_MS)
            m_events.pop_front();
        return note;
    }
    [[nodiscard]] std::map<std::string, CallerRate> of(const std::string& provider, std::int64_t nowMs) const
    {
        std::map<std::string, CallerRate> out;
        for (const auto& e : m_events) {
            // Events from the future (a clock set back) are not "the last minute".
            if (e.provider != provider || e.timeMs > nowMs)
                continue;
            auto& r = out[e.caller];
            ++(e.rateLimited ? r.rateLimited : r.admitted);
        }
        return out;
    }

private:
    struct Event
    {
        std::int64_t timeMs;
        std::string provider;
        std::string caller;
        bool rateLimited;
    };
    std::unique_ptr<HistoryCursor> m_reader;
    std::deque<Event> m_events;
};

std::vector<Line> providerLines(const ProviderCapacity& c, const Rates& rates, std::int64_t nowMs)
{
    std::vector<Line> out;
    out.push_back({ headline(c),
        c.level == CapacityLevel::Ok         ? Colour::Green
            : c.level == CapacityLevel::Near ? Colour::Yellow
                                             : Colour::Red });
    windowLines(c.window, "    ", c.headroomPercent, out);
    if (c.slotLimit)
        out.push_back({ "    slots     " + num(c.slotsInUse) + " of " + num(*c.slotLimit) + " in use, "
            + num(c.slotsFree.value_or(0)) + " free" });
    if (c.backoffRemainingMs > 0)
        out.push_back({ "    backoff   " + duration(c.backoffRemainingMs) + " left after "
            + num(c.consecutive429) + " consecutive 429(s)" });
    else if (c.paceRemainingMs > 0)
        out.push_back({ "    pacing    admissions spread out for " + duration(c.paceRemainingMs) + " more" });
    else if (c.consecutive429 > 0)
        out.push_back({ "    429s      " + num(c.consecutive429) + " consecutive, backoff over" });
    if (c.paused)
        out.push_back({ "    paused    " + std::string(c.pausedAll ? "(everything) " : "") + "for "
            + duration(c.pausedForMs)
            + (c.pauseReason.empty() ? std::string() : ": " + Console::printable(c.pauseReason)) });
    if (c.waiting > 0)
        out.push_back(
            { "    queue     " + num(static_cast<std::int64_t>(c.waiting)) + " caller(s) waiting" });
    if (c.plan.atMs != 0) {
        if (const std::string words = QuotaFormat::planWords(c, nowMs); !words.empty()) {
            const Colour colour = c.plan.status == PlanUsage::Status::Rejected ? Colour::Red
                : c.plan.status == PlanUsage::Status::Warning                 ? Colour::Yellow
                                                                               : Colour::None;
            out.push_back({ "    plan      " + words, colour });
        }
    }
    for (const auto& m : c.models) {
        std::vector<Line> ml;
        windowLines(m, "      ", c.headroomPercent, ml);
        if (ml.empty())
            continue;
        out.push_back({ "    model " + Console::printable(m.model) });
        out.insert(out.end(), ml.begin(), ml.end());
    }
    const auto callers = rates.of(c.provider, nowMs);
    if (callers.empty()) {
        out.push_back({ "    callers   none in the last minute", Colour::Dim });
    } else {
        std::vector<std::pair<std::string, CallerRate>> sorted(callers.begin(), callers.end());
        std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
            return a.second.admitted + a.second.rateLimited > b.second.admitted + b.second.rateLimited;
        });
        out.push_back({ "    callers   last minute:" });
        for (const auto& [name, r] : sorted) {
            std::string l = "      " + Console::printable(name.empty() ? std::string("(anonymous)") : name)
                + "  " + num(r.admitted) + "/min admitted";
            if (r.rateLimited)
                l += ", " + num(r.rateLimited) + " x 429";
            out.push_back({ l });
        }
    }
    return out;
}

std::string clockText(std::int64_t nowMs)
{
    const std::time_t t = static_cast<std::time_t>(nowMs / 1000);
    std::tm tm {};
    ::localtime_r(&t, &tm);
    char buf[16];
    std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
    return buf;
}

std::string secondsText(double seconds)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g s", seconds);
    return buf;
}

// ---- one frame -----------------------------------------------------------------------------

// A watch keeps its reader, its history cursor and its change feed from frame to frame;
// all are opened again after the home was missing or unreadable.
struct Watched
{
    std::unique_ptr<QuotaReader> reader;
    std::unique_ptr<ChangeFeed> feed; // null: redraw on the interval only
    void reset()
    {
        feed.reset();
        reader.reset();
    }
};

std::vector<Line> frame(
    const HomeSpec& spec, Watched& watched, double seconds, bool tty, Rates& rates, const ProcessProbe& probe)
{
    std::unique_ptr<QuotaReader>& reader = watched.reader;
    const std::string home = spec.text();
    const SystemClock clock;
    const std::int64_t now = clock.unixMs();
    std::vector<Line> out;
    out.push_back({ "Tollgate status  " + Console::printable(home) + "  every " + secondsText(seconds) + "  "
            + clockText(now) + (tty ? "  (q quits)" : ""),
        Colour::Dim });

    Result<QuotaView> view = Error::make(ErrorKind::NotFound, home, "");
    if (!reader) {
        FileQuotaReader::Options options;
        options.lockTimeout = std::chrono::milliseconds(WatchCommand::LOCK_WAIT_MS);
        auto opened = StoreFactory::openReader(spec, options);
        rates.reset(); // a new reader: its history cursor starts over
        if (opened) {
            reader = std::move(opened).value();
            // Changes wake the watch at once; without a feed the interval still redraws.
            auto feed = reader->subscribe();
            watched.feed = feed ? std::move(feed).value() : nullptr;
        } else {
            view = opened.error();
        }
    }
    if (reader)
        view = reader->snapshot();
    if (!view && view.error().kind == ErrorKind::NotFound) {
        watched.reset(); // no home (or it went away): look for it again next time
        out.push_back(
            { "no Tollgate home here yet (nothing has run); waiting for it to appear", Colour::Yellow });
        return out;
    }
    if (!view) {
        // The reader is kept: a writer stopped for a while is not a new home (the feed and
        // the history cursor stay good).
        out.push_back({ "cannot read the home: " + Console::printable(view.error().message), Colour::Red });
        return out;
    }
    if (!view->corruptFile.empty())
        out.push_back({ "corrupt: " + Console::printable(view->corruptFile) + ": "
                + Console::printable(view->corruptReason),
            Colour::Red });
    const std::string historyNote = rates.update(*reader, now);
    if (!historyNote.empty())
        out.push_back({ Console::printable(historyNote), Colour::Yellow });

    const QuotaState* state = view->state ? &*view->state : nullptr;
    if (state && state->pausedAll)
        out.push_back({ "ALL PAUSED"
                + (state->pauseReason.empty() ? std::string()
                                              : ": " + Console::printable(state->pauseReason)),
            Colour::Red });
    const auto all = Capacity::compute(state, view->limits, now, &probe);
    if (all.empty())
        out.push_back(
            { "no providers yet; add one with: tollgate limits set PROVIDER --requests N --window SECONDS" });
    for (const auto& c : all) {
        out.push_back({ "" });
        const auto lines = providerLines(c, rates, now);
        out.insert(out.end(), lines.begin(), lines.end());
    }
    return out;
}

// Display columns of a printable UTF-8 line (one per code point: Tollgate's text is short).
std::string fit(const std::string& text, std::size_t cols)
{
    std::size_t n = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && n++ == cols)
            return text.substr(0, i);
    }
    return text;
}

std::string render(const std::vector<Line>& lines, bool screen, bool colour)
{
    std::string out;
    if (!screen) {
        for (const auto& l : lines)
            out += l.text + "\n";
        return out;
    }
    winsize ws {};
    std::size_t cols = 80;
    std::size_t rows = 24;
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
        cols = ws.ws_col;
        rows = ws.ws_row;
    }
    std::size_t shown = lines.size();
    std::string more;
    if (shown > rows) {
        shown = rows > 1 ? rows - 1 : 0;
        more = "... " + std::to_string(lines.size() - shown) + " more line(s): enlarge the window";
    }
    out += "\x1b[H";
    auto put = [&](const std::string& text, Colour c, bool last) {
        const char* on = !colour  ? ""
            : c == Colour::Green  ? "\x1b[1;32m"
            : c == Colour::Yellow ? "\x1b[1;33m"
            : c == Colour::Red    ? "\x1b[1;31m"
            : c == Colour::Dim    ? "\x1b[2m"
                                  : "";
        out += on;
        out += fit(text, cols);
        if (*on)
            out += "\x1b[0m";
        out += "\x1b[K";
        if (!last)
            out += "\n";
    };
    for (std::size_t i = 0; i < shown; ++i)
        put(lines[i].text, lines[i].colour, i + 1 == shown && more.empty());
    if (!more.empty())
        put(more, Colour::Dim, true);
    out += "\x1b[J";
    return out;
}

bool wantsColour(bool screen)
{
    if (!screen)
        return false;
    const char* noColor = std::getenv("NO_COLOR");
    if (noColor && *noColor)
        return false;
    const char* term = std::getenv("TERM");
    return !(term && std::string_view(term) == "dumb");
}

} // namespace

std::string WatchCommand::checkSeconds(const std::string& text)
{
    auto v = CliOptions::parseSeconds(text);
    if (!v || *v < MIN_SECONDS || *v > MAX_SECONDS)
        return "takes a number of seconds from 0.1 to 3600, not '" + text + "'";
    return {};
}

int WatchCommand::run(const std::optional<std::string>& homeOption, double seconds)
{
    Console console("status", false, false);
    auto spec = HomeSpec::resolve(homeOption);
    if (!spec)
        return console.fail(spec.error());
    const HomeSpec home = *spec;
    const std::int64_t intervalMs = std::llround(std::clamp(seconds, MIN_SECONDS, MAX_SECONDS) * 1000.0);
    const bool screen = ::isatty(STDOUT_FILENO) == 1;
    const bool keys = ::isatty(STDIN_FILENO) == 1;
    const bool colour = wantsColour(screen);

    SignalRoute signals;
    if (!signals.valid())
        return console.fail(Error::make(ErrorKind::Io, "", std::string("pipe: ") + std::strerror(errno)));
    Terminal terminal(screen, keys);
    const ProcessProbe probe;
    Rates rates;
    Watched watched;
    bool stdinOpen = keys;
    bool first = true;

    for (;;) {
        const auto lines = frame(home, watched, seconds, screen, rates, probe);
        const auto drawnAt = std::chrono::steady_clock::now();
        std::string text = render(lines, screen, colour);
        if (!screen && !first)
            text.insert(0, "\n");
        first = false;
        if (!writeScreen(STDOUT_FILENO, text))
            return EXIT_IO; // the terminal or the reader went away: nobody to tell

        // Without a change feed (no home yet, or it cannot be watched) look at least every
        // NO_FEED_LOOK_MS, so a home that appears is shown without waiting a long interval.
        const std::int64_t waitMs
            = watched.feed ? intervalMs : std::min<std::int64_t>(intervalMs, NO_FEED_LOOK_MS);
        auto deadline = drawnAt + std::chrono::milliseconds(waitMs);
        bool redraw = false;
        while (!redraw) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now())
                                  .count();
            if (left <= 0)
                break;
            // Signals and keys first, the change feed last (it may be absent).
            pollfd fds[3]
                = { { signals.readFd(), POLLIN, 0 }, { STDIN_FILENO, POLLIN, 0 }, { -1, POLLIN, 0 } };
            const int feedFd = watched.feed ? watched.feed->fd() : -1;
            fds[2].fd = feedFd; // poll ignores a negative descriptor
            if (!stdinOpen)
                fds[1].fd = -1;
            const int n = ::poll(fds, 3, static_cast<int>(std::min<std::int64_t>(left, 60000)));
            if (n < 0 && errno != EINTR)
                return console.fail(
                    Error::make(ErrorKind::Io, "", std::string("poll: ") + std::strerror(errno)));
            if (n <= 0)
                continue;
            if (fds[0].revents & POLLIN) {
                unsigned char sigs[32];
                const ssize_t got = ::read(signals.readFd(), sigs, sizeof sigs);
                for (ssize_t i = 0; i < got; ++i) {
                    const int sig = sigs[i];
                    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
                        return EXIT_OK; // Terminal and SignalRoute give everything back
                    if (sig == SIGTSTP) {
                        // Stop as the shell expects, with the terminal given back meanwhile.
                        terminal.leave();
                        ::signal(SIGTSTP, SIG_DFL);
                        ::raise(SIGTSTP);
                        SignalRoute::install(SIGTSTP);
                        terminal.enter();
                    }
                    redraw = true; // SIGWINCH, SIGCONT, after a stop
                }
            }
            if (feedFd >= 0 && (fds[2].revents & POLLIN) && watched.feed->drain()) {
                // A change: redraw soon, but at most every MIN_CHANGE_REDRAW_MS however fast
                // the callers go (a burst of admissions is one frame, not hundreds).
                deadline = std::min(deadline, drawnAt + std::chrono::milliseconds(MIN_CHANGE_REDRAW_MS));
                if (watched.feed->lost())
                    watched.reset(); // the home went away: the next frame looks for it again
            }
            if (stdinOpen && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
                char keysRead[64];
                const ssize_t got = ::read(STDIN_FILENO, keysRead, sizeof keysRead);
                if (got <= 0 && !(got < 0 && (errno == EINTR || errno == EAGAIN)))
                    stdinOpen = false; // end of input: only signals end the watch now
                for (ssize_t i = 0; i < got; ++i) {
                    if (keysRead[i] == 'q' || keysRead[i] == 'Q')
                        return EXIT_OK;
                    if (keysRead[i] == '\x0c' && screen) // Ctrl-L: repaint from scratch
                        (void)writeScreen(STDOUT_FILENO, "\x1b[2J");
                    redraw = redraw || keysRead[i] == '\x0c' || keysRead[i] == ' ';
                }
            }
        }
    }
}

} // namespace tollgate::cli
