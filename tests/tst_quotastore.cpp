// The shared quota's files in one process: formats, crash and corruption handling, modes,
// limits that survive, the history and its incremental reader.

#include "backend/quotalimiter.h"
#include "base/crc32.h"
#include "base/manualclock.h"
#include "history/historylog.h"
#include "history/historyreader.h"
#include "quota/retryafter.h"
#include "store/doorbell.h"
#include "store/filequotastore.h"
#include "store/homespec.h"
#include "store/quotapeek.h"
#include "store/statefile.h"
#include "system/homedir.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace tollgate;
using namespace std::chrono_literals;

class TestQuotaStore final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void eventTypesMapToTheirNamesBothWays();
    void unknownEventTypeIsKeptNotRejected();
    void init();
    void stateRoundTrip();
    void truncatedOrGarbageStateNeverCrashes();
    void tornNewestSlotFallsBackToPrevious();
    void crc32MatchesZlib();
    void newerFormatIsRefusedNotSetAside();
    void filesAre0600InA0700Home();
    void unsafeHomeIsRefused();
    void limitsSurviveReopen();
    void limitsValidation();
    void corruptStateIsSetAsideWithLimitsKept();
    void deletedStateStartsConservatively();
    void corruptLimitsAreNeverRewritten();
    void unknownProviderNamesTheKnownOnes();
    void permitGivesSlotBack();
    void historyReaderIsIncrementalAcrossRotation();
    void concurrentAppendersAcrossARotationLoseNothing();
    void readerCatchesGenerationsRotatedBetweenPolls();
    void aStoppedAppenderDelaysOnlyTheRotation();
    void retryAfterParsing();
    void peekNeverWrites();

private:
    QString home() const { return m_dir->path() + QStringLiteral("/home"); }
    std::string homeStd() const { return home().toStdString(); }
    static QByteArray readFile(const QString& path)
    {
        QFile f(path);
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    }
    static void writeFile(const QString& path, const QByteArray& bytes)
    {
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(bytes);
    }
    ProviderLimits simple(std::int64_t requests) const
    {
        ProviderLimits l;
        l.requests = requests;
        l.windowMs = 60000;
        return l;
    }
    AdmitRequest request(const char* caller, bool slot = false) const
    {
        AdmitRequest r;
        r.provider = "p";
        r.caller = caller;
        r.wantsSlot = slot;
        return r;
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    ManualClock m_clock { std::chrono::system_clock::now() };
    ProcessProbe m_probe;
};

void TestQuotaStore::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_clock.set(std::chrono::system_clock::now());
}

static QuotaState sampleState()
{
    QuotaState s;
    s.nextFence = 77;
    s.nextTicket = 5;
    s.pausedAll = true;
    s.pauseReason = "maintenance";
    auto& p = s.ensureProvider("anthropic");
    p.consecutive429 = 2;
    p.backoffUntilMs = 123456;
    p.scopes.push_back(ScopeWindow { "", RollingWindow(60000) });
    p.scopes.back().window.record(1000, 3, 300);
    p.scopes.push_back(ScopeWindow { "opus", RollingWindow(30000) });
    p.scopes.back().window.record(2000, 1, 50);
    p.slots.push_back(Slot { 70, 1234, 999, 10, "caller \xe2\x9c\x93", "opus", 0, 0, 0, "" });
    p.queue.push_back(Waiter { 4, 4321, 1000, 2000, 5, "waiter", "", true, WaitReason::Slots, 0, 0, 0, "" });
    return s;
}

void TestQuotaStore::stateRoundTrip()
{
    const QuotaState s = sampleState();
    auto back = QuotaState::decode(s.encode());
    QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
    QCOMPARE(back->encode(), s.encode());
    QCOMPARE(back->provider("anthropic")->slots[0].caller, std::string("caller \xe2\x9c\x93"));
    QCOMPARE(back->provider("anthropic")->scope("opus")->window.usage(2000).tokens, 50);
    QCOMPARE(back->provider("anthropic")->queue[0].reason, WaitReason::Slots);
}

void TestQuotaStore::truncatedOrGarbageStateNeverCrashes()
{
    const std::string good = sampleState().encode();
    for (std::size_t n = 0; n < good.size(); ++n) {
        auto r = QuotaState::decode(std::string_view(good).substr(0, n));
        QVERIFY(!r.ok());
        QCOMPARE(r.error().kind, ErrorKind::Corrupt);
    }
    std::string flipped = good;
    for (std::size_t i = 8; i < flipped.size(); i += 7) {
        flipped[i] = static_cast<char>(~flipped[i]);
        (void)QuotaState::decode(flipped); // must not crash; may or may not parse
    }
    QVERIFY(!QuotaState::decode(good + "x").ok()); // trailing bytes
}

void TestQuotaStore::tornNewestSlotFallsBackToPrevious()
{
    QVERIFY(QDir().mkpath(home()));
    const std::string path = homeStd() + "/state.bin";
    auto fd = Fd::open(path, O_RDWR | O_CREAT, 0600);
    QVERIFY(fd.ok());
    StateFile file(std::move(fd).value());
    QuotaState first = sampleState();
    first.nextFence = 100;
    QVERIFY(file.write(first).ok());
    QuotaState second = first;
    second.nextFence = 200;
    QVERIFY(file.write(second).ok());
    {
        StateFile reader(Fd::open(path, O_RDWR).value());
        QCOMPARE((*reader.read())->nextFence, std::uint64_t(200));
    }
    // a writer killed mid-write: the newest slot (seq 2, at offset 0) is torn
    {
        auto raw = Fd::open(path, O_RDWR).value();
        QVERIFY(raw.pwriteAll("garbage!", StateFile::HEADER_BYTES + 10).ok());
    }
    StateFile reader(Fd::open(path, O_RDWR).value());
    auto back = reader.read();
    QVERIFY(back.ok());
    QCOMPARE((*back)->nextFence, std::uint64_t(100));
    // both slots torn: corrupt, with the path
    {
        auto raw = Fd::open(path, O_RDWR).value();
        QVERIFY(raw.pwriteAll("garbage!", StateFile::SLOT_BYTES + StateFile::HEADER_BYTES + 10).ok());
    }
    auto none = reader.read();
    QVERIFY(!none.ok());
    QCOMPARE(none.error().kind, ErrorKind::Corrupt);
    QCOMPARE(none.error().path, path);
}

void TestQuotaStore::crc32MatchesZlib()
{
    QCOMPARE(Crc32::compute("123456789"), 0xCBF43926u); // the standard check value
    QCOMPARE(Crc32::compute("6789", Crc32::compute("12345")), 0xCBF43926u);
}

void TestQuotaStore::newerFormatIsRefusedNotSetAside()
{
    std::string payload = sampleState().encode();
    const std::uint32_t version = QuotaState::FORMAT_VERSION + 1;
    std::memcpy(payload.data() + 4, &version, 4);
    std::string slot(StateFile::HEADER_BYTES, '\0');
    const std::uint32_t magic = 0x4C534754, length = static_cast<std::uint32_t>(payload.size());
    const std::uint64_t seq = 1;
    std::memcpy(slot.data(), &magic, 4);
    std::memcpy(slot.data() + 4, &length, 4);
    std::memcpy(slot.data() + 8, &seq, 8);
    const std::uint32_t crc = Crc32::compute(payload, Crc32::compute(std::string_view(slot).substr(4, 12)));
    std::memcpy(slot.data() + 16, &crc, 4);
    const std::string image
        = std::string(static_cast<std::size_t>(StateFile::SLOT_BYTES), '\0') + slot + payload;
    auto r = StateFile::decodeImage(image);
    QVERIFY(!r.ok());
    QCOMPARE(r.error().kind, ErrorKind::Unsupported);

    QVERIFY(QDir().mkpath(home()));
    writeFile(home() + QStringLiteral("/state.bin"), QByteArray::fromStdString(image));
    auto store = FileQuotaStore::open(homeStd(), m_clock);
    QuotaLimiter limiter(**store, m_clock, m_probe);
    auto snap = limiter.snapshot();
    QVERIFY(!snap.ok());
    QCOMPARE(snap.error().kind, ErrorKind::Unsupported);
    QCOMPARE(readFile(home() + QStringLiteral("/state.bin")), QByteArray::fromStdString(image)); // untouched
    QVERIFY(QDir(home()).entryList({ QStringLiteral("state.bin.corrupt-*") }).isEmpty());
}

void TestQuotaStore::filesAre0600InA0700Home()
{
    const mode_t old = ::umask(0);
    {
        auto store = FileQuotaStore::open(homeStd(), m_clock);
        QVERIFY(store.ok());
        QuotaLimiter limiter(**store, m_clock, m_probe);
        QVERIFY(limiter.setLimits("p", simple(5), "test").ok());
        QVERIFY(limiter.acquire(request("a"), m_clock.now()).ok());
    }
    ::umask(old);
    struct stat st
    {
    };
    QCOMPARE(::stat(homeStd().c_str(), &st), 0);
    QCOMPARE(st.st_mode & 07777, mode_t(0700));
    for (const char* f : { "state.lock", "state.bin", "limits.json", "history.jsonl", "doorbell" }) {
        QCOMPARE(::stat((homeStd() + "/" + f).c_str(), &st), 0);
        QVERIFY2((st.st_mode & 07777) == 0600, f);
    }
}

void TestQuotaStore::unsafeHomeIsRefused()
{
    QVERIFY(QDir().mkpath(home()));
    QVERIFY(::chmod(homeStd().c_str(), 0777) == 0);
    auto store = FileQuotaStore::open(homeStd(), m_clock);
    QVERIFY(!store.ok());
    QCOMPARE(store.error().kind, ErrorKind::Permission);
    QVERIFY(QString::fromStdString(store.error().describe()).contains(QStringLiteral("writable by others")));
    QVERIFY(::chmod(homeStd().c_str(), 0700) == 0);
    const QString link = m_dir->path() + QStringLiteral("/link");
    QVERIFY(QFile::link(home(), link));
    auto viaLink = FileQuotaStore::open(link.toStdString(), m_clock);
    QVERIFY(!viaLink.ok());
    QVERIFY(QString::fromStdString(viaLink.error().describe()).contains(QStringLiteral("symbolic link")));
    QVERIFY(!HomeSpec::resolve(std::string("/tmp/../etc/tollgate")).ok());
}

void TestQuotaStore::limitsSurviveReopen()
{
    ProviderLimits l = simple(80);
    l.tokens = 100000;
    l.parallel = 4;
    l.headroomPercent = 80;
    l.models["opus"] = ModelLimits { 10, 5000, 30000 };
    {
        auto store = FileQuotaStore::open(homeStd(), m_clock);
        QuotaLimiter limiter(**store, m_clock, m_probe);
        QVERIFY(limiter.setLimits("anthropic", l, "test").ok());
    }
    auto store = FileQuotaStore::open(homeStd(), m_clock);
    QuotaLimiter limiter(**store, m_clock, m_probe);
    auto back = limiter.limits();
    QVERIFY(back.ok());
    QVERIFY(back->find("anthropic"));
    QVERIFY(*back->find("anthropic") == l);
}

void TestQuotaStore::limitsValidation()
{
    ProviderLimits l = simple(5);
    l.windowMs = 0;
    auto r = QuotaLimits::validate("p", l);
    QVERIFY(!r.ok());
    QVERIFY(QString::fromStdString(r.error().message).contains(QStringLiteral("window")));
    l = simple(0);
    QVERIFY(!QuotaLimits::validate("p", l).ok());
    l = simple(5);
    l.parallel = 0;
    QVERIFY(!QuotaLimits::validate("p", l).ok());
    QVERIFY(!QuotaLimits::validate("bad name!", simple(5)).ok());
    QVERIFY(!QuotaLimits::validate("p/../x", simple(5)).ok());
    QVERIFY(!QuotaLimits::fromJson("{\"version\":1,\"providers\":{\"p\":{\"requests\":\"many\"}}}").ok());
    QVERIFY(!QuotaLimits::fromJson("{\"version\":2}").ok());
    QVERIFY(!QuotaLimits::fromJson("[").ok());
}

void TestQuotaStore::corruptStateIsSetAsideWithLimitsKept()
{
    {
        auto store = FileQuotaStore::open(homeStd(), m_clock);
        QuotaLimiter limiter(**store, m_clock, m_probe);
        QVERIFY(limiter.setLimits("p", simple(5), "test").ok());
        QVERIFY(limiter.acquire(request("a"), m_clock.now()).ok());
    }
    const QByteArray limitsBefore = readFile(home() + QStringLiteral("/limits.json"));
    const QByteArray garbage(5000, '\x5a');
    writeFile(home() + QStringLiteral("/state.bin"), garbage);

    auto store = FileQuotaStore::open(homeStd(), m_clock);
    QuotaLimiter limiter(**store, m_clock, m_probe);
    auto snap = limiter.snapshot();
    QVERIFY(!snap.ok());
    QCOMPARE(snap.error().kind, ErrorKind::Corrupt);
    const QString message = QString::fromStdString(snap.error().describe());
    QVERIFY2(message.contains(home() + QStringLiteral("/state.bin"))
            && message.contains(QStringLiteral(".corrupt-")),
        qPrintable(message));
    const QStringList aside = QDir(home()).entryList({ QStringLiteral("state.bin.corrupt-*") });
    QCOMPARE(aside.size(), 1);
    QCOMPARE(readFile(home() + QStringLiteral("/") + aside[0]), garbage); // kept, byte for byte
    QVERIFY(message.contains(aside[0]));
    QCOMPARE(readFile(home() + QStringLiteral("/limits.json")), limitsBefore);

    // the next command starts from a fresh, conservative state: limits kept, window full
    auto limits = limiter.limits();
    QVERIFY(limits.ok());
    QVERIFY(limits->find("p"));
    auto refused = limiter.acquire(request("b"), m_clock.now());
    QVERIFY(!refused.ok());
    QCOMPARE(refused.error().kind, ErrorKind::Timeout);
    m_clock.advance(61s + 2s);
    QVERIFY(limiter.acquire(request("b"), m_clock.now()).ok());

    // a second corruption in the same second never overwrites the first one kept aside
    writeFile(home() + QStringLiteral("/state.bin"), QByteArray(100, '\x01'));
    QVERIFY(!limiter.snapshot().ok());
    QCOMPARE(QDir(home()).entryList({ QStringLiteral("state.bin.corrupt-*") }).size(), 2);
}

void TestQuotaStore::deletedStateStartsConservatively()
{
    auto store = FileQuotaStore::open(homeStd(), m_clock);
    QuotaLimiter limiter(**store, m_clock, m_probe);
    QVERIFY(limiter.setLimits("p", simple(5), "test").ok());
    QVERIFY(limiter.acquire(request("a"), m_clock.now()).ok());
    QVERIFY(QFile::remove(home() + QStringLiteral("/state.bin")));
    QVERIFY(!limiter.acquire(request("b"), m_clock.now()).ok());
    auto snap = limiter.snapshot();
    QVERIFY(snap.ok());
    QCOMPARE(snap->state.provider("p")->scope("")->window.usage(snap->nowMs).requests, 5);
    // Fences and tickets start above any issued before (the time in µs): a waiter still alive
    // with an old ticket must never share it with a new one (QuotaPolicy::handedSlot).
    const auto micros = static_cast<std::uint64_t>(snap->nowMs) * 1000;
    QVERIFY(snap->state.nextFence >= micros);
    QVERIFY(snap->state.nextTicket >= micros);
}

void TestQuotaStore::corruptLimitsAreNeverRewritten()
{
    {
        auto store = FileQuotaStore::open(homeStd(), m_clock);
        QuotaLimiter limiter(**store, m_clock, m_probe);
        QVERIFY(limiter.setLimits("p", simple(5), "test").ok());
    }
    const QByteArray broken = "{\"version\": 1, \"providers\": {\"p\": {\"requests\": 5,";
    writeFile(home() + QStringLiteral("/limits.json"), broken);
    auto store = FileQuotaStore::open(homeStd(), m_clock);
    QuotaLimiter limiter(**store, m_clock, m_probe);
    auto r = limiter.acquire(request("a"), m_clock.now());
    QVERIFY(!r.ok());
    QCOMPARE(r.error().kind, ErrorKind::Corrupt);
    QVERIFY(QString::fromStdString(r.error().describe()).contains(home() + QStringLiteral("/limits.json")));
    QVERIFY(!limiter.setLimits("p", simple(9), "test").ok());
    QCOMPARE(readFile(home() + QStringLiteral("/limits.json")), broken);
    QVERIFY(readFile(home() + QStringLiteral("/limits.json.bak")).contains("\"requests\": 5"));
}

void TestQuotaStore::unknownProviderNamesTheKnownOnes()
{
    auto store = FileQuotaStore::open(homeStd(), m_clock);
    QuotaLimiter limiter(**store, m_clock, m_probe);
    QVERIFY(limiter.setLimits("anthropic", simple(5), "test").ok());
    QVERIFY(limiter.setLimits("openai", simple(5), "test").ok());
    auto r = limiter.acquire(request("a"), m_clock.now());
    QVERIFY(!r.ok());
    QCOMPARE(r.error().kind, ErrorKind::Usage);
    QVERIFY(QString::fromStdString(r.error().message).contains(QStringLiteral("anthropic, openai")));
}

void TestQuotaStore::permitGivesSlotBack()
{
    auto store = FileQuotaStore::open(homeStd(), m_clock);
    QuotaLimiter limiter(**store, m_clock, m_probe);
    ProviderLimits l;
    l.parallel = 1;
    QVERIFY(limiter.setLimits("p", l, "test").ok());
    {
        auto permit = limiter.acquire(request("a", true), m_clock.now());
        QVERIFY(permit.ok());
        QVERIFY(permit->holdsSlot());
        QVERIFY(!limiter.acquire(request("b", true), m_clock.now()).ok());
    }
    QVERIFY(limiter.acquire(request("b", true), m_clock.now()).ok());
}

void TestQuotaStore::historyReaderIsIncrementalAcrossRotation()
{
    QVERIFY(QDir().mkpath(home()));
    auto homeFd = HomeDir::open(homeStd(), false);
    QVERIFY(homeFd.ok());
    HistoryLog log(*homeFd, 2000);
    HistoryReader reader(homeStd());
    auto ev = [](int i) {
        HistoryEvent e;
        e.timeMs = i;
        e.type = EventType::Admit;
        e.caller = "c" + std::to_string(i);
        return e;
    };
    QVERIFY(log.append({ ev(1), ev(2) }).ok());
    auto b = reader.poll();
    QVERIFY(b.ok());
    QCOMPARE(b->events.size(), std::size_t(2));
    QVERIFY(reader.poll()->events.empty()); // nothing new, nothing re-read
    int next = 3;
    std::size_t seen = 0;
    for (int round = 0; round < 10; ++round) { // ~10 rotations of a 2000-byte log
        std::vector<HistoryEvent> batch;
        for (int k = 0; k < 15; ++k)
            batch.push_back(ev(next++));
        QVERIFY(log.append(batch).ok());
        auto got = reader.poll();
        QVERIFY(got.ok());
        for (const auto& e : got->events)
            QCOMPARE(e.timeMs, std::int64_t(3 + seen++));
    }
    QCOMPARE(seen, std::size_t(150)); // every event exactly once, in order
    QVERIFY(QFile::exists(home() + QStringLiteral("/history.1.jsonl")));
    // a partial last line (writer killed mid-line) is left until complete
    {
        QFile f(home() + QStringLiteral("/history.jsonl"));
        QVERIFY(f.open(QIODevice::Append));
        f.write("{\"t\":999,\"ty");
    }
    QVERIFY(reader.poll()->events.empty());
    {
        QFile f(home() + QStringLiteral("/history.jsonl"));
        QVERIFY(f.open(QIODevice::Append));
        f.write("pe\":\"ok\"}\nnot json\n");
    }
    auto tail = reader.poll();
    QCOMPARE(tail->events.size(), std::size_t(1));
    QCOMPARE(tail->events[0].type, EventType::Ok);
    QCOMPARE(tail->badLines, std::size_t(1));
}

// Appends run after state.lock is released, so several processes append at once, and one of
// them rotates the log while the others write. Real processes, a reader following along: every
// line lands whole in one of the two generations, the rotation happens once, and the
// incremental reader sees every event exactly once (a line written into the file after it was
// rotated away, behind the reader's back, or a second rename replacing the first generation,
// would each lose events).
void TestQuotaStore::concurrentAppendersAcrossARotationLoseNothing()
{
    QVERIFY(QDir().mkpath(home()));
    QVERIFY(::chmod(home().toLocal8Bit().constData(), 0700) == 0);
    constexpr int PROCS = 4;
    constexpr int EACH = 600;
    // ~45-byte lines: 2,400 of them are ~110 kB, so a 70 kB log rotates exactly once.
    constexpr off_t MAX_BYTES = 70 * 1024;
    auto homeFd = HomeDir::open(homeStd(), false);
    QVERIFY(homeFd.ok());
    auto bell = Doorbell::open(*homeFd);
    QVERIFY(bell.ok());
    HistoryReader reader(homeStd());
    int start[2];
    QVERIFY(::pipe(start) == 0);
    std::vector<pid_t> children;
    for (int p = 0; p < PROCS; ++p) {
        const pid_t child = ::fork();
        QVERIFY(child >= 0);
        if (child == 0) {
            ::close(start[1]);
            char c;
            while (::read(start[0], &c, 1) > 0) { } // the start signal: the pipe closes
            auto fd = HomeDir::open(homeStd(), false);
            auto door = fd ? Doorbell::open(*fd) : Result<Doorbell>(fd.error());
            if (!door)
                ::_exit(2);
            HistoryLog log(*fd, MAX_BYTES);
            for (int i = 0; i < EACH; ++i) {
                HistoryEvent e;
                e.timeMs = i;
                e.type = EventType::Admit;
                e.caller = "p" + std::to_string(p) + "-" + std::to_string(i);
                if (!log.append({ e }, door->counterWord(Doorbell::Counter::History)))
                    ::_exit(3);
            }
            ::_exit(0);
        }
        children.push_back(child);
    }
    ::close(start[0]);
    ::close(start[1]);
    std::multiset<std::string> seen;
    auto drain = [&] {
        auto b = reader.poll();
        QVERIFY2(b.ok(), b ? "" : b.error().describe().c_str());
        QCOMPARE(b->badLines, std::size_t(0));
        for (const auto& e : b->events)
            seen.insert(e.caller);
    };
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    std::size_t running = children.size();
    while (running > 0) {
        drain();
        for (auto& c : children) {
            int status = 0;
            if (c > 0 && ::waitpid(c, &status, WNOHANG) == c) {
                QCOMPARE(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), 0);
                c = -1;
                --running;
            }
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            for (pid_t c : children)
                if (c > 0)
                    ::kill(c, SIGKILL);
            QFAIL("the appenders did not finish within 60 s");
        }
    }
    drain();
    QCOMPARE(bell->counter(Doorbell::Counter::History), 1U); // rotated exactly once
    const std::size_t seenCount = seen.size();
    // Both generations together hold every line, whole.
    const QByteArray all = readFile(home() + QStringLiteral("/history.1.jsonl"))
        + readFile(home() + QStringLiteral("/history.jsonl"));
    int lines = 0;
    for (const QByteArray& line : all.split('\n')) {
        if (line.isEmpty())
            continue;
        QVERIFY2(HistoryEvent::fromJsonLine(line.toStdString()).ok(), line.constData());
        ++lines;
    }
    QCOMPARE(lines, PROCS * EACH);
    QCOMPARE(seenCount, std::size_t(PROCS * EACH));
    QCOMPARE(std::set<std::string>(seen.begin(), seen.end()).size(), seen.size()); // none twice
}

// The moments between a rotation's rename and the next append, when history.jsonl does not
// exist: a generation the reader never saw as history.jsonl is still read, and one it had
// finished is not read again.
void TestQuotaStore::readerCatchesGenerationsRotatedBetweenPolls()
{
    QVERIFY(QDir().mkpath(home()));
    auto homeFd = HomeDir::open(homeStd(), false);
    QVERIFY(homeFd.ok());
    HistoryReader reader(homeStd());
    // Each append by a fresh writer, which opens history.jsonl by name (the renames below are
    // a rotation's, without the generation counter a real one moves).
    auto append
        = [&homeFd](std::vector<HistoryEvent> events) { return HistoryLog(*homeFd).append(events).ok(); };
    auto batch = [](int first, int n) {
        std::vector<HistoryEvent> out;
        for (int i = first; i < first + n; ++i) {
            HistoryEvent e;
            e.timeMs = i;
            e.type = EventType::Admit;
            out.push_back(e);
        }
        return out;
    };
    auto times = [&reader]() {
        std::vector<std::int64_t> t;
        auto b = reader.poll();
        if (b)
            for (const auto& e : b->events)
                t.push_back(e.timeMs);
        return t;
    };
    const QByteArray current = QFile::encodeName(home() + QStringLiteral("/history.jsonl"));
    const QByteArray previous = QFile::encodeName(home() + QStringLiteral("/history.1.jsonl"));
    QVERIFY(times().empty()); // no history yet
    // A whole generation written and rotated away between two polls.
    QVERIFY(append(batch(1, 3)));
    QVERIFY(::rename(current.constData(), previous.constData()) == 0);
    QCOMPARE(times(), (std::vector<std::int64_t> { 1, 2, 3 }));
    QVERIFY(times().empty());
    QVERIFY(append(batch(4, 2)));
    QCOMPARE(times(), (std::vector<std::int64_t> { 4, 5 }));
    // Rotated while being followed, and polled before the next append.
    QVERIFY(append(batch(6, 1)));
    QVERIFY(::rename(current.constData(), previous.constData()) == 0);
    QCOMPARE(times(), (std::vector<std::int64_t> { 6 }));
    QVERIFY(times().empty()); // not "finished" a second time
    QVERIFY(append(batch(7, 1)));
    QCOMPARE(times(), (std::vector<std::int64_t> { 7 }));
}

// A process stopped (SIGSTOP) while it holds its shared lock on history.jsonl: the others go
// on appending (shared locks do not exclude each other), and the rotation that needs the
// exclusive one is put off (each try waits at most 10 ms), not waited for; once the process
// is gone the next append rotates.
void TestQuotaStore::aStoppedAppenderDelaysOnlyTheRotation()
{
    QVERIFY(QDir().mkpath(home()));
    QVERIFY(::chmod(home().toLocal8Bit().constData(), 0700) == 0);
    auto homeFd = HomeDir::open(homeStd(), false);
    QVERIFY(homeFd.ok());
    auto bell = Doorbell::open(*homeFd);
    QVERIFY(bell.ok());
    std::atomic<std::uint32_t>* generation = bell->counterWord(Doorbell::Counter::History);
    HistoryLog log(*homeFd, 1000);
    auto event = [](int i) {
        HistoryEvent e;
        e.timeMs = i;
        e.type = EventType::Admit;
        e.caller = "caller-" + std::to_string(i);
        return std::vector<HistoryEvent> { e };
    };
    QVERIFY(log.append(event(0), generation).ok()); // history.jsonl exists
    int ready[2];
    QVERIFY(::pipe(ready) == 0);
    const pid_t child = ::fork();
    QVERIFY(child >= 0);
    if (child == 0) {
        const int fd = ::openat(homeFd->get(), "history.jsonl", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || ::flock(fd, LOCK_SH) != 0)
            ::_exit(2);
        (void)!::write(ready[1], "x", 1);
        ::raise(SIGSTOP); // as an appender stopped between its lock and its write
        ::_exit(0);
    }
    char c = 0;
    QCOMPARE(::read(ready[0], &c, 1), ssize_t(1));
    ::close(ready[0]);
    ::close(ready[1]);
    int status = 0;
    QCOMPARE(::waitpid(child, &status, WUNTRACED), child);
    QVERIFY(WIFSTOPPED(status));
    for (int i = 1; i <= 40; ++i) // well past 1000 bytes: every append wants a rotation
        QVERIFY(log.append(event(i), generation).ok());
    QCOMPARE(generation->load(), 0U); // put off while the stopped process holds its lock
    ::kill(child, SIGKILL);
    QCOMPARE(::waitpid(child, &status, 0), child);
    QVERIFY(log.append(event(41), generation).ok());
    QCOMPARE(generation->load(), 1U);
    QVERIFY(QFile::exists(home() + QStringLiteral("/history.1.jsonl")));
}

void TestQuotaStore::retryAfterParsing()
{
    const std::int64_t now = 1'800'000'000'000;
    QCOMPARE(*RetryAfter::parseMs("120", now), 120000);
    QCOMPARE(*RetryAfter::parseMs(" 1.5 ", now), 1500);
    QCOMPARE(*RetryAfter::parseMs("0", now), 0);
    // 1800000060 s = Fri, 15 Jan 2027 08:01:00 GMT
    QCOMPARE(*RetryAfter::parseMs("Fri, 15 Jan 2027 08:01:00 GMT", now), 60000);
    QCOMPARE(*RetryAfter::parseMs("Friday, 15-Jan-27 08:01:00 GMT", now), 60000);
    QCOMPARE(*RetryAfter::parseMs("Fri Jan 15 08:01:00 2027", now), 60000);
    QCOMPARE(*RetryAfter::parseMs("Thu, 01 Jan 1970 00:00:00 GMT", now), 0); // past: no wait
    QVERIFY(!RetryAfter::parseMs("soon", now).ok());
    QVERIFY(!RetryAfter::parseMs("-5", now).ok());
    QVERIFY(!RetryAfter::parseMs("", now).ok());
}

void TestQuotaStore::peekNeverWrites()
{
    QVERIFY(QDir().mkpath(home()));
    auto empty = QuotaPeek::read(homeStd(), std::chrono::milliseconds(1000));
    QVERIFY(empty.ok());
    QVERIFY(!empty->state);
    QVERIFY(QDir(home()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries).isEmpty()); // nothing created
    {
        auto store = FileQuotaStore::open(homeStd(), m_clock);
        QuotaLimiter limiter(**store, m_clock, m_probe);
        QVERIFY(limiter.setLimits("p", simple(5), "test").ok());
        QVERIFY(limiter.acquire(request("a"), m_clock.now()).ok());
    }
    auto live = QuotaPeek::read(homeStd(), std::chrono::milliseconds(1000));
    QVERIFY(live.ok());
    QVERIFY(live->state);
    QVERIFY(live->limits.find("p"));
    QCOMPARE(live->state->provider("p")->admittedTotal, std::uint64_t(1));
    const QByteArray garbage(300, '\x33');
    writeFile(home() + QStringLiteral("/state.bin"), garbage);
    auto corrupt = QuotaPeek::read(homeStd(), std::chrono::milliseconds(1000));
    QVERIFY(corrupt.ok());
    QCOMPARE(QString::fromStdString(corrupt->corruptFile), home() + QStringLiteral("/state.bin"));
    QCOMPARE(readFile(home() + QStringLiteral("/state.bin")), garbage); // left exactly as it was
    QVERIFY(QDir(home()).entryList({ QStringLiteral("state.bin.corrupt-*") }).isEmpty());
}

// Every event type has one history name, and reading it back gives the same type.
void TestQuotaStore::eventTypesMapToTheirNamesBothWays()
{
    QCOMPARE(allEventTypes().size(), std::size_t(19));
    std::set<std::string_view> names;
    for (const EventType type : allEventTypes()) {
        const std::string_view name = eventTypeName(type);
        QVERIFY(!name.empty());
        QVERIFY2(names.insert(name).second, std::string(name).c_str());
        QCOMPARE(eventTypeFromName(name), std::optional<EventType>(type));
        HistoryEvent e;
        e.timeMs = 1700000000000;
        e.type = type;
        e.provider = "api";
        auto back = HistoryEvent::fromJsonLine(e.toJsonLine());
        QVERIFY(back);
        QCOMPARE(back->type, type);
        QVERIFY(back->otherType.empty());
    }
    QCOMPARE(eventTypeName(EventType::RateLimited), std::string_view("429"));
    QCOMPARE(eventTypeName(EventType::GaveUp), std::string_view("gave-up"));
    QVERIFY(!eventTypeFromName("").has_value());
    QVERIFY(!eventTypeFromName("Admit").has_value()); // names are exact
}

// A newer writer's event type is read as "other" with its name, and written back unchanged.
void TestQuotaStore::unknownEventTypeIsKeptNotRejected()
{
    auto e = HistoryEvent::fromJsonLine(R"({"t":5,"type":"spend-cap","provider":"api"})");
    QVERIFY(e);
    QCOMPARE(e->type, EventType::Other);
    QCOMPARE(e->otherType, std::string("spend-cap"));
    QCOMPARE(e->typeName(), std::string_view("spend-cap"));
    QVERIFY(e->toJsonLine().find(R"("type":"spend-cap")") != std::string::npos);
    QVERIFY(!HistoryEvent::fromJsonLine(R"({"t":5,"type":""})"));
}

QTEST_GUILESS_MAIN(TestQuotaStore)
#include "tst_quotastore.moc"
