// Rows 1, 3, 4, 5 and 7: QuotaLimiter::acquire on a FileQuotaStore — uncontended latency,
// multi-process aggregate throughput, cost against the window's size, the wake-up latency of
// a blocked waiter when the only parallel slot is released, and the cost of limits in the
// provider's terms (6 limits, 10 model classes) against a single limit.

#include "backend/quotalimiter.h"
#include "base/manualclock.h"
#include "base/systemclock.h"
#include "benches.h"
#include "store/filequotastore.h"
#include "store/statefile.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <unistd.h>

namespace bench {

using namespace tollgate;

namespace {

constexpr const char* PROVIDER = "bench";
constexpr std::int64_t WINDOW_MS = 60000;

// A limiter on a home directory, as one process of the bench uses it.
struct Client
{
    ProcessProbe probe;
    std::unique_ptr<FileQuotaStore> store;
    std::unique_ptr<QuotaLimiter> limiter;

    Client(const std::string& home, const Clock& clock)
    {
        auto s = FileQuotaStore::open(home, clock);
        if (!s)
            throw std::runtime_error("FileQuotaStore::open: " + s.error().describe());
        store = std::move(s).value();
        limiter = std::make_unique<QuotaLimiter>(*store, clock, probe);
    }
};

void setLimits(const std::string& home, const Clock& clock, const ProviderLimits& l)
{
    Client c(home, clock);
    if (auto r = c.limiter->setLimits(PROVIDER, l, "bench"); !r)
        throw std::runtime_error("setLimits: " + r.error().describe());
}

void setLimits(
    const std::string& home, const Clock& clock, std::int64_t requests, std::optional<std::int64_t> parallel)
{
    ProviderLimits l;
    l.requests = requests;
    l.windowMs = WINDOW_MS;
    l.parallel = parallel;
    setLimits(home, clock, l);
}

AdmitRequest request(bool wantsSlot = false)
{
    AdmitRequest r;
    r.provider = PROVIDER;
    r.caller = "bench";
    r.wantsSlot = wantsSlot;
    return r;
}

std::string homeIn(const TempDir& dir)
{
    return dir.path() + "/home";
}

} // namespace

ProviderLimits budgetLimits(BudgetConfig config)
{
    // Far above what a run uses (22,000 calls x 1,500 tokens = 33 million): nothing waits.
    constexpr std::int64_t PER_WINDOW = 1000000000;
    constexpr std::int64_t PER_DAY = 100000000000;
    ProviderLimits l;
    l.windowMs = WINDOW_MS;
    l.requests = PER_WINDOW;
    if (config == BudgetConfig::One)
        return l;
    l.inputTokens = PER_WINDOW;
    l.outputTokens = PER_WINDOW;
    l.perDay.requests = PER_DAY;
    l.perDay.inputTokens = PER_DAY;
    l.perDay.outputTokens = PER_DAY;
    auto reset = DayReset::parse("00:00@America/Los_Angeles");
    if (!reset)
        throw std::runtime_error("DayReset::parse: " + reset.error().describe());
    l.dayReset = reset.value();
    if (config == BudgetConfig::Six)
        return l;
    // Ten classes as a user of several providers' model families would write them; the
    // request's model is in "opus" and "claude", the two classes it is checked and recorded in.
    const std::pair<const char*, std::vector<std::string>> classes[] = {
        { "claude", { "claude-*" } },
        { "opus", { "claude-opus-4*" } },
        { "sonnet", { "claude-sonnet-4*", "claude-3-7-sonnet*" } },
        { "haiku", { "claude-haiku-4*", "claude-3-5-haiku*" } },
        { "gpt-4o", { "gpt-4o", "gpt-4o-2024-*" } },
        { "gpt-4o-mini", { "gpt-4o-mini*" } },
        { "gpt-5", { "gpt-5*" } },
        { "reasoning", { "o1*", "o3*", "o4-mini*" } },
        { "gemini-pro", { "gemini-*-pro*" } },
        { "gemini-flash", { "gemini-*-flash*" } },
    };
    for (const auto& [name, patterns] : classes) {
        if (config == BudgetConfig::Two && std::string(name) != "claude" && std::string(name) != "opus")
            continue;
        ModelLimits m(PER_WINDOW, std::nullopt, WINDOW_MS);
        m.inputTokens = PER_WINDOW;
        m.outputTokens = PER_WINDOW;
        m.perDay = l.perDay;
        m.match = patterns;
        l.models.emplace(name, m);
    }
    return l;
}

AdmitRequest budgetRequest(BudgetConfig config, const std::string& provider)
{
    AdmitRequest r;
    r.provider = provider;
    r.caller = "bench";
    if (config == BudgetConfig::One)
        return r; // as row 1a
    r.inputTokens = 1000; // stated, as `acquire --input-tokens 1000 --output-tokens 500` does
    r.outputTokens = 500;
    r.tokens = r.inputTokens + r.outputTokens;
    if (config == BudgetConfig::Full || config == BudgetConfig::Two)
        r.model = "claude-opus-4-5-20251101";
    return r;
}

void benchAcquire(const Config& c, std::vector<Row>& rows, Figures& f)
{
    std::fprintf(stderr, "bench: 1. acquire latency, one process, uncontended\n");
    TempDir dir("tollgate-bench-acquire");
    SystemClock clock;
    setLimits(homeIn(dir), clock, 1000000000, std::nullopt);
    Client cl(homeIn(dir), clock);

    auto measure = [&](std::chrono::milliseconds ahead) {
        std::vector<std::int64_t> samples;
        samples.reserve(static_cast<std::size_t>(c.calls));
        for (int i = 0; i < c.warmup + c.calls; ++i) {
            const WallTime deadline = clock.now() + ahead;
            const std::int64_t t0 = monoNs();
            auto p = cl.limiter->acquire(request(), deadline);
            const std::int64_t t1 = monoNs();
            if (!p)
                throw std::runtime_error("acquire failed: " + p.error().describe());
            if (i >= c.warmup)
                samples.push_back(t1 - t0);
        }
        return summarize(std::move(samples));
    };

    const Summary tryS = measure(std::chrono::milliseconds(0));
    Row r1 { "1a", "acquire, deadline = now (a try), 1 process", {}, {}, {}, {}, 0,
        "FileQuotaStore in a fresh home; limit 1e9 req / 60 s" };
    fillLatency(r1, tryS);
    r1.opsPerSec = 1e6 / tryS.meanUs;
    rows.push_back(r1);
    f.acquireP50Us = tryS.p50Us;

    const Summary futS = measure(std::chrono::milliseconds(1000));
    Row r2 { "1b", "acquire, deadline = now + 1 s, 1 process", {}, {}, {}, {}, 0,
        "same home, continues after 1a" };
    fillLatency(r2, futS);
    r2.opsPerSec = 1e6 / futS.meanUs;
    rows.push_back(r2);

    auto snap = cl.limiter->snapshot();
    if (!snap)
        throw std::runtime_error("snapshot: " + snap.error().describe());
    f.stateBytes = snap->state.encode().size() + StateFile::HEADER_BYTES;
}

void benchAggregate(const Config& c, std::vector<Row>& rows, Figures& f)
{
    constexpr std::size_t MAX_SAMPLES = 1 << 20; // per worker; more calls are counted, not timed
    struct Slot
    {
        std::int64_t admitted;
        std::int64_t errors;
        std::int64_t endNs;
        std::int64_t samples;
    };
    for (int procs : { 1, 2, 4, 8 }) {
        std::fprintf(
            stderr, "bench: 3. aggregate admissions/s, %d process(es), %d ms\n", procs, c.durationMs);
        TempDir dir("tollgate-bench-aggregate");
        SystemClock clock;
        setLimits(homeIn(dir), clock, 1000000000, std::nullopt);

        const std::size_t slotBytes = sizeof(Slot) * static_cast<std::size_t>(procs);
        const std::size_t sampleBytes = sizeof(std::int64_t) * MAX_SAMPLES * static_cast<std::size_t>(procs);
        auto* slots = static_cast<Slot*>(sharedAlloc(slotBytes));
        auto* samples = static_cast<std::int64_t*>(sharedAlloc(sampleBytes));

        std::unique_ptr<Client> client; // each child's own store and limiter (set up after fork)
        Workers w;
        w.setup = [&](int) {
            client = std::make_unique<Client>(homeIn(dir), clock);
            return true;
        };
        w.run = [&](int i) {
            Slot& s = slots[i];
            std::int64_t* mine = samples + static_cast<std::size_t>(i) * MAX_SAMPLES;
            const std::int64_t end = monoNs() + static_cast<std::int64_t>(c.durationMs) * 1000000;
            for (std::int64_t t0 = monoNs(); t0 < end;) {
                auto p = client->limiter->acquire(request(), clock.now());
                const std::int64_t t1 = monoNs();
                if (p)
                    ++s.admitted;
                else
                    ++s.errors;
                if (s.samples < static_cast<std::int64_t>(MAX_SAMPLES))
                    mine[s.samples++] = t1 - t0;
                t0 = t1;
            }
            s.endNs = monoNs();
            return 0;
        };
        std::string error;
        const auto start = runWorkers(procs, w, c.durationMs + 30000, error);
        if (!start) {
            sharedFree(slots, slotBytes);
            sharedFree(samples, sampleBytes);
            throw std::runtime_error("aggregate with " + std::to_string(procs) + " processes: " + error);
        }
        std::int64_t admitted = 0;
        std::int64_t errors = 0;
        std::int64_t endNs = *start;
        std::vector<std::int64_t> all;
        std::int64_t fewest = INT64_MAX;
        std::int64_t most = 0;
        for (int i = 0; i < procs; ++i) {
            fewest = std::min(fewest, slots[i].admitted);
            most = std::max(most, slots[i].admitted);
            admitted += slots[i].admitted;
            errors += slots[i].errors;
            endNs = std::max(endNs, slots[i].endNs);
            const std::int64_t* mine = samples + static_cast<std::size_t>(i) * MAX_SAMPLES;
            all.insert(all.end(), mine, mine + slots[i].samples);
        }
        sharedFree(slots, slotBytes);
        sharedFree(samples, sampleBytes);
        const double wallS = static_cast<double>(endNs - *start) / 1e9;
        const double perSec = static_cast<double>(admitted) / wallS;
        const Summary s = summarize(std::move(all));
        Row r { "3",
            "aggregate admissions/s, " + std::to_string(procs) + " process" + (procs > 1 ? "es" : ""), {}, {},
            {}, perSec, 0,
            fmtThousands(static_cast<double>(admitted)) + " admitted in " + fmtNumber(wallS, 2) + " s wall"
                + (procs > 1 ? "; per process " + fmtThousands(static_cast<double>(fewest)) + "–"
                            + fmtThousands(static_cast<double>(most))
                             : std::string())
                + (errors ? "; " + std::to_string(errors) + " refused/failed" : std::string())
                + "; per-call latency p99.9 " + fmtNumber(s.p999Us / 1000.0, 1) + " ms, max "
                + fmtNumber(s.maxUs / 1000.0, 1) + " ms" };
        fillLatency(r, s);
        rows.push_back(r);
        if (procs == 1)
            f.agg1PerSec = perSec;
        if (procs == 8) {
            f.agg8PerSec = perSec;
            f.agg8P99Us = s.p99Us;
        }
    }
}

void benchWindowSizes(const Config& c, std::vector<Row>& rows, Figures& f)
{
    for (std::int64_t limit : { 100LL, 10000LL, 1000000LL }) {
        std::fprintf(
            stderr, "bench: 4. acquire cost at %lld requests per window\n", static_cast<long long>(limit));
        TempDir dir("tollgate-bench-window");
        ManualClock clock(std::chrono::system_clock::now());
        setLimits(homeIn(dir), clock, limit, std::nullopt);
        Client cl(homeIn(dir), clock);

        // Steady state from the first call: one window of history written straight into the
        // state (simulating a full window of traffic would take minutes at 1,000,000), filled
        // to FILL of the limit — the level at which a window running at the limit's rate
        // settles, since up to one of its 32 buckets (~3%) of older admissions still counts.
        // The measured calls then arrive at the limit's rate (one per window / limit).
        constexpr double FILL = 0.97;
        const std::int64_t stepNs = WINDOW_MS * 1000000 / limit;
        const auto prefill = static_cast<std::int64_t>(static_cast<double>(limit) * FILL);
        auto fill = cl.store->transact([&](QuotaTransaction& tx) -> Result<void> {
            const ProviderLimits* l = tx.limits.find(PROVIDER);
            const std::int64_t nowNs
                = std::chrono::duration_cast<std::chrono::nanoseconds>(clock.now().time_since_epoch())
                      .count();
            ProviderState& p = tx.state.ensureProvider(PROVIDER);
            QuotaPolicy::syncProvider(p, *l, nowNs / 1000000);
            ScopeWindow* sc = p.scope("");
            const std::int64_t spacingNs = WINDOW_MS * 1000000 / prefill;
            for (std::int64_t i = 0; i < prefill; ++i)
                sc->window.record((nowNs - WINDOW_MS * 1000000 + i * spacingNs) / 1000000, 1, 0);
            p.lastAdmitMs = nowNs / 1000000;
            tx.changed = true;
            return {};
        });
        if (!fill)
            throw std::runtime_error("pre-fill: " + fill.error().describe());

        std::vector<std::int64_t> samples;
        std::vector<std::int64_t> refusedSamples;
        samples.reserve(static_cast<std::size_t>(c.windowCalls));
        std::int64_t admitted = 0;
        const int warm = std::min(c.warmup, 500);
        for (int i = 0; i < warm + c.windowCalls; ++i) {
            const std::int64_t t0 = monoNs();
            auto p = cl.limiter->acquire(request(), clock.now());
            const std::int64_t t1 = monoNs();
            if (!p && p.error().kind != ErrorKind::Timeout)
                throw std::runtime_error("acquire failed: " + p.error().describe());
            if (i >= warm) {
                samples.push_back(t1 - t0);
                admitted += p ? 1 : 0;
                if (!p)
                    refusedSamples.push_back(t1 - t0);
            }
            clock.advance(std::chrono::nanoseconds(stepNs));
        }
        auto snap = cl.limiter->snapshot();
        std::int64_t inWindow = 0;
        if (snap) {
            if (const ProviderState* p = snap->state.provider(PROVIDER); p && p->scope(""))
                inWindow = p->scope("")->window.usage(snap->nowMs).requests;
        }
        const Summary s = summarize(std::move(samples));
        Row r { "4",
            "acquire (try) at " + fmtThousands(static_cast<double>(limit)) + " req / 60 s window, full", {},
            {}, {}, {}, 0,
            "ManualClock +" + fmtNumber(static_cast<double>(stepNs) / 1e6, 3) + " ms per call; "
                + fmtNumber(100.0 * static_cast<double>(admitted) / static_cast<double>(c.windowCalls), 1)
                + "% admitted"
                + (refusedSamples.empty()
                        ? std::string()
                        : " (refused tries: p50 " + fmtNumber(summarize(refusedSamples).p50Us, 1) + " µs)")
                + "; window pre-filled to 97%, holds " + fmtThousands(static_cast<double>(inWindow))
                + " at the end" };
        fillLatency(r, s);
        rows.push_back(r);
        f.windowP50Us.emplace_back(limit, s.p50Us);
        f.windowP99Us.emplace_back(limit, s.p99Us);
    }
}

void benchWakeup(const Config& c, std::vector<Row>& rows, Figures& f)
{
    std::fprintf(stderr,
        "bench: 5. wake-up latency, 2 processes ping-pong over 1 parallel slot, %d hand-overs\n", c.rounds);
    constexpr std::int64_t HOLD_US = 2000; // the holder waits this long so the waiter is surely blocked
    constexpr auto WAIT_LIMIT = std::chrono::seconds(5);
    TempDir dir("tollgate-bench-wakeup");
    SystemClock clock;
    setLimits(homeIn(dir), clock, 1000000000, 1);

    const auto rounds = static_cast<std::size_t>(c.rounds);
    struct Shared
    {
        std::int64_t failures;
        std::int64_t blocked; // hand-overs in which the waiter's acquire lasted >= HOLD_US / 2
    };
    const std::size_t bytes = sizeof(Shared) + 3 * rounds * sizeof(std::int64_t);
    auto* sh = static_cast<Shared*>(sharedAlloc(bytes));
    auto* tRelease = reinterpret_cast<std::int64_t*>(sh + 1);
    auto* tAcquired = tRelease + rounds;
    auto* tWaitStart = tAcquired + rounds;

    int to[2][2]; // to[k]: the pipe process k reads "I am about to wait" bytes from
    if (::pipe(to[0]) != 0 || ::pipe(to[1]) != 0)
        throw std::runtime_error("pipe failed");

    std::unique_ptr<Client> client;
    Permit permit;
    Workers w;
    w.setup = [&](int k) {
        client = std::make_unique<Client>(homeIn(dir), clock);
        if (k == 0) { // process 0 holds the slot for the first hand-over
            auto p = client->limiter->acquire(request(true), clock.now());
            if (!p) {
                std::fprintf(stderr, "bench wakeup: first acquire: %s\n", p.error().describe().c_str());
                return false;
            }
            permit = std::move(*p);
        }
        return true;
    };
    w.run = [&](int k) {
        for (std::size_t r = 0; r < rounds; ++r) {
            if (static_cast<int>(r % 2) == k) { // holder: wait for the other to block, then release
                char b = 0;
                if (readByte(to[k][0], monoNs() + 10000000000LL, b) != 1) {
                    __atomic_add_fetch(&sh->failures, 1, __ATOMIC_SEQ_CST);
                    return 1;
                }
                sleepUs(HOLD_US);
                const std::int64_t tA = monoNs();
                auto rel = permit.release();
                tRelease[r] = tA;
                if (!rel) {
                    std::fprintf(stderr, "bench wakeup: release: %s\n", rel.error().describe().c_str());
                    __atomic_add_fetch(&sh->failures, 1, __ATOMIC_SEQ_CST);
                    return 1;
                }
            } else { // waiter: announce, then block in acquire until the holder releases
                const char b = 'w';
                if (::write(to[1 - k][1], &b, 1) != 1)
                    return 1;
                const std::int64_t t0 = monoNs();
                auto p = client->limiter->acquire(request(true), clock.now() + WAIT_LIMIT);
                const std::int64_t tB = monoNs();
                tWaitStart[r] = t0;
                tAcquired[r] = tB;
                if (!p) {
                    std::fprintf(stderr, "bench wakeup: acquire: %s\n", p.error().describe().c_str());
                    __atomic_add_fetch(&sh->failures, 1, __ATOMIC_SEQ_CST);
                    return 1;
                }
                if (tB - t0 >= HOLD_US * 500)
                    __atomic_add_fetch(&sh->blocked, 1, __ATOMIC_SEQ_CST);
                permit = std::move(*p);
            }
        }
        (void)permit.release();
        return 0;
    };
    std::string error;
    const auto start = runWorkers(2, w, 60000, error);
    for (auto& p : to) {
        ::close(p[0]);
        ::close(p[1]);
    }
    if (!start) {
        sharedFree(sh, bytes);
        throw std::runtime_error("wake-up ping-pong: " + error);
    }
    std::vector<std::int64_t> lat;
    for (std::size_t r = 0; r < rounds; ++r)
        lat.push_back(tAcquired[r] - tRelease[r]);
    const std::int64_t blocked = sh->blocked;
    sharedFree(sh, bytes);
    const Summary s = summarize(std::move(lat));
    Row row { "5", "wake-up: holder's release -> blocked waiter's acquire returns", {}, {}, {}, {}, 0,
        "2 processes, parallel 1, waiter blocked in " + std::to_string(blocked) + "/" + std::to_string(rounds)
            + " hand-overs; max " + fmtNumber(s.maxUs, 0) + " µs" };
    fillLatency(row, s);
    rows.push_back(row);
    f.wakeP99Us = s.p99Us;
}

void benchBudgets(const Config& c, std::vector<Row>& rows, Figures& f)
{
    std::fprintf(stderr,
        "bench: 7. acquire with 1 limit, 6 limits, 6 limits + 10 classes, + 2 classes (interleaved)\n");
    struct Setup
    {
        BudgetConfig config;
        const char* id;
        const char* what;
        std::unique_ptr<TempDir> dir;
        std::unique_ptr<Client> client;
        AdmitRequest request;
        std::vector<std::int64_t> samples;
    };
    SystemClock clock;
    Setup setups[] = {
        { BudgetConfig::One, "7a", "acquire (try), 1 limit (requests per window), 1 process", {}, {}, {}, {} },
        { BudgetConfig::Six, "7b",
            "acquire (try), 6 limits (requests, input, output per window and per calendar day), 1 process", {},
            {}, {}, {} },
        { BudgetConfig::Full, "7c",
            "acquire (try), 6 limits + 10 classes of 6 limits, model in 2 classes, 1 process", {}, {}, {}, {} },
        { BudgetConfig::Two, "7e",
            "(analysis) as 7c with only the 2 classes the model is in, 1 process", {}, {}, {}, {} },
    };
    constexpr int SETUPS = static_cast<int>(std::size(setups));
    // --budgets-config: one configuration alone, for a profiler (valgrind --tool=callgrind).
    const char* const NAMES[] = { "one", "six", "full", "two" };
    auto chosen = [&](const Setup& s) {
        return c.budgetsConfig.empty() || c.budgetsConfig == NAMES[static_cast<int>(s.config)];
    };
    for (Setup& s : setups) {
        if (!chosen(s))
            continue;
        s.dir = std::make_unique<TempDir>("tollgate-bench-budgets");
        setLimits(homeIn(*s.dir), clock, budgetLimits(s.config));
        s.client = std::make_unique<Client>(homeIn(*s.dir), clock);
        s.request = budgetRequest(s.config, PROVIDER);
        s.samples.reserve(static_cast<std::size_t>(c.calls));
    }
    auto call = [&](Setup& s, bool timed) {
        const std::int64_t t0 = monoNs();
        auto p = s.client->limiter->acquire(s.request, clock.now());
        const std::int64_t t1 = monoNs();
        if (!p)
            throw std::runtime_error(std::string(s.id) + ": acquire failed: " + p.error().describe());
        if (timed)
            s.samples.push_back(t1 - t0);
    };
    for (Setup& s : setups) {
        for (int i = 0; s.client && i < c.warmup; ++i)
            call(s, false);
    }
    // Blocks of calls taking turns, the order rotated every block, so that a slow phase of a
    // shared machine falls on all three alike.
    constexpr int BLOCK = 500;
    int block = 0;
    for (int done = 0; done < c.calls; done += BLOCK, ++block) {
        const int n = std::min(BLOCK, c.calls - done);
        for (int k = 0; k < SETUPS; ++k) {
            Setup& s = setups[(block + k) % SETUPS];
            for (int i = 0; s.client && i < n; ++i)
                call(s, true);
        }
    }
    std::optional<double> oneP50;
    for (Setup& s : setups) {
        if (!s.client)
            continue;
        auto snap = s.client->limiter->snapshot();
        if (!snap)
            throw std::runtime_error("snapshot: " + snap.error().describe());
        const ProviderState* p = snap->state.provider(PROVIDER);
        const std::size_t scopes = p ? p->scopes.size() : 0;
        const std::size_t bytes = snap->state.encode().size() + StateFile::HEADER_BYTES;
        const Summary sum = summarize(std::move(s.samples));
        std::string note = std::to_string(scopes) + " scope" + (scopes == 1 ? "" : "s") + " in the state, "
            + std::to_string(bytes) + " B written per admission; blocks of " + std::to_string(BLOCK)
            + (c.budgetsConfig.empty() ? " taking turns with the other rows 7" : " (this row alone)");
        if (oneP50)
            note = fmtNumber(sum.p50Us / *oneP50, 2) + "× 7a's p50; " + note;
        Row r { s.id, s.what, {}, {}, {}, 1e6 / sum.meanUs, 0, note };
        fillLatency(r, sum);
        rows.push_back(r);
        switch (s.config) {
        case BudgetConfig::One:
            oneP50 = sum.p50Us;
            f.budgetOneP50Us = sum.p50Us;
            f.budgetOneP99Us = sum.p99Us;
            break;
        case BudgetConfig::Six:
            f.budgetSixP50Us = sum.p50Us;
            break;
        case BudgetConfig::Full:
            f.budgetFullP50Us = sum.p50Us;
            f.budgetFullP99Us = sum.p99Us;
            break;
        case BudgetConfig::Two:
            f.budgetTwoP50Us = sum.p50Us;
            break;
        }
    }
}

} // namespace bench
