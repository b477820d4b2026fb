// The file home and a Redis home, side by side: one long random sequence of operations —
// acquires with tokens, models and slots, queued waiters, 429s with Retry-After, successes,
// pauses, limit changes, releases, holders that died, backoff resets, time advancing — is
// applied to both through QuotaBackend, on one manual clock. At every step both must decide
// the same (admitted or not, why, when to retry, the fence's place in the sequence) and show
// the same state (window usage per scope, slots, queue, backoff, pauses). The Redis script
// re-implements QuotaPolicy in Lua; this is what keeps the two the same policy.

#include "backend/quotabackend.h"
#include "backend/storefactory.h"
#include "base/manualclock.h"
#include "helpers/redisserver.h"
#include "testsupport.h"

#include <QTemporaryDir>
#include <QTest>
#include <map>
#include <random>

using namespace tollgate;
using namespace std::chrono_literals;

namespace {

// One backend and what the sequence handed out on it (fences and tickets differ in value
// between homes — Redis starts them from its clock — so each is named by its step).
struct Side
{
    std::unique_ptr<QuotaBackend> backend;
    std::uint64_t firstFence = 0;
    std::map<int, std::uint64_t> fences; // step -> fence of a held slot
    std::map<int, AdmitStep> waiters; // step -> a queued request
};

std::string describe(const AdmitOutcome& o, std::uint64_t firstFence)
{
    const auto& d = o.decision;
    return std::string(d.admitted ? "admitted" : "refused") + " reason=" + waitReasonName(d.reason)
        + " retryAt=" + (d.retryAtMs == INT64_MAX ? std::string("ring") : std::to_string(d.retryAtMs))
        + " fence+" + std::to_string(d.admitted ? d.fence - firstFence : 0)
        + " slot=" + std::to_string(d.slotTaken);
}

// What both homes must show alike: the state as every reader sees it (settled: holders this
// host knows dead are gone), without values that name a home (fences, tickets, hosts).
std::string picture(LimiterSnapshot s, const ProcessProbe& probe)
{
    QuotaPolicy::settle(s.state, s.limits, s.nowMs, probe);
    std::string out = "paused=" + std::to_string(s.state.pausedAll) + "\n";
    for (const auto& [name, l] : s.limits.providers()) {
        const ProviderState* p = s.state.provider(name);
        if (!p) {
            out += name + ": no state\n";
            continue;
        }
        out += name + ": paused=" + std::to_string(p->paused) + " 429s=" + std::to_string(p->consecutive429)
            + " backoff=" + std::to_string(p->backoffUntilMs) + " pace=" + std::to_string(p->paceUntilMs)
            + " admitted=" + std::to_string(p->admittedTotal)
            + " limited=" + std::to_string(p->rateLimitedTotal) + " slots=" + std::to_string(p->slots.size())
            + " queue=" + std::to_string(p->queue.size()) + " reported=" + std::to_string(p->reportedRequests)
            + "r/" + std::to_string(p->reportedTokens) + "t@" + std::to_string(p->reportedAtMs);
        for (const auto& sc : p->scopes) {
            const auto u = sc.window.usage(s.nowMs);
            out += " [" + sc.model + " " + std::to_string(sc.window.windowMs()) + "ms "
                + std::to_string(u.requests) + "r " + std::to_string(u.tokens) + "t]";
        }
        for (const auto& w : p->queue)
            out += " w(" + w.caller + "," + std::to_string(w.tokens) + ")";
        out += "\n";
    }
    return out;
}

} // namespace

class TestRedisDifferential final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void sameDecisionsAndStateAtEveryStep_data();
    void sameDecisionsAndStateAtEveryStep();

private:
    std::unique_ptr<RedisServer> m_redis; // when test.sh shares none
    int m_homes = 0;
};

void TestRedisDifferential::sameDecisionsAndStateAtEveryStep_data()
{
    QTest::addColumn<unsigned>("seed");
    for (unsigned seed : { 1u, 2u, 3u, 4u })
        QTest::newRow(qPrintable(QStringLiteral("seed %1").arg(seed))) << seed;
}

void TestRedisDifferential::sameDecisionsAndStateAtEveryStep()
{
    QFETCH(unsigned, seed);
    ManualClock clock(std::chrono::system_clock::now());
    const ProcessProbe probe;
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    Side sides[2];
    auto file = StoreFactory::openBackend(dir.path().toStdString() + "/home", clock, probe);
    QVERIFY(file.ok());
    sides[0].backend = std::move(file).value();
    const auto home = RedisServer::testHome(m_redis, QStringLiteral("d"), ++m_homes);
    if (!home.skip.isEmpty())
        QSKIP(qPrintable(home.skip));
    QVERIFY2(home.failure.isEmpty(), qPrintable(home.failure));
    auto spec = HomeSpec::parse(home.url);
    QVERIFY(spec.ok());
    auto redis = StoreFactory::openBackend(*spec, clock, probe, &clock);
    QVERIFY2(redis.ok(), redis.ok() ? "" : redis.error().describe().c_str());
    sides[1].backend = std::move(redis).value();

    std::mt19937_64 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
    const char* providers[] = { "a", "b" };
    const char* models[] = { "", "m1", "m2" };
    const std::int64_t deadPid = TestSupport::deadPid();
    auto randomLimits = [&]() {
        ProviderLimits l;
        l.requests = 1 + pick(8);
        if (pick(2))
            l.tokens = 100 + pick(900);
        // Mostly whole seconds; sometimes a minute (the limit-mismatch words without "per"),
        // or a window that is not whole seconds ("per 1500 ms").
        const int w = pick(10);
        l.windowMs = w == 0 ? 60000 : w == 1 ? 1500 : 1000 * (1 + pick(20));
        if (pick(3))
            l.parallel = 1 + pick(3);
        l.headroomPercent = pick(3) ? 100 : 50 + pick(50);
        l.backoffBaseMs = 500 + pick(3000);
        l.backoffCapMs = l.backoffBaseMs * (1 + pick(8));
        if (pick(2)) {
            ModelLimits m;
            m.requests = 1 + pick(4);
            m.windowMs = 1000 * (1 + pick(10));
            l.models["m1"] = m;
        }
        return l;
    };
    for (const char* p : providers) {
        const ProviderLimits l = randomLimits();
        for (auto& side : sides)
            QVERIFY(side.backend->setLimits(p, nullptr, l, "test", nullptr, {}).ok());
    }

    const int STEPS = 1500;
    for (int step = 0; step < STEPS; ++step) {
        const int what = pick(100);
        const std::string provider = providers[pick(2)];
        std::string results[2];
        // The same arguments on both sides: drawn once, before the loop over sides.
        AdmitStep admit;
        admit.request.provider = provider;
        admit.request.caller = "c" + std::to_string(pick(5));
        admit.request.model = models[pick(3)];
        admit.request.tokens = pick(4) ? pick(300) : 0;
        admit.request.wantsSlot = pick(2);
        admit.request.pid = pick(10) == 0 ? deadPid : ProcessProbe::selfPid();
        admit.request.waiterPid = ProcessProbe::selfPid();
        admit.request.pidNs = probe.pidNamespace();
        admit.request.startTicks = probe.startTicks(admit.request.pid).value_or(0);
        admit.request.waiterStartTicks = probe.startTicks(admit.request.waiterPid).value_or(0);
        const std::int64_t nowMs
            = std::chrono::duration_cast<std::chrono::milliseconds>(clock.now().time_since_epoch()).count();
        admit.request.deadlineMs = nowMs + pick(20000);
        admit.startMs = nowMs;
        admit.enqueue = pick(4) == 0;
        const std::optional<std::int64_t> retryAfter
            = pick(2) ? std::optional<std::int64_t>(pick(5000)) : std::nullopt;
        const std::uint64_t draw = rng();
        const ProviderLimits newLimits = randomLimits();
        const int heldIndex = pick(1000);
        const bool all = pick(2);
        const std::int64_t correctionAt = pick(120000); // ms before now (some in the future, some expired)
        const std::int64_t estimated = pick(300);
        const std::int64_t used = pick(300);
        // Often what some drawn limits come to per minute (1..8 requests per 1..20 s): equal or not.
        const std::int64_t requestChoices[] = { -1, 12, 24, 30, 60, 120, 7, 1LL << 45 };
        const std::int64_t reportedRequests = requestChoices[pick(8)];
        const std::int64_t reportedTokens = pick(3) == 0 ? -1 : (pick(2) ? 6000 : 100 + pick(60000));
        for (int s = 0; s < 2; ++s) {
            Side& side = sides[s];
            QuotaBackend& b = *side.backend;
            std::string& out = results[s];
            if (what < 45) { // an acquire (queued when enqueue; a waiter that gave up leaves)
                auto o = b.admit(admit);
                out = o ? describe(*o, side.firstFence) : "error: " + o.error().message;
                if (o && o->decision.admitted) {
                    if (side.firstFence == 0) {
                        side.firstFence = o->decision.fence;
                        out = describe(*o, side.firstFence);
                    }
                    // A holder that died never releases (it is reclaimed instead).
                    if (o->decision.slotTaken && admit.request.pid != deadPid)
                        side.fences[step] = o->decision.fence;
                } else if (o && o->decision.ticket != 0) {
                    AdmitStep queued = admit;
                    queued.ticket = o->decision.ticket;
                    side.waiters[step] = queued;
                }
            } else if (what < 55 && !side.waiters.empty()) { // a waiter looks again, or gives up
                auto it = std::next(side.waiters.begin(), heldIndex % static_cast<int>(side.waiters.size()));
                if (all) {
                    auto o = b.admit(it->second);
                    out = o ? describe(*o, side.firstFence) : "error: " + o.error().message;
                    if (o && o->decision.admitted) {
                        if (o->decision.slotTaken && it->second.request.pid != deadPid)
                            side.fences[it->first] = o->decision.fence;
                        side.waiters.erase(it);
                    } else if (o) {
                        it->second.ticket = o->decision.ticket;
                    }
                } else {
                    out = b.leaveQueue(it->second, true, "test").ok() ? "left" : "error";
                    side.waiters.erase(it);
                }
            } else if (what < 63 && !side.fences.empty()) { // a holder releases its slot
                auto it = std::next(side.fences.begin(), heldIndex % static_cast<int>(side.fences.size()));
                // Half end as the proxy ends an exchange: the slot, its real usage and a success.
                AdmissionEnd end;
                end.provider = provider;
                end.fence = it->second;
                end.usedTokens = heldIndex % 3 == 0 ? -1 : used;
                end.success = all;
                auto r
                    = heldIndex % 2 == 0 ? b.releaseSlot(provider, it->second, "") : b.finishAdmission(end);
                out = r ? (*r ? "released" : "not found") : "error";
                if (r && *r)
                    side.fences.erase(it);
            } else if (what < 70) {
                auto r = b.report429(provider, "c", retryAfter, draw, 0);
                out = r ? "backoff " + std::to_string(*r) : "error";
            } else if (what < 74) {
                out = b.reportSuccess(provider, "c").ok() ? "ok" : "error";
            } else if (what < 77) {
                out = b.pause(all ? "" : provider, "", "why", "test").ok() ? "paused" : "error";
            } else if (what < 82) {
                out = b.resume(all ? "" : provider, "test").ok() ? "resumed" : "error";
            } else if (what < 85) {
                out = b.setLimits(provider, nullptr, newLimits, "test", nullptr, {}).ok() ? "limits"
                                                                                          : "error";
            } else if (what < 87) {
                out = b.resetBackoff(provider, "test").ok() ? "reset" : "error";
            } else if (what < 89) {
                // Not compared: how many. A file home reclaims a dead holder of this host at
                // the next transaction; a Redis home when it stands in the way (the script
                // cannot probe pids) — so here one may count a holder the other already freed.
                out = b.releaseStale(all, "test").ok() ? "stale" : "error";
            } else if (what < 90) { // the proxy heard the provider say: nothing left until then
                out = b.holdUntil(provider, nowMs + correctionAt % 20000 - 5000, "held").ok() ? "held"
                                                                                              : "error";
            } else if (what < 92) { // the proxy heard the provider's own limits (per minute)
                auto r = b.noteReportedLimits(provider, reportedRequests, reportedTokens, "c");
                out = r ? (*r ? "noted" : "same") : "error: " + r.error().message;
            } else if (what < 96) { // the proxy corrects an estimate with the answer's usage
                if (heldIndex % 2 == 0) {
                    out = b.correctTokens(
                               provider, admit.request.model, nowMs + 1000 - correctionAt, estimated, used)
                              .ok()
                        ? "corrected"
                        : "error";
                } else { // the end of an admission that took no slot
                    AdmissionEnd end;
                    end.provider = provider;
                    end.fence = 999999; // no such slot
                    end.usedTokens = used;
                    end.success = all;
                    end.admittedAtMs = nowMs + 1000 - correctionAt;
                    end.model = admit.request.model;
                    end.estimated = estimated;
                    end.caller = "c";
                    auto r = b.finishAdmission(end);
                    out = r ? (*r ? "found" : "finished") : "error: " + r.error().message;
                }
            } else {
                out = "time";
            }
        }
        QVERIFY2(results[0] == results[1],
            qPrintable(QStringLiteral("step %1: file home: %2; Redis home: %3")
                           .arg(step)
                           .arg(QString::fromStdString(results[0]), QString::fromStdString(results[1]))));
        auto fileView = sides[0].backend->snapshot();
        auto redisView = sides[1].backend->snapshot();
        QVERIFY(fileView.ok() && redisView.ok());
        const std::string a = picture(*fileView, probe);
        const std::string b = picture(*redisView, probe);
        QVERIFY2(a == b,
            qPrintable(QStringLiteral("step %1 (%2): file home:\n%3Redis home:\n%4")
                           .arg(step)
                           .arg(QString::fromStdString(results[0]), QString::fromStdString(a),
                               QString::fromStdString(b))));
        // Now and then the clock is put back (a wrong date corrected): what was stamped ahead
        // of the new time is judged by the same bounds on both sides (boundTimes, boundFuture).
        if (pick(60) == 0)
            clock.advance(-std::chrono::milliseconds(pick(400000)));
        else
            clock.advance(std::chrono::milliseconds(pick(3) == 0 ? pick(8000) : pick(300)));
    }

    // The words of the limit-mismatch events: the script builds them itself (LimitMismatch in C++).
    auto mismatches = [](Result<std::unique_ptr<QuotaReader>> reader) {
        std::vector<std::string> out;
        if (!reader)
            return std::vector<std::string> { "no reader: " + reader.error().message };
        auto batch = (*reader)->history()->poll();
        if (!batch)
            return std::vector<std::string> { "no history: " + batch.error().message };
        for (const auto& e : batch->events) {
            if (e.type == EventType::LimitMismatch)
                out.push_back(e.provider + ": " + e.reason + " (" + e.caller + ")");
        }
        return out;
    };
    const auto fromFile = mismatches(StoreFactory::openReader(dir.path().toStdString() + "/home"));
    const auto fromRedis = mismatches(StoreFactory::openReader(*spec));
    QVERIFY(!fromFile.empty());
    QCOMPARE(fromRedis, fromFile);
}

QTEST_APPLESS_MAIN(TestRedisDifferential)
#include "tst_redisdifferential.moc"
