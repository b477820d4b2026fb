// The limiter against a state nobody should trust: times far in the future (a forged or
// hand-edited state.bin; anyone who may write the home may write it) and values from the
// library API without bounds. Through a real FileQuotaStore, with an injected clock.

#include "backend/quotalimiter.h"
#include "base/manualclock.h"
#include "history/historyreader.h"
#include "quota/retryafter.h"
#include "store/filequotastore.h"

#include <QTemporaryDir>
#include <QTest>

using namespace tollgate;
using namespace std::chrono_literals;

class TestForgedState final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void farFutureBackoffStopsCallersAtMostADay();
    void hugeRetryAfterIsBoundedInStateAndHistory();
    void pauseWithoutReasonNamesOnlyWhoPaused();
    void setLimitsIfComparesUnderTheLock();
    void valuesOutOfRangeAreNotTrusted_data();
    void valuesOutOfRangeAreNotTrusted();

private:
    std::string home() const { return (m_dir->path() + QStringLiteral("/home")).toStdString(); }
    std::vector<HistoryEvent> history() const
    {
        HistoryReader reader(home());
        auto batch = reader.poll();
        return batch ? batch->events : std::vector<HistoryEvent> {};
    }
    static ProviderLimits simple()
    {
        ProviderLimits l;
        l.requests = 100;
        l.windowMs = 60000;
        return l;
    }
    std::int64_t nowMs() const
    {
        return std::chrono::duration_cast<std::chrono::milliseconds>(m_clock.now().time_since_epoch())
            .count();
    }
    Result<Permit> tryAcquire(QuotaLimiter& limiter)
    {
        AdmitRequest r;
        r.provider = "p";
        r.caller = "test";
        return limiter.acquire(r, m_clock.now()); // a try: admitted now or refused at once
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    ManualClock m_clock { std::chrono::system_clock::now() };
    ProcessProbe m_probe;
};

void TestForgedState::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_clock.set(std::chrono::system_clock::now());
}

// A state.bin slot whose checksum is right but whose values no Tollgate writes (hand-made:
// anyone who may write the home may write it) is not trusted: read as a torn slot is, the other
// one is used (both bad: set aside, as every corrupt state). Before, a window of 1 ms made every
// request look a window old (10 admissions at a limit of 5), and a fence counter at 2^64-1
// wrapped to the placeholder's 0.
void TestForgedState::valuesOutOfRangeAreNotTrusted_data()
{
    QTest::addColumn<int>("forgery");
    QTest::newRow("a window of 1 ms") << 0;
    QTest::newRow("the fence counter at 2^64-1") << 1;
    QTest::newRow("-5 consecutive 429s") << 2;
    QTest::newRow("a slot of pid -1") << 3;
    QTest::newRow("a slot taken before 1970") << 4;
}

void TestForgedState::valuesOutOfRangeAreNotTrusted()
{
    QFETCH(int, forgery);
    auto store = FileQuotaStore::open(home(), m_clock);
    QVERIFY(store.ok());
    QuotaLimiter limiter(**store, m_clock, m_probe);
    QVERIFY(limiter.setLimits("p", simple(), "test").ok());
    QVERIFY(tryAcquire(limiter).ok());
    // Written twice, into both of state.bin's slots (one forged slot alone is passed over for
    // the other, as a torn write is).
    for (int copy = 0; copy < 2; ++copy)
        QVERIFY((*store)
                    ->transact([&](QuotaTransaction& tx) -> Result<void> {
                        ProviderState& p = tx.state.ensureProvider("p");
                        Slot forged;
                        forged.fence = 7;
                        forged.pid = 1;
                        forged.acquiredMs = nowMs();
                        switch (forgery) {
                        case 0:
                            for (auto& sc : p.scopes)
                                sc.window = RollingWindow(1);
                            break;
                        case 1:
                            tx.state.nextFence = UINT64_MAX;
                            break;
                        case 2:
                            p.consecutive429 = -5;
                            break;
                        case 3:
                            forged.pid = -1;
                            p.slots.push_back(forged);
                            break;
                        default:
                            forged.acquiredMs = -1;
                            p.slots.push_back(forged);
                            break;
                        }
                        tx.changed = true;
                        return {};
                    })
                    .ok());
    // Another process's first look at it (this store keeps the state it wrote itself).
    auto other = FileQuotaStore::open(home(), m_clock);
    QVERIFY(other.ok());
    QuotaLimiter otherLimiter(**other, m_clock, m_probe);
    // The forged slot is passed over as a torn one would be: the other slot, the last state
    // Tollgate wrote, is read (a store writes only the slot not in use, so one stays good).
    auto snap = otherLimiter.snapshot();
    QVERIFY2(snap.ok(), snap ? "" : snap.error().message.c_str());
    const ProviderState* p = snap->state.provider("p");
    QVERIFY(p);
    QVERIFY(snap->state.nextFence < 100);
    QCOMPARE(p->consecutive429, 0);
    QVERIFY(p->slots.empty());
    for (const auto& sc : p->scopes)
        QCOMPARE(sc.window.windowMs(), std::int64_t(60000));
    QVERIFY(tryAcquire(otherLimiter).ok());
}

// Clamping only when reading would not do: "now + 24 h" moves with now. The first transaction
// that sees the forged value writes the bound back, so a day later callers go again.
void TestForgedState::farFutureBackoffStopsCallersAtMostADay()
{
    auto store = FileQuotaStore::open(home(), m_clock);
    QVERIFY(store.ok());
    QuotaLimiter limiter(**store, m_clock, m_probe);
    QVERIFY(limiter.setLimits("p", simple(), "test").ok());
    QVERIFY((*store)
                ->transact([](QuotaTransaction& tx) -> Result<void> {
                    ProviderState& p = tx.state.ensureProvider("p");
                    p.backoffUntilMs = INT64_MAX;
                    p.paceUntilMs = INT64_MAX;
                    p.lastAdmitMs = INT64_MAX - 1;
                    p.last429Ms = INT64_MAX;
                    tx.changed = true;
                    return {};
                })
                .ok());

    auto first = tryAcquire(limiter);
    QVERIFY(!first.ok());
    QCOMPARE(first.error().kind, ErrorKind::Timeout);
    m_clock.advance(std::chrono::milliseconds(RetryAfter::MAX_MS + 5000));
    auto later = tryAcquire(limiter);
    QVERIFY2(later.ok(), later ? "" : later.error().message.c_str());
    auto snap = limiter.snapshot();
    QVERIFY(snap.ok());
    const ProviderState* p = snap->state.provider("p");
    QVERIFY(p);
    QVERIFY(p->backoffUntilMs <= snap->nowMs);
    QVERIFY(p->last429Ms <= snap->nowMs);
}

void TestForgedState::hugeRetryAfterIsBoundedInStateAndHistory()
{
    auto store = FileQuotaStore::open(home(), m_clock);
    QVERIFY(store.ok());
    QuotaLimiter limiter(**store, m_clock, m_probe);
    QVERIFY(limiter.setLimits("p", simple(), "test").ok());
    const std::int64_t start = nowMs();
    auto backoff = limiter.report429("p", "test", INT64_MAX);
    QVERIFY(backoff.ok());
    QCOMPARE(*backoff, RetryAfter::MAX_MS);
    auto snap = limiter.snapshot();
    QVERIFY(snap.ok());
    QVERIFY(snap->state.provider("p")->backoffUntilMs <= start + RetryAfter::MAX_MS + 5000);
    bool seen = false;
    for (const HistoryEvent& e : history()) {
        if (e.type != EventType::RateLimited)
            continue;
        seen = true;
        QCOMPARE(e.retryAfterMs, RetryAfter::MAX_MS); // what was honoured, not what was asked
        QVERIFY(e.backoffMs <= RetryAfter::MAX_MS + 5000);
    }
    QVERIFY(seen);
}

void TestForgedState::pauseWithoutReasonNamesOnlyWhoPaused()
{
    auto store = FileQuotaStore::open(home(), m_clock);
    QVERIFY(store.ok());
    QuotaLimiter limiter(**store, m_clock, m_probe);
    QVERIFY(limiter.setLimits("p", simple(), "test").ok());
    QVERIFY(limiter.pause("p", "", "alice").ok());
    QCOMPARE(limiter.snapshot()->state.provider("p")->pauseReason, std::string("by alice"));
    QVERIFY(limiter.pause("", "   ", "bob").ok()); // blank after cleaning is no reason either
    QCOMPARE(limiter.snapshot()->state.pauseReason, std::string("by bob"));
    QVERIFY(limiter.pause("p", "maintenance", "carol").ok());
    QVERIFY(limiter.pause("p", "", "").ok());
    QStringList reasons;
    for (const HistoryEvent& e : history()) {
        if (e.type == EventType::Pause)
            reasons.append(QString::fromStdString(e.reason));
    }
    QCOMPARE(reasons,
        QStringList({ QStringLiteral("by alice"), QStringLiteral("by bob"),
            QStringLiteral("maintenance (by carol)"), QString() }));
}

void TestForgedState::setLimitsIfComparesUnderTheLock()
{
    auto store = FileQuotaStore::open(home(), m_clock);
    QVERIFY(store.ok());
    QuotaLimiter limiter(**store, m_clock, m_probe);
    const ProviderLimits seen = simple();
    QVERIFY(limiter.setLimits("p", seen, "test").ok());
    ProviderLimits theirs = seen;
    theirs.requests = 50;
    QVERIFY(limiter.setLimits("p", theirs, "someone else").ok());

    ProviderLimits mine = seen;
    mine.requests = 200;
    std::optional<ProviderLimits> found;
    auto r = limiter.setLimitsIf("p", seen, mine, "me", &found);
    QVERIFY(r.ok());
    QVERIFY(!*r); // changed meanwhile: nothing done
    QVERIFY(found && *found == theirs);
    QVERIFY(*limiter.limits()->find("p") == theirs);

    r = limiter.setLimitsIf("p", theirs, mine, "me");
    QVERIFY(r.ok() && *r);
    QVERIFY(*limiter.limits()->find("p") == mine);
    r = limiter.setLimitsIf("q", std::nullopt, mine, "me"); // expected none: a new provider
    QVERIFY(r.ok() && *r);
    r = limiter.setLimitsIf("q", std::nullopt, seen, "me");
    QVERIFY(r.ok() && !*r);

    int limitsEvents = 0;
    for (const HistoryEvent& e : history()) {
        if (e.type == EventType::Limits)
            ++limitsEvents;
    }
    QCOMPARE(limitsEvents, 4); // the refused ones recorded nothing
}

QTEST_GUILESS_MAIN(TestForgedState)
#include "tst_forgedstate.moc"
