// Row 6: the usual alternative — a Redis token bucket (a Lua script run with EVALSHA) on a
// private redis-server that this bench starts on a loopback port and always stops again —
// and, on the same server in the same run, Tollgate's own Redis home (rows 6c–6e).

#include "benches.h"

#include <cstdio>
#include <functional>

#if TOLLGATE_BENCH_HIREDIS

#include "backend/quotalimiter.h"
#include "backend/storefactory.h"
#include "base/systemclock.h"
#include "store/redisconnection.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <hiredis.h>
#include <memory>
#include <netinet/in.h>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace bench {

namespace {

// A token bucket per key, refilled continuously: the hash holds the tokens left and the
// time (ms) they were counted at. ARGV: now ms, capacity, refill per ms, tokens wanted.
// Returns 1 when the tokens were taken, 0 when not; the bucket is stored either way and
// expires an hour after its last use. (Equivalent in behaviour to seed 004's script.)
constexpr const char* TOKEN_BUCKET = R"lua(
local now, cap, perMs, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(saved[1]) or cap
local at = tonumber(saved[2]) or now
local since = now - at
if since < 0 then since = 0 end
tokens = math.min(cap, tokens + since * perMs)
local granted = 0
if tokens >= want then
  tokens = tokens - want
  granted = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'at', now)
redis.call('PEXPIRE', KEYS[1], 3600000)
return granted
)lua";

// Row 6f: a lower bound for any admission with the semantics issue 10 asks of the Redis home,
// not an implementation of it. It does strictly less than an admission must: the global pause
// and 429 backoff, a rolling window of requests and tokens for the provider (a ring of 33
// buckets as hash fields with running sums, so only the buckets that left the window are
// read), an empty-queue check, a fence that only grows, and one history entry (XADD). It
// leaves out what a real admission needs besides: per-model windows, slots and their holders
// (host, pid, lease), per-caller accounting, headroom, waiters' deadlines, lost-reply
// recovery, validation of forged values, and the PUBLISH that wakes the dashboard. If even
// this falls short of 0.8x the bucket, so does every implementation of the issue's semantics.
// KEYS: global hash, provider hash, fence counter, history stream. ARGV: tokens, caller.
constexpr const char* LOWER_BOUND_ADMISSION = R"lua(
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local g = redis.call('HMGET', KEYS[1], 'paused', 'backoff_until')
if g[1] == '1' then return {0, 'paused'} end
if tonumber(g[2] or 0) > now then return {0, 'backoff'} end
local p = redis.call('HMGET', KEYS[2], 'lim_r', 'lim_t', 'win', 'sum_r', 'sum_t', 'cur', 'cur_r', 'cur_t', 'queue')
local limR, limT, win = tonumber(p[1] or 1e12), tonumber(p[2] or 1e15), tonumber(p[3] or 60000)
local sumR, sumT, cur = tonumber(p[4] or 0), tonumber(p[5] or 0), tonumber(p[6] or 0)
local idx = math.floor(now / (win / 32))
local curR, curT = tonumber(p[7] or 0), tonumber(p[8] or 0)
if idx ~= cur then
  for i = math.max(cur - 32, idx - 65), idx - 33 do
    local old = redis.call('HMGET', KEYS[2], 'r' .. (i % 33), 't' .. (i % 33))
    sumR = sumR - tonumber(old[1] or 0)
    sumT = sumT - tonumber(old[2] or 0)
  end
  curR, curT = 0, 0
end
if tonumber(p[9] or 0) > 0 then return {0, 'queue'} end
local want = tonumber(ARGV[1])
if sumR + 1 > limR or sumT + want > limT then return {0, 'window'} end
local fence = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[2], 'sum_r', sumR + 1, 'sum_t', sumT + want, 'cur', idx, 'cur_r', curR + 1,
  'cur_t', curT + want, 'r' .. (idx % 33), curR + 1, 't' .. (idx % 33), curT + want)
redis.call('XADD', KEYS[4], 'MAXLEN', '~', '100000', '*', 'event', 'admit', 'provider', 'bench',
  'caller', ARGV[2], 'fence', fence, 'tokens', want)
return {1, fence}
)lua";

constexpr const char* KEY = "tollgate-bench:bucket";
constexpr const char* CAPACITY = "1000000000000"; // never runs dry: we measure cost, not refusals
constexpr const char* PER_MS = "1000000";

volatile sig_atomic_t g_serverPid = 0;

void onSignal(int sig)
{
    if (g_serverPid > 0)
        ::kill(static_cast<pid_t>(g_serverPid), SIGKILL);
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

std::string findExecutable(const std::string& name)
{
    if (name.find('/') != std::string::npos)
        return ::access(name.c_str(), X_OK) == 0 ? name : std::string();
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    dirs += ":/usr/sbin:/sbin";
    std::size_t pos = 0;
    while (pos <= dirs.size()) {
        const std::size_t end = std::min(dirs.find(':', pos), dirs.size());
        const std::string candidate = dirs.substr(pos, end - pos) + "/" + name;
        if (end > pos && ::access(candidate.c_str(), X_OK) == 0)
            return candidate;
        pos = end + 1;
    }
    return {};
}

int freeLoopbackPort()
{
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    sockaddr_in a {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = -1;
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0
        && ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
        port = ntohs(a.sin_port);
    ::close(s);
    return port;
}

struct ContextDeleter
{
    void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextDeleter>;
struct ReplyDeleter
{
    void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

Context connect(int port)
{
    const struct timeval tv
    {
        1, 0
    };
    Context c(redisConnectWithTimeout("127.0.0.1", port, tv));
    if (!c || c->err)
        return nullptr;
    redisSetTimeout(c.get(), tv);
    return c;
}

// Our own redis-server: loopback only, no persistence, in a temp dir; killed with its
// parent (PR_SET_PDEATHSIG) and by the destructor, whatever happens in between.
class RedisServer
{
public:
    RedisServer(const std::string& exe, const std::string& dir)
    {
        std::string lastError;
        for (int attempt = 0; attempt < 3 && m_pid <= 0; ++attempt) {
            const int port = freeLoopbackPort();
            if (port <= 0)
                throw std::runtime_error("no free loopback port");
            if (start(exe, dir, port, lastError))
                m_port = port;
        }
        if (m_pid <= 0)
            throw std::runtime_error("redis-server did not come up: " + lastError);
    }
    ~RedisServer() { stop(); }
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;

    [[nodiscard]] int port() const { return m_port; }

    void stop()
    {
        if (m_pid <= 0 || m_owner != ::getpid())
            return;
        ::kill(m_pid, SIGTERM);
        const std::int64_t deadline = monoNs() + 3000000000LL;
        int status = 0;
        while (::waitpid(m_pid, &status, WNOHANG) == 0) {
            if (monoNs() > deadline) {
                ::kill(m_pid, SIGKILL);
                ::waitpid(m_pid, &status, 0);
                break;
            }
            sleepUs(10000);
        }
        m_pid = -1;
        g_serverPid = 0;
    }

private:
    bool start(const std::string& exe, const std::string& dir, int port, std::string& error)
    {
        const std::string portText = std::to_string(port);
        const std::string logFile = dir + "/redis.log";
        std::fflush(nullptr);
        const pid_t parent = ::getpid();
        const pid_t pid = ::fork();
        if (pid < 0) {
            error = "fork failed";
            return false;
        }
        if (pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent)
                ::_exit(127);
            const int devnull = ::open("/dev/null", O_RDWR);
            if (devnull >= 0) {
                ::dup2(devnull, 0);
                ::dup2(devnull, 1);
                ::dup2(devnull, 2);
            }
            ::execl(exe.c_str(), exe.c_str(), "--bind", "127.0.0.1", "--port", portText.c_str(), "--save", "",
                "--appendonly", "no", "--dir", dir.c_str(), "--logfile", logFile.c_str(), "--daemonize", "no",
                "--protected-mode", "yes", static_cast<char*>(nullptr));
            ::_exit(127);
        }
        m_pid = pid;
        m_owner = ::getpid();
        g_serverPid = pid;
        // Poll with a deadline: connect + PING until it answers PONG.
        const std::int64_t deadline = monoNs() + 5000000000LL;
        while (monoNs() < deadline) {
            int status = 0;
            if (::waitpid(pid, &status, WNOHANG) == pid) {
                error = "redis-server exited at start (status " + std::to_string(status) + "; see " + logFile
                    + ")";
                m_pid = -1;
                g_serverPid = 0;
                return false;
            }
            if (Context c = connect(port)) {
                Reply r(static_cast<redisReply*>(redisCommand(c.get(), "PING")));
                if (r && r->type == REDIS_REPLY_STATUS && std::string(r->str, r->len) == "PONG")
                    return true;
            }
            sleepUs(20000);
        }
        error = "no PONG within 5 s";
        stop();
        return false;
    }

    pid_t m_pid = -1;
    pid_t m_owner = 0;
    int m_port = 0;
};

std::string nowMsText()
{
    struct timespec ts
    {
    };
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return std::to_string(static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000);
}

// One EVALSHA of the bucket; true when granted.
bool take(redisContext* c, const std::string& sha)
{
    const std::string now = nowMsText();
    Reply r(static_cast<redisReply*>(
        redisCommand(c, "EVALSHA %s 1 %s %s %s %s 1", sha.c_str(), KEY, now.c_str(), CAPACITY, PER_MS)));
    if (!r)
        throw std::runtime_error(std::string("EVALSHA: ") + (c->err ? c->errstr : "no reply"));
    if (r->type == REDIS_REPLY_ERROR)
        throw std::runtime_error("EVALSHA: " + std::string(r->str, r->len));
    return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
}

// `clients` processes calling `call` (made by `make` in each, after the fork) for the
// duration; calls per second over the wall time, and every call's latency.
struct Aggregate
{
    double perSec = 0;
    double wallS = 0;
    std::int64_t calls = 0;
    std::int64_t failed = 0;
    Summary latency;
};
Aggregate aggregate(int clients, int durationMs, const std::function<std::function<bool()>()>& make)
{
    constexpr std::size_t MAX_SAMPLES = 1 << 20;
    struct Slot
    {
        std::int64_t ok;
        std::int64_t failed;
        std::int64_t endNs;
        std::int64_t samples;
    };
    const std::size_t slotBytes = sizeof(Slot) * static_cast<std::size_t>(clients);
    const std::size_t sampleBytes = sizeof(std::int64_t) * MAX_SAMPLES * static_cast<std::size_t>(clients);
    auto* slots = static_cast<Slot*>(sharedAlloc(slotBytes));
    auto* samples = static_cast<std::int64_t*>(sharedAlloc(sampleBytes));
    std::function<bool()> call;
    Workers w;
    w.setup = [&](int) {
        call = make();
        return static_cast<bool>(call);
    };
    w.run = [&](int i) {
        Slot& s = slots[i];
        std::int64_t* out = samples + static_cast<std::size_t>(i) * MAX_SAMPLES;
        const std::int64_t end = monoNs() + static_cast<std::int64_t>(durationMs) * 1000000;
        for (std::int64_t t0 = monoNs(); t0 < end;) {
            const bool ok = call();
            const std::int64_t t1 = monoNs();
            ++(ok ? s.ok : s.failed);
            if (s.samples < static_cast<std::int64_t>(MAX_SAMPLES))
                out[s.samples++] = t1 - t0;
            t0 = t1;
        }
        s.endNs = monoNs();
        return 0;
    };
    std::string error;
    const auto start = runWorkers(clients, w, durationMs + 30000, error);
    if (!start) {
        sharedFree(slots, slotBytes);
        sharedFree(samples, sampleBytes);
        throw std::runtime_error("Redis with " + std::to_string(clients) + " clients: " + error);
    }
    Aggregate a;
    std::int64_t endNs = *start;
    std::vector<std::int64_t> all;
    for (int i = 0; i < clients; ++i) {
        a.calls += slots[i].ok;
        a.failed += slots[i].failed;
        endNs = std::max(endNs, slots[i].endNs);
        const std::int64_t* in = samples + static_cast<std::size_t>(i) * MAX_SAMPLES;
        all.insert(all.end(), in, in + slots[i].samples);
    }
    sharedFree(slots, slotBytes);
    sharedFree(samples, sampleBytes);
    a.wallS = static_cast<double>(endNs - *start) / 1e9;
    a.perSec = static_cast<double>(a.calls) / a.wallS;
    a.latency = summarize(std::move(all));
    return a;
}

// A client of the lower-bound admission (row 6f); true when admitted.
std::function<std::function<bool()>()> lowerBoundClient(int port, const std::string& sha)
{
    return [port, sha]() -> std::function<bool()> {
        auto ctx = std::make_shared<Context>(connect(port));
        if (!*ctx)
            return {};
        return [ctx, sha] {
            Reply r(static_cast<redisReply*>(redisCommand(ctx->get(),
                "EVALSHA %s 4 {lb}:global {lb}:p:bench {lb}:fence {lb}:history 100 bench", sha.c_str())));
            if (!r)
                throw std::runtime_error(
                    std::string("EVALSHA: ") + (ctx->get()->err ? ctx->get()->errstr : "no reply"));
            if (r->type == REDIS_REPLY_ERROR)
                throw std::runtime_error("EVALSHA: " + std::string(r->str, r->len));
            return r->type == REDIS_REPLY_ARRAY && r->elements == 2
                && r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 1;
        };
    };
}

// A bare token-bucket client (its own connection, made after the fork).
std::function<std::function<bool()>()> bucketClient(int port, const std::string& sha)
{
    return [port, sha]() -> std::function<bool()> {
        auto ctx = std::make_shared<Context>(connect(port));
        if (!*ctx)
            return {};
        return [ctx, sha] { return take(ctx->get(), sha); };
    };
}

// One Tollgate client of the Redis home: a limiter over the Redis backend; each call is an
// uncontended acquire (a try: the limits never run out) and its release.
struct HomeClient
{
    tollgate::SystemClock clock;
    tollgate::ProcessProbe probe;
    std::unique_ptr<tollgate::QuotaBackend> backend;
    std::unique_ptr<tollgate::QuotaLimiter> limiter;
    tollgate::AdmitRequest request;

    explicit HomeClient(const std::string& url)
    {
        auto b = tollgate::StoreFactory::openBackend(url, clock, probe);
        if (!b)
            throw std::runtime_error("the Redis home: " + b.error().describe());
        backend = std::move(b).value();
        limiter = std::make_unique<tollgate::QuotaLimiter>(*backend, clock, probe);
        request.provider = "bench";
        request.caller = "bench";
    }
    bool acquire()
    {
        auto p = limiter->acquire(request, clock.now());
        return p.ok();
    }
};

// Row 7d: row 7c's limits (6 limits, 10 classes, the model in two) on the Redis home, next to
// 6c (one limit) on the same server. Its script does not enforce these limits yet and refuses
// them: the row then says so, with the home's own words, and measures nothing.
void benchRedisBudgets(const Config& c, const std::string& url, std::vector<Row>& rows, Figures& f)
{
    constexpr const char* PROVIDER = "budgets";
    std::fprintf(stderr, "bench: 7d. Redis home, 6 limits + 10 classes, 1 client\n");
    Row r { "7d", "Tollgate Redis home: acquire (try), 6 limits + 10 classes, model in 2 classes, 1 client",
        {}, {}, {}, {}, 0, {} };
    {
        HomeClient setup(url);
        if (auto set = setup.limiter->setLimits(PROVIDER, budgetLimits(BudgetConfig::Full), "bench"); !set) {
            f.redisBudgetsRefused = set.error().describe();
            r.note = "not measurable: the home refuses these limits (" + f.redisBudgetsRefused + ")";
            rows.push_back(r);
            return;
        }
    }
    HomeClient one(url);
    one.request = budgetRequest(BudgetConfig::Full, PROVIDER);
    const int warm = std::min(c.warmup, 500);
    std::vector<std::int64_t> samples;
    samples.reserve(static_cast<std::size_t>(c.redisCalls));
    std::int64_t refused = 0;
    for (int i = 0; i < warm + c.redisCalls; ++i) {
        const std::int64_t t0 = monoNs();
        const bool ok = one.acquire();
        const std::int64_t t1 = monoNs();
        if (i >= warm) {
            samples.push_back(t1 - t0);
            refused += ok ? 0 : 1;
        }
    }
    const Summary s = summarize(std::move(samples));
    r.opsPerSec = 1e6 / s.meanUs;
    r.note
        = "same server, after 6c" + (refused ? "; " + std::to_string(refused) + " refused" : std::string());
    fillLatency(r, s);
    rows.push_back(r);
    f.redisBudgetsP50Us = s.p50Us;
}

// Rows 6c–6e: Tollgate's Redis home on the same server, in the same run as the bucket.
void benchRedisHome(const Config& c, int port, const std::string& version, const std::string& sha,
    std::vector<Row>& rows, Figures& f)
{
    const std::string url = "redis://127.0.0.1:" + std::to_string(port) + "?prefix=bench";
    {
        HomeClient setup(url);
        tollgate::ProviderLimits l;
        l.requests = tollgate::QuotaLimits::MAX_COUNT; // never runs out: we measure cost
        l.windowMs = 60000;
        if (!setup.limiter->setLimits("bench", l, "bench"))
            throw std::runtime_error("cannot set the bench's limits on the Redis home");
    }
    std::string lowerSha;
    {
        Context ctx = connect(port);
        Reply load(
            static_cast<redisReply*>(redisCommand(ctx.get(), "SCRIPT LOAD %s", LOWER_BOUND_ADMISSION)));
        if (!load || load->type != REDIS_REPLY_STRING)
            throw std::runtime_error("SCRIPT LOAD of the lower-bound admission failed");
        lowerSha.assign(load->str, load->len);
    }
    std::fprintf(stderr, "bench: 6c. Redis home, 1 client, %d acquires\n", c.redisCalls);
    HomeClient one(url);
    const int warm = std::min(c.warmup, 500);
    for (int i = 0; i < warm; ++i)
        one.acquire();
    const std::uint64_t before = tollgate::RedisConnection::commandsSent();
    std::vector<std::int64_t> samples;
    samples.reserve(static_cast<std::size_t>(c.redisCalls));
    std::int64_t refused = 0;
    for (int i = 0; i < c.redisCalls; ++i) {
        const std::int64_t t0 = monoNs();
        const bool ok = one.acquire();
        samples.push_back(monoNs() - t0);
        refused += ok ? 0 : 1;
    }
    const std::uint64_t after = tollgate::RedisConnection::commandsSent();
    const double perAcquire = static_cast<double>(after - before) / c.redisCalls;
    const Summary s = summarize(std::move(samples));
    Row r { "6c", "Tollgate Redis home: acquire (uncontended), 1 client", {}, {}, {}, 1e6 / s.meanUs, 0,
        "same server; " + fmtNumber(perAcquire, 3) + " Redis commands (round trips) sent per acquire"
            + (refused ? "; " + std::to_string(refused) + " refused" : std::string()) };
    fillLatency(r, s);
    rows.push_back(r);
    f.redisHomeP50Us = s.p50Us;
    f.redisHomeP99Us = s.p99Us;
    f.redisHomeCommandsPerAcquire = perAcquire;
    benchRedisBudgets(c, url, rows, f);

    for (int clients : { 1, 2, 4, 8 }) {
        std::fprintf(
            stderr, "bench: 6d/6e. %d client(s), %d ms each: bucket, then home\n", clients, c.durationMs);
        auto bucketRun = aggregate(clients, c.durationMs, bucketClient(port, sha));
        auto homeRun = aggregate(clients, c.durationMs, [&]() -> std::function<bool()> {
            auto client = std::make_shared<HomeClient>(url);
            return [client] { return client->acquire(); };
        });
        Row b { "6d",
            "Redis " + version + " bare Lua token bucket, " + std::to_string(clients) + " client process(es)",
            {}, {}, {}, bucketRun.perSec, 0, fmtThousands(static_cast<double>(bucketRun.calls)) + " calls" };
        fillLatency(b, bucketRun.latency);
        rows.push_back(b);
        Row h { "6e", "Tollgate Redis home acquire, " + std::to_string(clients) + " client process(es)", {},
            {}, {}, homeRun.perSec, 0,
            fmtNumber(homeRun.perSec / bucketRun.perSec, 2) + "× the bucket"
                + (homeRun.failed ? "; " + std::to_string(homeRun.failed) + " refused" : std::string()) };
        fillLatency(h, homeRun.latency);
        rows.push_back(h);
        if (clients == 8) {
            f.redisHome8PerSec = homeRun.perSec;
            f.redisBucket8SameRun = bucketRun.perSec;
            std::fprintf(stderr, "bench: 6f. 8 clients, %d ms: the lower-bound admission\n", c.durationMs);
            auto lowerRun = aggregate(clients, c.durationMs, lowerBoundClient(port, lowerSha));
            Row lb { "6f",
                "lower bound of an admission (pause, backoff, window, queue, fence, history; see "
                "redisbench.cpp), 8 client processes",
                {}, {}, {}, lowerRun.perSec, 0,
                fmtNumber(lowerRun.perSec / bucketRun.perSec, 2) + "× the bucket"
                    + (lowerRun.failed ? "; " + std::to_string(lowerRun.failed) + " refused"
                                       : std::string()) };
            fillLatency(lb, lowerRun.latency);
            rows.push_back(lb);
            f.redisLowerBound8PerSec = lowerRun.perSec;
        }
    }
}

} // namespace

void benchRedis(const Config& c, std::vector<Row>& rows, Figures& f)
{
    // A/B of two builds on one server (docs/BENCHMARKS.md, "Where the admission's server time
    // went"): TOLLGATE_BENCH_REDIS_PORT names a running redis-server; only the home is measured,
    // under the key prefix TOLLGATE_BENCH_REDIS_PREFIX (default "bench"): 1 client making
    // --redis-calls acquires, or TOLLGATE_BENCH_REDIS_CLIENTS processes for --duration-ms. The
    // server's INFO (commandstats, cpu) read around the run gives the server time per FCALL.
    if (const char* external = std::getenv("TOLLGATE_BENCH_REDIS_PORT")) {
        const char* prefix = std::getenv("TOLLGATE_BENCH_REDIS_PREFIX");
        const std::string url
            = std::string("redis://127.0.0.1:") + external + "?prefix=" + (prefix ? prefix : "bench");
        {
            HomeClient setup(url);
            tollgate::ProviderLimits l;
            l.requests = tollgate::QuotaLimits::MAX_COUNT; // never runs out: we measure cost
            l.windowMs = 60000;
            if (!setup.limiter->setLimits("bench", l, "bench"))
                throw std::runtime_error("cannot set the bench's limits on the Redis home at " + url);
        }
        if (const char* clients = std::getenv("TOLLGATE_BENCH_REDIS_CLIENTS")) {
            const int n = std::max(1, std::atoi(clients));
            const auto run = aggregate(n, c.durationMs, [&]() -> std::function<bool()> {
                auto client = std::make_shared<HomeClient>(url);
                return [client] { return client->acquire(); };
            });
            std::printf("Redis home at %s, %d client process(es): %.0f admissions/s, %lld refused\n",
                url.c_str(), n, run.perSec, static_cast<long long>(run.failed));
            return;
        }
        HomeClient one(url);
        int refused = 0;
        for (int i = 0; i < c.redisCalls; ++i)
            refused += one.acquire() ? 0 : 1;
        std::printf(
            "Redis home at %s, 1 client: %d acquires, %d refused\n", url.c_str(), c.redisCalls, refused);
        return;
    }
    const std::string exe = findExecutable(c.redisServer);
    if (exe.empty()) {
        f.redisSkipped = "redis-server not found ('" + c.redisServer
            + "'; Debian package redis-server) — rows 6a/6b not measured";
        std::fprintf(stderr, "bench: 6. SKIPPED: %s\n", f.redisSkipped.c_str());
        return;
    }
    std::fprintf(stderr, "bench: 6. Redis token bucket (EVALSHA) on a private %s\n", exe.c_str());
    TempDir dir("tollgate-bench-redis");
    struct sigaction sa
    {
    };
    struct sigaction oldInt
    {
    };
    struct sigaction oldTerm
    {
    };
    struct sigaction oldHup
    {
    };
    sa.sa_handler = onSignal;
    ::sigaction(SIGINT, &sa, &oldInt);
    ::sigaction(SIGTERM, &sa, &oldTerm);
    ::sigaction(SIGHUP, &sa, &oldHup);
    struct RestoreSignals
    {
        struct sigaction *i, *t, *h;
        ~RestoreSignals()
        {
            ::sigaction(SIGINT, i, nullptr);
            ::sigaction(SIGTERM, t, nullptr);
            ::sigaction(SIGHUP, h, nullptr);
        }
    } restore { &oldInt, &oldTerm, &oldHup };

    RedisServer server(exe, dir.path());
    const int port = server.port();
    std::string version = "?";
    std::string sha;
    {
        Context ctx = connect(port);
        if (!ctx)
            throw std::runtime_error("cannot connect to the bench's redis-server");
        Reply info(static_cast<redisReply*>(redisCommand(ctx.get(), "INFO server")));
        if (info && info->type == REDIS_REPLY_STRING) {
            const std::string text(info->str, info->len);
            const auto at = text.find("redis_version:");
            if (at != std::string::npos)
                version = text.substr(at + 14, text.find_first_of("\r\n", at) - at - 14);
        }
        Reply load(static_cast<redisReply*>(redisCommand(ctx.get(), "SCRIPT LOAD %s", TOKEN_BUCKET)));
        if (!load || load->type != REDIS_REPLY_STRING)
            throw std::runtime_error("SCRIPT LOAD failed");
        sha.assign(load->str, load->len);

        std::fprintf(stderr, "bench: 6a. 1 client, %d calls\n", c.redisCalls);
        std::vector<std::int64_t> samples;
        samples.reserve(static_cast<std::size_t>(c.redisCalls));
        std::int64_t denied = 0;
        const int warm = std::min(c.warmup, 500);
        for (int i = 0; i < warm + c.redisCalls; ++i) {
            const std::int64_t t0 = monoNs();
            const bool ok = take(ctx.get(), sha);
            const std::int64_t t1 = monoNs();
            if (i >= warm) {
                samples.push_back(t1 - t0);
                denied += ok ? 0 : 1;
            }
        }
        const Summary s = summarize(std::move(samples));
        Row r { "6a", "Redis " + version + " Lua token bucket, EVALSHA, 1 client", {}, {}, {}, 1e6 / s.meanUs,
            0,
            "hiredis, loopback, own redis-server (no persistence)"
                + (denied ? "; " + std::to_string(denied) + " denied" : std::string()) };
        fillLatency(r, s);
        rows.push_back(r);
    }

    std::fprintf(stderr, "bench: 6b. 8 clients, %d ms\n", c.durationMs);
    const Aggregate eight = aggregate(8, c.durationMs, bucketClient(port, sha));
    Row r { "6b", "Redis " + version + " Lua token bucket, EVALSHA, 8 client processes", {}, {}, {},
        eight.perSec, 0,
        fmtThousands(static_cast<double>(eight.calls)) + " granted in " + fmtNumber(eight.wallS, 2)
            + " s wall" + (eight.failed ? ", " + std::to_string(eight.failed) + " denied" : std::string())
            + "; per-call latency p99.9 " + fmtNumber(eight.latency.p999Us / 1000.0, 1) + " ms, max "
            + fmtNumber(eight.latency.maxUs / 1000.0, 1) + " ms" };
    fillLatency(r, eight.latency);
    rows.push_back(r);
    f.redis8PerSec = eight.perSec;

    benchRedisHome(c, port, version, sha, rows, f);
    server.stop();
}

} // namespace bench

#else // no hiredis

namespace bench {

void benchRedis(const Config&, std::vector<Row>&, Figures& f)
{
    f.redisSkipped
        = "hiredis was not found when this bench was built (Debian package libhiredis-dev) — rows 6a/6b "
          "not measured";
    std::fprintf(stderr, "bench: 6. SKIPPED: %s\n", f.redisSkipped.c_str());
}

} // namespace bench

#endif
