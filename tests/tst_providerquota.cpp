// The provider's own quota model (issue 25): input and output tokens, model classes whose
// members are name patterns, per-day budgets (rolling or calendar, in a time zone, across a
// daylight-saving change), estimates that are never refused, and the state and limits files
// that carry all of it while staying what earlier versions wrote when none of it is used.
// Pure logic on values, with time as a plain number.

#include "quota/dayreset.h"
#include "quota/limitlearning.h"
#include "quota/quotalimits.h"
#include "quota/quotapolicy.h"
#include "quota/quotastate.h"

#include <QDateTime>
#include <QTest>
#include <QTimeZone>
#include <cstring>

using namespace tollgate;

namespace {

// 2026-11-25T12:00:00Z, a Wednesday.
constexpr std::int64_t NOON_UTC = 1795608000000LL;
constexpr std::int64_t MIN = 60'000;
constexpr std::int64_t HOUR = 60 * MIN;

AdmitRequest ask(std::int64_t input, std::int64_t output, const char* model = "", bool estimated = false)
{
    AdmitRequest r;
    r.provider = "anthropic";
    r.caller = "agent";
    r.model = model;
    r.inputTokens = input;
    r.outputTokens = output;
    r.tokens = input + output;
    r.estimated = estimated;
    r.pid = 100;
    return r;
}

struct Home
{
    QuotaState state;
    ProviderLimits limits;

    ProviderState& p() { return state.ensureProvider("anthropic"); }
    // One transaction: sync with the limits, then admit; true when admitted.
    bool admit(const AdmitRequest& r, std::int64_t now)
    {
        QuotaPolicy::syncProvider(p(), limits, now);
        auto d = QuotaPolicy::admit(state, p(), limits, r, 0, now, false);
        return d && d->admitted;
    }
    AdmitDecision look(const AdmitRequest& r, std::int64_t now)
    {
        QuotaPolicy::syncProvider(p(), limits, now);
        return QuotaPolicy::evaluate(state, p(), limits, r, 0, now);
    }
};

std::int64_t parseUtc(const char* iso)
{
    // Only for fixed test dates: "YYYY-MM-DDTHH:MM" in UTC.
    QDateTime t = QDateTime::fromString(QString::fromLatin1(iso), QStringLiteral("yyyy-MM-ddTHH:mm"));
    t.setTimeZone(QTimeZone::utc());
    return t.toMSecsSinceEpoch();
}

} // namespace

class TestProviderQuota final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void dayResetParsesAndRefuses_data();
    void dayResetParsesAndRefuses();
    void calendarDayInUtc();
    void calendarDayFollowsDaylightSaving();
    void inputAndOutputAreLimitedApart();
    void unsplitCostCountsTowardEachSplitLimit();
    void classesPoolTheirPatternsAndOverlap();
    void perDayCalendarWaitsForTheReset();
    void perDayRollingFreesAfter24Hours();
    void anEstimateIsNeverRefusedAndWaitsForAnEmptyWindow();
    void aStatedCostAboveALimitIsRefused();
    void aCorrectionTakesBackWhatWasRecorded();
    void stateKeepsSplitAndDayAndStaysVersion3WithoutThem();
    void limitsRoundTripAndOldFilesStayByteForByte();
    void badLimitsAreRefusedByName_data();
    void badLimitsAreRefusedByName();
    void learningFollowsOnlyWhatTheUserLeftUnset();
    void adoptingTakesEveryFigureAndScalesToTheWindow();
};

void TestProviderQuota::dayResetParsesAndRefuses_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("expected"); // the text read back, or "!" + part of the error
    QTest::newRow("rolling") << "rolling"
                             << "rolling";
    QTest::newRow("utc") << "07:30"
                         << "07:30";
    QTest::newRow("zone") << "00:00@America/Los_Angeles"
                          << "00:00@America/Los_Angeles";
    QTest::newRow("unknown zone") << "00:00@Mars/Olympus"
                                  << "!unknown time zone 'Mars/Olympus'";
    QTest::newRow("no zone") << "00:00@"
                             << "!no time zone";
    QTest::newRow("hour 24") << "24:00"
                             << "!from 00:00 to 23:59";
    QTest::newRow("minute 60") << "23:60"
                               << "!from 00:00 to 23:59";
    QTest::newRow("one digit") << "7:30"
                               << "!expected";
    QTest::newRow("empty") << ""
                           << "!expected";
    QTest::newRow("control byte") << QStringLiteral("00:00@Europe/\x01") << "!day reset '00:00@Europe/?'";
    QTest::newRow("huge") << QString(500, QLatin1Char('x')) << "!longer than";
    QTest::newRow("dotdot") << "00:00@../../etc/passwd"
                            << "!unknown time zone";
}

void TestProviderQuota::dayResetParsesAndRefuses()
{
    QFETCH(QString, text);
    QFETCH(QString, expected);
    auto r = DayReset::parse(text.toStdString());
    if (expected.startsWith(QLatin1Char('!'))) {
        QVERIFY(!r);
        QVERIFY2(
            QString::fromStdString(r.error().message).contains(expected.mid(1)), r.error().message.c_str());
        QCOMPARE(r.error().kind, ErrorKind::Usage);
    } else {
        QVERIFY2(r, r ? "" : r.error().message.c_str());
        QCOMPARE(QString::fromStdString(r->text()), expected);
    }
}

void TestProviderQuota::calendarDayInUtc()
{
    const auto reset = *DayReset::parse("07:30");
    const auto before = reset.dayOf(parseUtc("2026-11-25T07:29"));
    QCOMPARE(before.startMs, parseUtc("2026-11-24T07:30"));
    QCOMPARE(before.endMs, parseUtc("2026-11-25T07:30"));
    const auto at = reset.dayOf(parseUtc("2026-11-25T07:30"));
    QCOMPARE(at.startMs, parseUtc("2026-11-25T07:30"));
    // The year 9999 and before 1970 are clamped, not overflowed.
    const auto far = reset.dayOf(INT64_MAX);
    QVERIFY(far.startMs < far.endMs);
    const auto early = reset.dayOf(-5);
    QVERIFY(early.startMs < early.endMs);
    const auto rolling = DayReset().dayOf(NOON_UTC);
    QCOMPARE(rolling.endMs - rolling.startMs, DayReset::DAY_MS);
}

void TestProviderQuota::calendarDayFollowsDaylightSaving()
{
    const auto pacific = *DayReset::parse("00:00@America/Los_Angeles");
    // 2026-03-08: clocks go from 02:00 PST to 03:00 PDT, a day of 23 hours.
    const auto spring = pacific.dayOf(parseUtc("2026-03-08T20:00"));
    QCOMPARE(spring.startMs, parseUtc("2026-03-08T08:00")); // midnight PST = 08:00 UTC
    QCOMPARE(spring.endMs, parseUtc("2026-03-09T07:00")); // midnight PDT = 07:00 UTC
    QCOMPARE(spring.endMs - spring.startMs, 23 * HOUR);
    // 2026-11-01: back from PDT to PST, 25 hours.
    const auto autumn = pacific.dayOf(parseUtc("2026-11-01T20:00"));
    QCOMPARE(autumn.startMs, parseUtc("2026-11-01T07:00"));
    QCOMPARE(autumn.endMs, parseUtc("2026-11-02T08:00"));
    QCOMPARE(autumn.endMs - autumn.startMs, 25 * HOUR);
    // A reset inside the spring gap (02:30 does not exist that day) falls at the gap's end.
    const auto gap = *DayReset::parse("02:30@America/Los_Angeles");
    const auto inGap = gap.dayOf(parseUtc("2026-03-08T12:00"));
    QCOMPARE(inGap.startMs, parseUtc("2026-03-08T10:00")); // 03:00 PDT
    // A day that is not a transition day is 24 hours.
    const auto plain = pacific.dayOf(NOON_UTC);
    QCOMPARE(plain.endMs - plain.startMs, 24 * HOUR);
    QVERIFY(plain.startMs <= NOON_UTC && NOON_UTC < plain.endMs);
}

void TestProviderQuota::inputAndOutputAreLimitedApart()
{
    Home h;
    h.limits.inputTokens = 30000;
    h.limits.outputTokens = 8000;
    // Output alone is full after one 8,000-token reservation; input has room left.
    QVERIFY(h.admit(ask(1000, 8000), NOON_UTC));
    const auto d = h.look(ask(1000, 1), NOON_UTC + 1);
    QVERIFY(!d.admitted);
    QCOMPARE(d.reason, WaitReason::Tokens);
    QVERIFY(d.retryAtMs > NOON_UTC + 1 && d.retryAtMs <= NOON_UTC + 62 * 1000);
    // A request with no output fits: input 29,000 more is exactly the limit.
    QVERIFY(h.admit(ask(29000, 0), NOON_UTC + 2));
    QVERIFY(!h.admit(ask(1, 0), NOON_UTC + 3));
    // The total is what tokens would count: both were recorded.
    const auto* sc = h.p().scope("");
    QVERIFY(sc && sc->split);
    const auto u = sc->window.usage(NOON_UTC + 3);
    QCOMPARE(u.input, 30000);
    QCOMPARE(u.output, 8000);
    QCOMPARE(u.tokens, 38000);
    QCOMPARE(u.requests, 2);
}

void TestProviderQuota::unsplitCostCountsTowardEachSplitLimit()
{
    Home h;
    h.limits.inputTokens = 1000;
    h.limits.outputTokens = 1000;
    AdmitRequest r = ask(0, 0);
    r.tokens = 600; // a caller that states only a total: its split is unknown
    QVERIFY(h.admit(r, NOON_UTC));
    const auto u = h.p().scope("")->window.usage(NOON_UTC);
    QCOMPARE(u.input, 600);
    QCOMPARE(u.output, 600);
    QVERIFY(!h.admit(r, NOON_UTC + 1)); // 1,200 > 1,000 for each
    QCOMPARE(QuotaPolicy::impossible(h.limits, r), std::nullopt); // but never refused for it
    // A stated total above an output limit: its split is unknown, so it is neither refused nor
    // left waiting for ever — checked capped at the split limits, admitted into an empty window.
    Home big;
    big.limits.outputTokens = 8000;
    AdmitRequest total = ask(0, 0);
    total.tokens = 10000;
    QCOMPARE(QuotaPolicy::impossible(big.limits, total), std::nullopt);
    QVERIFY(big.admit(total, NOON_UTC));
    QCOMPARE(big.p().scope("")->window.usage(NOON_UTC).output, 10000); // recorded whole
    const auto d = big.look(total, NOON_UTC + 1);
    QVERIFY(!d.admitted);
    QVERIFY(d.retryAtMs < INT64_MAX);
}

void TestProviderQuota::classesPoolTheirPatternsAndOverlap()
{
    Home h;
    h.limits.requests = 100;
    ModelLimits opus;
    opus.requests = 2;
    opus.match = { "claude-opus-4*", "claude-opus-5*" };
    ModelLimits all;
    all.requests = 3;
    all.match = { "claude-*" };
    ModelLimits exact; // the form every earlier version wrote: a class of its own name
    exact.requests = 1;
    h.limits.models["opus"] = opus;
    h.limits.models["claude"] = all;
    h.limits.models["gpt-4o"] = exact;
    QCOMPARE(h.limits.classesOf("claude-opus-4-1"), (std::vector<std::string> { "claude", "opus" }));
    QCOMPARE(h.limits.classesOf("claude-sonnet-4"), (std::vector<std::string> { "claude" }));
    QCOMPARE(h.limits.classesOf("gpt-4o"), (std::vector<std::string> { "gpt-4o" }));
    QCOMPARE(h.limits.classesOf("gpt-4o-mini"), (std::vector<std::string> {}));
    QCOMPARE(h.limits.classesOf(""), (std::vector<std::string> {}));

    QVERIFY(h.admit(ask(1, 1, "claude-opus-4-1"), NOON_UTC));
    QVERIFY(h.admit(ask(1, 1, "claude-opus-5"), NOON_UTC));
    // opus is full (2) though both members are different names: one pool.
    const auto d = h.look(ask(1, 1, "claude-opus-4"), NOON_UTC);
    QVERIFY(!d.admitted);
    QCOMPARE(d.reason, WaitReason::Window);
    // claude (3) has one left, for a model outside opus.
    QVERIFY(h.admit(ask(1, 1, "claude-sonnet-4"), NOON_UTC));
    QVERIFY(!h.admit(ask(1, 1, "claude-haiku"), NOON_UTC));
    // Models in no class only meet the provider's limit.
    QVERIFY(h.admit(ask(1, 1, "gpt-4o-mini"), NOON_UTC));
    QVERIFY(h.admit(ask(1, 1, "gpt-4o"), NOON_UTC));
    QVERIFY(!h.admit(ask(1, 1, "gpt-4o"), NOON_UTC));
    QCOMPARE(h.p().scope("")->window.usage(NOON_UTC).requests, 5);
}

void TestProviderQuota::perDayCalendarWaitsForTheReset()
{
    Home h;
    h.limits.requests = 10;
    h.limits.perDay.requests = 12;
    h.limits.dayReset = *DayReset::parse("00:00@America/Los_Angeles");
    std::int64_t t = parseUtc("2026-11-25T07:00"); // 23:00 PST on the 24th
    int admitted = 0;
    for (int i = 0; i < 40; ++i, t += 10 * MIN) {
        if (h.admit(ask(1, 1), t))
            ++admitted;
        if (t >= parseUtc("2026-11-25T07:50"))
            break;
    }
    // Per minute would allow all six; the day allows all six too (12).
    QCOMPARE(admitted, 6);
    // Fill the day: 6 more, spaced a minute apart, all before midnight Pacific (08:00 UTC).
    t = parseUtc("2026-11-25T07:51");
    for (int i = 0; i < 6; ++i, t += 1000)
        QVERIFY(h.admit(ask(1, 1), t));
    const auto d = h.look(ask(1, 1), parseUtc("2026-11-25T07:59"));
    QVERIFY(!d.admitted);
    QCOMPARE(d.reason, WaitReason::Window);
    QCOMPARE(d.retryAtMs, parseUtc("2026-11-25T08:00")); // the reset, not a window later
    QVERIFY(h.admit(ask(1, 1), parseUtc("2026-11-25T08:00")));
    QCOMPARE(h.p().scope("")->dayUsed.requests, 1);
}

void TestProviderQuota::perDayRollingFreesAfter24Hours()
{
    Home h;
    h.limits.perDay.tokens = 1000;
    QVERIFY(h.admit(ask(400, 600), NOON_UTC));
    const auto d = h.look(ask(1, 0), NOON_UTC + 5 * HOUR);
    QVERIFY(!d.admitted);
    QCOMPARE(d.reason, WaitReason::Tokens);
    // Freed within one bucket (45 min) after the 24 hours, never before them.
    QVERIFY(d.retryAtMs >= NOON_UTC + 24 * HOUR);
    QVERIFY(d.retryAtMs <= NOON_UTC + 24 * HOUR + 45 * MIN);
    QVERIFY(h.admit(ask(1, 0), d.retryAtMs));
}

void TestProviderQuota::anEstimateIsNeverRefusedAndWaitsForAnEmptyWindow()
{
    // The README's example limits and an agent's first request: the proxy's estimate (83,070)
    // is far above the 40,000 limit, but an estimate is not a fact.
    Home h;
    h.limits.tokens = 40000;
    AdmitRequest big = ask(0, 0, "claude-opus-4", true);
    big.tokens = 83070;
    QCOMPARE(QuotaPolicy::impossible(h.limits, big), std::nullopt);
    QVERIFY(h.admit(ask(10, 10), NOON_UTC)); // someone else's small call
    const auto d = h.look(big, NOON_UTC + 1);
    QVERIFY(!d.admitted); // it waits for an empty window...
    QCOMPARE(d.reason, WaitReason::Tokens);
    QVERIFY(d.retryAtMs < INT64_MAX); // ...which comes
    QVERIFY(h.admit(big, d.retryAtMs));
    // Recorded whole: nobody else goes until the real usage corrects it.
    QVERIFY(!h.admit(ask(1, 1), d.retryAtMs + 1));
}

void TestProviderQuota::aStatedCostAboveALimitIsRefused()
{
    ProviderLimits l;
    l.outputTokens = 8000;
    l.perDay.inputTokens = 100000;
    ModelLimits opus;
    opus.tokens = 5000;
    opus.match = { "claude-opus-*" };
    l.models["opus"] = opus;
    auto why = QuotaPolicy::impossible(l, ask(10, 9000));
    QVERIFY(why);
    QVERIFY2(
        why->find("9000 output tokens, but provider 'anthropic' allows 8000 per window") != std::string::npos,
        why->c_str());
    why = QuotaPolicy::impossible(l, ask(100001, 10));
    QVERIFY(why && why->find("per day") != std::string::npos);
    why = QuotaPolicy::impossible(l, ask(3000, 3000, "claude-opus-4"));
    QVERIFY(why && why->find("model class 'opus'") != std::string::npos);
    QCOMPARE(QuotaPolicy::impossible(l, ask(3000, 3000, "claude-sonnet-4")), std::nullopt);
    QVERIFY(QuotaPolicy::impossible(l, ask(-1, 0)));
}

void TestProviderQuota::aCorrectionTakesBackWhatWasRecorded()
{
    Home h;
    h.limits.tokens = 10000;
    h.limits.perDay.tokens = 50000;
    ModelLimits opus;
    opus.tokens = 10000;
    opus.match = { "claude-opus-*" };
    h.limits.models["opus"] = opus;
    QVERIFY(h.admit(ask(2000, 8000, "claude-opus-4"), NOON_UTC));
    QVERIFY(!h.admit(ask(1, 1), NOON_UTC + 1));
    // It used 1,500 in all: 8,500 come back in the window, the day and the class.
    QVERIFY(QuotaPolicy::correct(h.p(), h.limits, "claude-opus-4", NOON_UTC, NOON_UTC + 2000,
        RollingWindow::Usage { 0, -8500, 0, 0 }));
    QCOMPARE(h.p().scope("")->window.usage(NOON_UTC + 2000).tokens, 1500);
    QCOMPARE(h.p().scope("")->rollingDay.usage(NOON_UTC + 2000).tokens, 1500);
    QCOMPARE(h.p().scope("opus")->window.usage(NOON_UTC + 2000).tokens, 1500);
    QVERIFY(h.admit(ask(4000, 4000), NOON_UTC + 2001));
}

void TestProviderQuota::stateKeepsSplitAndDayAndStaysVersion3WithoutThem()
{
    Home plain;
    plain.limits.requests = 5;
    plain.limits.tokens = 1000;
    QVERIFY(plain.admit(ask(10, 20), NOON_UTC));
    const std::string v3 = plain.state.encode();
    std::uint32_t version = 0;
    std::memcpy(&version, v3.data() + 4, 4);
    QCOMPARE(version, QuotaState::PLAIN_FORMAT_VERSION);

    Home h;
    h.limits.inputTokens = 1000;
    h.limits.perDay.requests = 50;
    h.limits.dayReset = *DayReset::parse("00:00@Europe/Berlin");
    ModelLimits opus;
    opus.perDay.tokens = 9000;
    opus.match = { "claude-opus-*" };
    h.limits.models["opus"] = opus;
    QVERIFY(h.admit(ask(300, 40, "claude-opus-4"), NOON_UTC));
    const std::string v4 = h.state.encode();
    std::memcpy(&version, v4.data() + 4, 4);
    QCOMPARE(version, std::uint32_t(4)); // nothing of version 5 (reported limits, a plan) is kept
    auto back = QuotaState::decode(v4);
    QVERIFY2(back, back ? "" : back.error().message.c_str());
    QCOMPARE(back->encode(), v4);
    const auto* sc = back->provider("anthropic")->scope("");
    QVERIFY(sc->split);
    QCOMPARE(sc->day, ScopeWindow::Day::Calendar);
    QCOMPARE(sc->dayUsed.requests, 1);
    QCOMPARE(sc->window.usage(NOON_UTC).input, 300);
    const auto* op = back->provider("anthropic")->scope("opus");
    QCOMPARE(op->day, ScopeWindow::Day::Calendar); // the provider's day reset holds for its classes
    QCOMPARE(op->dayUsed.tokens, 340);

    // A state of version 3 read by this version, then given split limits: what it counted has no
    // known split, so it counts in full toward input and output (never less than it was).
    Home old;
    old.state = *QuotaState::decode(v3);
    old.limits = plain.limits;
    old.limits.outputTokens = 30;
    QVERIFY(!old.admit(ask(1, 1), NOON_UTC + 1)); // the 30 tokens count as 30 output
    QCOMPARE(old.p().scope("")->window.usage(NOON_UTC + 1).output, 30);

    // Truncated or forged: refused, never trusted.
    QVERIFY(!QuotaState::decode(v4.substr(0, v4.size() - 9)));
    std::string forged = v4;
    const auto at = forged.find("opus");
    QVERIFY(at != std::string::npos);
    forged[at + 4] = 7; // the scope kind: not a valid one
    QVERIFY(!QuotaState::decode(forged));

    // Format 5: a slot keeps its estimate's split, and the provider what it reported; written
    // only once one of them is kept, read back whole; a split out of range is refused.
    QuotaState five = h.state;
    Slot slot;
    slot.fence = 99;
    slot.pid = 1;
    slot.acquiredMs = NOON_UTC;
    slot.tokens = 1500;
    slot.inputTokens = 1000;
    slot.outputTokens = 500;
    slot.caller = "five";
    five.ensureProvider("anthropic").slots.push_back(slot);
    const std::string v5 = five.encode();
    std::memcpy(&version, v5.data() + 4, 4);
    QCOMPARE(version, 5u);
    auto read5 = QuotaState::decode(v5);
    QVERIFY2(read5, read5 ? "" : read5.error().message.c_str());
    QCOMPARE(read5->provider("anthropic")->slots.back().inputTokens, std::int64_t(1000));
    QCOMPARE(read5->provider("anthropic")->slots.back().outputTokens, std::int64_t(500));
    QCOMPARE(read5->encode(), v5);
    five.ensureProvider("anthropic").slots.back().outputTokens = -1;
    QVERIFY(!QuotaState::decode(five.encode()));
    five.ensureProvider("anthropic").slots.back().outputTokens = 500;

    // Version 6 only while a provider's stated remainder is kept (issue 26: never more than
    // the provider said remains); each of its fields round-trips, a hostile one is refused.
    ProviderState& said = five.ensureProvider("anthropic");
    said.remainingRequests = 3;
    said.remainingUntilMs = NOON_UTC + 30000;
    said.remainingScope = "claude-opus";
    const std::string v6 = five.encode();
    std::memcpy(&version, v6.data() + 4, 4);
    QCOMPARE(version, 6u);
    auto read6 = QuotaState::decode(v6);
    QVERIFY2(read6, read6 ? "" : read6.error().message.c_str());
    QCOMPARE(read6->provider("anthropic")->remainingRequests, std::int64_t(3));
    QCOMPARE(read6->provider("anthropic")->remainingUntilMs, NOON_UTC + 30000);
    QCOMPARE(read6->provider("anthropic")->remainingScope, std::string("claude-opus"));
    QCOMPARE(read6->encode(), v6);
    for (auto spoil : { +[](ProviderState& p) { p.remainingRequests = -1; },
             +[](ProviderState& p) { p.remainingRequests = (std::int64_t(1) << 40) + 1; },
             +[](ProviderState& p) { p.remainingUntilMs = -5; },
             +[](ProviderState& p) { p.remainingScope = "bad\nname"; } }) {
        QuotaState hostile = five;
        spoil(hostile.ensureProvider("anthropic"));
        auto r = QuotaState::decode(hostile.encode());
        QVERIFY(!r);
        QCOMPARE(r.error().kind, ErrorKind::Corrupt);
    }

    // Version 7 only while a slot was handed to a waiter or a waiter can be handed one
    // (QuotaPolicy::handOff); each field round-trips, a hostile one is refused.
    Waiter w;
    w.ticket = 9;
    w.pid = 4242;
    w.caller = "seven";
    w.wantsSlot = true;
    w.holds = true;
    w.estimated = true;
    w.inputTokens = 700;
    w.outputTokens = 70;
    w.leaseMs = 15000;
    w.holderPid = 4243;
    w.holderStartTicks = 77;
    five.ensureProvider("anthropic").queue.push_back(w);
    five.ensureProvider("anthropic").slots.back().ticket = 8;
    const std::string v7 = five.encode();
    std::memcpy(&version, v7.data() + 4, 4);
    QCOMPARE(version, QuotaState::FORMAT_VERSION);
    QCOMPARE(version, 7u);
    auto read7 = QuotaState::decode(v7);
    QVERIFY2(read7, read7 ? "" : read7.error().message.c_str());
    const Waiter& handed = read7->provider("anthropic")->queue.back();
    QVERIFY(handed.holds);
    QVERIFY(handed.estimated);
    QCOMPARE(handed.inputTokens, std::int64_t(700));
    QCOMPARE(handed.outputTokens, std::int64_t(70));
    QCOMPARE(handed.leaseMs, std::int64_t(15000));
    QCOMPARE(handed.holderPid, std::int64_t(4243));
    QCOMPARE(handed.holderStartTicks, std::uint64_t(77));
    QCOMPARE(read7->provider("anthropic")->slots.back().ticket, std::uint64_t(8));
    QCOMPARE(read7->encode(), v7);
    for (auto spoil : { +[](Waiter& q) { q.inputTokens = -1; },
             +[](Waiter& q) { q.outputTokens = RollingWindow::MAX_BUCKET_COUNT + 1; },
             +[](Waiter& q) { q.leaseMs = -5; }, +[](Waiter& q) { q.holderPid = -2; } }) {
        QuotaState hostile = five;
        spoil(hostile.ensureProvider("anthropic").queue.back());
        auto r = QuotaState::decode(hostile.encode());
        QVERIFY(!r);
        QCOMPARE(r.error().kind, ErrorKind::Corrupt);
    }
    // Neither: back to the version before.
    five.ensureProvider("anthropic").queue.back().holds = false;
    five.ensureProvider("anthropic").slots.back().ticket = 0;
    const std::string back6 = five.encode();
    std::memcpy(&version, back6.data() + 4, 4);
    QCOMPARE(version, 6u);
}

void TestProviderQuota::limitsRoundTripAndOldFilesStayByteForByte()
{
    // A limits.json as the release before issue 25 wrote it: read, written back unchanged.
    const std::string old = R"({
  "providers": {
    "anthropic": {
      "backoff_base_seconds": 60.0,
      "backoff_cap_seconds": 900.0,
      "headroom_percent": 80,
      "max_hold_seconds": 600.0,
      "models": {
        "claude-opus": {
          "requests": 10,
          "window_seconds": 60.0
        }
      },
      "parallel": 4,
      "requests": 50,
      "tokens": 40000,
      "window_seconds": 60.0
    }
  },
  "version": 1
}
)";
    auto read = QuotaLimits::fromJson(old);
    QVERIFY2(read, read ? "" : read.error().message.c_str());
    QCOMPARE(read->toJson(), old);
    QCOMPARE(read->find("anthropic")->classesOf("claude-opus"), (std::vector<std::string> { "claude-opus" }));

    ProviderLimits l = *read->find("anthropic");
    l.inputTokens = 30000;
    l.outputTokens = 8000;
    l.perDay.requests = 5000;
    l.perDay.outputTokens = 1'000'000;
    l.dayReset = *DayReset::parse("00:00@America/Los_Angeles");
    ModelLimits opus;
    opus.inputTokens = 20000;
    opus.perDay.tokens = 900000;
    opus.match = { "claude-opus-4*", "claude-opus-5*" };
    l.models["opus"] = opus;
    l.learn = true;
    l.learned = { "output_tokens" };
    l.models["opus"].learned = { "input_tokens" };
    QuotaLimits all;
    QVERIFY(all.set("anthropic", l));
    const std::string text = all.toJson();
    QVERIFY(text.find("\"day_resets\": \"00:00@America/Los_Angeles\"") != std::string::npos);
    auto again = QuotaLimits::fromJson(text);
    QVERIFY2(again, again ? "" : again.error().message.c_str());
    QCOMPARE(*again, all);
    QCOMPARE(again->toJson(), text);
    QVERIFY(
        QuotaLimits::summary(l).find("5000 requests, 1000000 output tokens per day (resets 00:00@America/")
        != std::string::npos);
}

void TestProviderQuota::badLimitsAreRefusedByName_data()
{
    QTest::addColumn<QString>("provider"); // the JSON of providers.anthropic
    QTest::addColumn<QString>("error");
    QTest::newRow("unknown zone") << R"({"per_day": {"requests": 10}, "day_resets": "00:00@Nowhere/City"})"
                                  << "unknown time zone 'Nowhere/City'";
    QTest::newRow("day below window") << R"({"requests": 50, "per_day": {"requests": 10}})"
                                      << "per_day.requests (10) is below requests per window (50)";
    QTest::newRow("class day below window")
        << R"({"models": {"opus": {"input_tokens": 500, "per_day": {"input_tokens": 100}}}})"
        << "model 'opus': per_day.input_tokens (100) is below input_tokens per window (500)";
    QTest::newRow("empty pattern") << R"({"models": {"opus": {"match": [""]}}})"
                                   << "empty model pattern";
    QTest::newRow("no patterns") << R"({"models": {"opus": {"match": []}}})"
                                 << "\"match\" must be a non-empty array";
    QTest::newRow("pattern not a string") << R"({"models": {"opus": {"match": [5]}}})"
                                          << "holds something else, not a pattern";
    QTest::newRow("control in pattern") << R"({"models": {"opus": {"match": ["claude-\u0007"]}}})"
                                        << "control character";
    QTest::newRow("too many stars") << R"({"models": {"opus": {"match": ["*a*b*c*"]}}})"
                                    << "has more than 3 '*'";
    QTest::newRow("huge") << R"({"input_tokens": 1e300})"
                          << "input_tokens must be a whole number between 1 and 1099511627776";
    QTest::newRow("negative") << R"({"per_day": {"output_tokens": -5}})"
                              << "output_tokens must be a whole number between 1 and";
    QTest::newRow("fraction") << R"({"output_tokens": 1.5})"
                              << "output_tokens must be a whole number";
    QTest::newRow("misspelt per_day key") << R"({"per_day": {"request": 5}})"
                                          << "unknown key providers.anthropic.per_day.request";
    QTest::newRow("per_day not object") << R"({"per_day": 5})"
                                        << "\"per_day\" is not an object";
    QTest::newRow("day_resets number") << R"({"day_resets": 0})"
                                       << "\"day_resets\" is not a string";
    QTest::newRow("learn not a flag") << R"({"requests": 5, "learn": 1})"
                                      << "\"learn\" is not true or false";
    QTest::newRow("learned not a list") << R"({"requests": 5, "learned": "requests"})"
                                        << "\"learned\" is not a list of limit names";
    QTest::newRow("learned unknown metric") << R"({"requests": 5, "learned": ["parallel"]})"
                                            << "learned names 'parallel', which is not requests";
    QTest::newRow("learned an unset limit") << R"({"requests": 5, "learned": ["tokens"]})"
                                            << "learned names tokens, which has no limit";
    QTest::newRow("learned twice") << R"({"requests": 5, "learned": ["requests", "requests"]})"
                                   << "learned lists requests twice or out of order";
    QTest::newRow("class learned unset")
        << R"({"models": {"opus": {"requests": 5, "learned": ["input_tokens"]}}})"
        << "model 'opus': learned names input_tokens, which has no limit";
}

void TestProviderQuota::badLimitsAreRefusedByName()
{
    QFETCH(QString, provider);
    QFETCH(QString, error);
    const std::string text = R"({"version": 1, "providers": {"anthropic": )" + provider.toStdString() + "}}";
    auto r = QuotaLimits::fromJson(text);
    QVERIFY(!r);
    QCOMPARE(r.error().kind, ErrorKind::Corrupt);
    QVERIFY2(QString::fromStdString(r.error().message).contains(error), r.error().message.c_str());
}

QTEST_APPLESS_MAIN(TestProviderQuota)
#include "tst_providerquota.moc"

void TestProviderQuota::learningFollowsOnlyWhatTheUserLeftUnset()
{
    ProviderLimits l;
    l.requests = 50;
    l.learn = true;
    ModelLimits opus;
    opus.outputTokens = 2000;
    opus.match = { "claude-opus-4*" };
    l.models["opus"] = opus;
    QCOMPARE(LimitLearning::scopeOf(l, "claude-opus-4-1"), std::string("opus"));
    QCOMPARE(LimitLearning::scopeOf(l, "claude-haiku"), std::string());

    // The provider's own scope: requests is the user's, the rest follows.
    auto lesson = LimitLearning::learn(l, ReportedLimits { 40, -1, 30000, 8000, "" });
    QVERIFY(lesson);
    QCOMPARE(lesson->limits.requests, std::optional<std::int64_t>(50));
    QCOMPARE(lesson->limits.inputTokens, std::optional<std::int64_t>(30000));
    QCOMPARE(lesson->limits.outputTokens, std::optional<std::int64_t>(8000));
    QCOMPARE(lesson->limits.learned, (std::vector<std::string> { "input_tokens", "output_tokens" }));
    QCOMPARE(lesson->describe("learned"),
        std::string("learned: input_tokens none -> 30000, output_tokens none -> 8000"));
    QVERIFY(QuotaLimits::validate("anthropic", lesson->limits));
    // The same figures again: nothing to do.
    QVERIFY(!LimitLearning::learn(lesson->limits, ReportedLimits { 40, -1, 30000, 8000, "" }));

    // A class's figures land in the class; its user-set output stays.
    auto cls = LimitLearning::learn(l, ReportedLimits { 40, -1, 20000, 4000, "opus" });
    QVERIFY(cls);
    QCOMPARE(cls->scope, std::string("opus"));
    QCOMPARE(cls->limits.models["opus"].inputTokens, std::optional<std::int64_t>(20000));
    QCOMPARE(cls->limits.models["opus"].outputTokens, std::optional<std::int64_t>(2000));
    QCOMPARE(cls->limits.models["opus"].requests, std::optional<std::int64_t>(40));
    QVERIFY(!cls->limits.inputTokens); // the provider's own limits are untouched
    // A class that is gone, learning off, or nothing but nonsense (0, negative): nothing.
    QVERIFY(!LimitLearning::learn(l, ReportedLimits { 40, -1, 20000, 4000, "gone" }));
    ProviderLimits off = l;
    off.learn = false;
    QVERIFY(!LimitLearning::learn(off, ReportedLimits { 40, -1, 20000, 4000, "" }));
    QVERIFY(!LimitLearning::learn(l, ReportedLimits { 0, -7, 0, -1, "" }));

    // A learned figure that would contradict the user's per-day limit is skipped, not forced.
    ProviderLimits daily = l;
    daily.perDay.inputTokens = 10000;
    auto skipped = LimitLearning::learn(daily, ReportedLimits { -1, -1, 30000, 8000, "" });
    QVERIFY(skipped);
    QVERIFY(!skipped->limits.inputTokens);
    QCOMPARE(skipped->limits.outputTokens, std::optional<std::int64_t>(8000));
    // A huge figure is capped at the largest limit Tollgate takes.
    auto huge = LimitLearning::learn(l, ReportedLimits { -1, std::int64_t(1) << 62, -1, -1, "" });
    QVERIFY(huge);
    QCOMPARE(huge->limits.tokens, std::optional<std::int64_t>(QuotaLimits::MAX_COUNT));
}

void TestProviderQuota::adoptingTakesEveryFigureAndScalesToTheWindow()
{
    ProviderLimits l;
    l.requests = 50;
    l.windowMs = 10000; // a sixth of a minute
    l.learned = {};
    auto lesson = LimitLearning::adopt(l, ReportedLimits { 60, -1, 30000, 5, "" });
    QVERIFY(lesson);
    QCOMPARE(lesson->limits.requests, std::optional<std::int64_t>(10)); // 60/min over 10 s
    QCOMPARE(lesson->limits.inputTokens, std::optional<std::int64_t>(5000));
    QCOMPARE(lesson->limits.outputTokens, std::optional<std::int64_t>(1)); // never below 1
    QVERIFY(lesson->limits.learned.empty()); // adopted figures are the user's
    QCOMPARE(lesson->changes.size(), std::size_t(3));
    // A window longer than a minute takes the figure itself (fewer per minute: conservative).
    QCOMPARE(LimitLearning::perWindow(60, 120000), std::int64_t(60));
    QCOMPARE(LimitLearning::perWindow(60, 60000), std::int64_t(60));
}
