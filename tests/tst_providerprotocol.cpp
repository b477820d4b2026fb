// What the proxy reads from the providers' HTTP: rate-limit headers in both providers'
// formats (and values that do not parse, or lie about the far future), the real usage in
// JSON and streamed answers (split anywhere), the request's estimate, and what an error
// answer means for the shared quota.

#include "provider/answerkind.h"
#include "provider/ratelimitheaders.h"
#include "provider/requestestimate.h"
#include "provider/toplevelfields.h"
#include "provider/usagemeter.h"
#include "quota/retryafter.h"

#include <QTest>

using namespace tollgate;

namespace {

// 2026-11-24T10:00:00Z
constexpr std::int64_t NOW = 1795514400000;

} // namespace

class TestProviderProtocol final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void anthropicHeaders();
    void openAiHeaders();
    void durations_data();
    void durations();
    void rfc3339_data();
    void rfc3339();
    void badValuesAreNamedNotGuessed();
    void farFutureResetsAreBounded();
    void retryAfterForms();
    void subscriptionHeaders();
    void hostileSubscriptionHeaders();
    void usageFromJsonBodies();
    void usageFromAnthropicStreamSplitAnywhere();
    void usageFromOpenAiStream();
    void usageMeterIsBounded();
    void usageFromOpenAiResponses();
    void usageFromGemini();
    void requestEstimate();
    void outputBoundsOfResponsesAndGemini();
    void topLevelFieldsAsTheBodyArrives();
    void theSkimKeepsWhatTheFieldsNeedInBoundedTokens();
    void answerKinds();
    void subscriptionWindowLimit();
};

void TestProviderProtocol::anthropicHeaders()
{
    const HttpHeaders h { { "Anthropic-RateLimit-Requests-Limit", "50" },
        { "anthropic-ratelimit-requests-remaining", "0" },
        { "anthropic-ratelimit-requests-reset", "2026-11-24T10:00:30Z" },
        { "anthropic-ratelimit-tokens-limit", "40000" }, { "anthropic-ratelimit-tokens-remaining", "39000" },
        { "anthropic-ratelimit-tokens-reset", "2026-11-24T11:00:01.250+01:00" },
        { "anthropic-ratelimit-input-tokens-remaining", "12" },
        { "anthropic-ratelimit-output-tokens-limit", "8000" }, { "content-type", "application/json" } };
    const RateLimitReport r = RateLimitHeaders::parse(h, NOW);
    QVERIFY(r.problems.empty());
    QCOMPARE(r.requests.limit, std::optional<std::int64_t>(50));
    QCOMPARE(r.requests.remaining, std::optional<std::int64_t>(0));
    QCOMPARE(r.requests.resetAtMs, std::optional<std::int64_t>(NOW + 30000));
    QCOMPARE(r.tokens.limit, std::optional<std::int64_t>(40000));
    QCOMPARE(r.tokens.resetAtMs, std::optional<std::int64_t>(NOW + 1250)); // +01:00 offset
    QCOMPARE(r.inputTokens.remaining, std::optional<std::int64_t>(12));
    QCOMPARE(r.outputTokens.limit, std::optional<std::int64_t>(8000));
    QVERIFY(!r.retryAfterMs);
    // Requests are exhausted until their reset; tokens are not.
    QCOMPARE(r.exhaustedUntilMs(), std::optional<std::int64_t>(NOW + 30000));
}

void TestProviderProtocol::openAiHeaders()
{
    const HttpHeaders h { { "x-ratelimit-limit-requests", "60" }, { "x-ratelimit-remaining-requests", "59" },
        { "x-ratelimit-reset-requests", "1s" }, { "X-RateLimit-Limit-Tokens", "150000" },
        { "x-ratelimit-remaining-tokens", "0" }, { "x-ratelimit-reset-tokens", "6m0s" } };
    const RateLimitReport r = RateLimitHeaders::parse(h, NOW);
    QVERIFY(r.problems.empty());
    QCOMPARE(r.requests.limit, std::optional<std::int64_t>(60));
    QCOMPARE(r.requests.resetAtMs, std::optional<std::int64_t>(NOW + 1000));
    QCOMPARE(r.tokens.limit, std::optional<std::int64_t>(150000));
    QCOMPARE(r.tokens.resetAtMs, std::optional<std::int64_t>(NOW + 360000));
    QCOMPARE(r.exhaustedUntilMs(), std::optional<std::int64_t>(NOW + 360000));
    const RateLimitReport none = RateLimitHeaders::parse({ { "x-ratelimit-remaining-requests", "3" } }, NOW);
    QVERIFY(!none.exhaustedUntilMs());
}

void TestProviderProtocol::durations_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<qint64>("ms"); // -1: refused
    QTest::newRow("seconds") << "1s" << qint64(1000);
    QTest::newRow("minutes and seconds") << "6m0s" << qint64(360000);
    QTest::newRow("ms") << "12ms" << qint64(12);
    QTest::newRow("all units") << "1h2m3.5s" << qint64(3723500);
    QTest::newRow("fraction of a ms rounds up") << "250us" << qint64(1);
    QTest::newRow("ns") << "1500000ns" << qint64(2);
    QTest::newRow("micro sign") << QString::fromUtf8("7\xc2\xb5s") << qint64(1);
    QTest::newRow("zero") << "0" << qint64(0);
    QTest::newRow("zero seconds") << "0s" << qint64(0);
    QTest::newRow("padded") << " 2s " << qint64(2000);
    QTest::newRow("empty") << "" << qint64(-1);
    QTest::newRow("no unit") << "12" << qint64(-1);
    QTest::newRow("unknown unit") << "3d" << qint64(-1);
    QTest::newRow("two dots") << "1.5.2s" << qint64(-1);
    QTest::newRow("unit only") << "s" << qint64(-1);
    QTest::newRow("negative") << "-1s" << qint64(-1);
    QTest::newRow("huge") << "99999999999999h" << qint64(-1);
    QTest::newRow("control byte") << "1\x1bs" << qint64(-1);
}

void TestProviderProtocol::durations()
{
    QFETCH(QString, text);
    QFETCH(qint64, ms);
    const std::string t = text.toStdString();
    auto r = RateLimitHeaders::parseDuration(t);
    if (ms < 0) {
        QVERIFY2(!r.ok(), t.c_str());
        QVERIFY(r.error().message.find("duration") != std::string::npos);
        for (char c : r.error().message)
            QVERIFY(static_cast<unsigned char>(c) >= 0x20); // the quoted value is made printable
    } else {
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(*r, std::int64_t(ms));
    }
}

void TestProviderProtocol::rfc3339_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<qint64>("ms"); // -1: refused
    QTest::newRow("Z") << "2026-11-24T10:00:00Z" << qint64(NOW);
    QTest::newRow("lower case") << "2026-11-24t10:00:00z" << qint64(NOW);
    QTest::newRow("fraction rounds up") << "2026-11-24T10:00:00.0001Z" << qint64(NOW + 1);
    QTest::newRow("long fraction") << "2026-11-24T10:00:00.123456789123Z" << qint64(NOW + 124);
    QTest::newRow("negative offset") << "2026-11-24T05:30:00-04:30" << qint64(NOW);
    QTest::newRow("leap day") << "2028-02-29T00:00:00Z" << qint64(1835395200000);
    QTest::newRow("leap second") << "2026-11-24T09:59:60Z" << qint64(NOW - 1000);
    QTest::newRow("29 Feb common year") << "2027-02-29T00:00:00Z" << qint64(-1);
    QTest::newRow("31 April") << "2027-04-31T00:00:00Z" << qint64(-1);
    QTest::newRow("hour 24") << "2026-11-24T24:00:00Z" << qint64(-1);
    QTest::newRow("no offset") << "2026-11-24T10:00:00" << qint64(-1);
    QTest::newRow("trailing") << "2026-11-24T10:00:00Zjunk" << qint64(-1);
    QTest::newRow("empty fraction") << "2026-11-24T10:00:00.Z" << qint64(-1);
    QTest::newRow("date only") << "2026-11-24" << qint64(-1);
    QTest::newRow("bad offset") << "2026-11-24T10:00:00+1:00" << qint64(-1);
}

void TestProviderProtocol::rfc3339()
{
    QFETCH(QString, text);
    QFETCH(qint64, ms);
    auto r = RateLimitHeaders::parseRfc3339(text.toStdString());
    if (ms < 0) {
        QVERIFY2(!r.ok(), qPrintable(text));
    } else {
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(*r, std::int64_t(ms));
    }
}

void TestProviderProtocol::badValuesAreNamedNotGuessed()
{
    const HttpHeaders h { { "x-ratelimit-limit-requests", "sixty" },
        { "x-ratelimit-remaining-requests", "-1" },
        { "x-ratelimit-remaining-tokens", "99999999999999999999" }, { "x-ratelimit-reset-tokens", "soon" },
        { "anthropic-ratelimit-requests-reset", "2027-02-29T00:00:00Z" }, { "retry-after-ms", "1.5" },
        { "x-ratelimit-limit-requests-extra", "5" } };
    const RateLimitReport r = RateLimitHeaders::parse(h, NOW);
    QVERIFY(!r.requests.known());
    QVERIFY(!r.tokens.known());
    QVERIFY(!r.retryAfterMs);
    QCOMPARE(r.problems.size(), std::size_t(6));
    QVERIFY(r.problems[0].rfind("x-ratelimit-limit-requests:", 0) == 0);
    QVERIFY(r.problems[4].find("does not exist") != std::string::npos);
}

void TestProviderProtocol::farFutureResetsAreBounded()
{
    // No answer may stop callers for longer than Retry-After's bound (a day).
    const HttpHeaders h { { "anthropic-ratelimit-requests-remaining", "0" },
        { "anthropic-ratelimit-requests-reset", "9999-12-31T23:59:59Z" },
        { "x-ratelimit-remaining-tokens", "0" }, { "x-ratelimit-reset-tokens", "8000h" },
        { "retry-after", "Fri, 31 Dec 9999 23:59:59 GMT" } };
    const RateLimitReport r = RateLimitHeaders::parse(h, NOW);
    QCOMPARE(r.requests.resetAtMs, std::optional<std::int64_t>(NOW + RetryAfter::MAX_MS));
    QCOMPARE(r.tokens.resetAtMs, std::optional<std::int64_t>(NOW + RetryAfter::MAX_MS));
    QCOMPARE(r.retryAfterMs, std::optional<std::int64_t>(RetryAfter::MAX_MS));
    QCOMPARE(r.exhaustedUntilMs(), std::optional<std::int64_t>(NOW + RetryAfter::MAX_MS));
    // And at the end of time itself, nothing overflows.
    const RateLimitReport end = RateLimitHeaders::parse(
        { { "x-ratelimit-remaining-tokens", "0" }, { "x-ratelimit-reset-tokens", "1h" } }, INT64_MAX - 5);
    QCOMPARE(end.tokens.resetAtMs, std::optional<std::int64_t>(INT64_MAX));
}

void TestProviderProtocol::retryAfterForms()
{
    QCOMPARE(RateLimitHeaders::parse({ { "Retry-After", "7" } }, NOW).retryAfterMs,
        std::optional<std::int64_t>(7000));
    QCOMPARE(
        RateLimitHeaders::parse({ { "retry-after", "Tue, 24 Nov 2026 10:00:09 GMT" } }, NOW).retryAfterMs,
        std::optional<std::int64_t>(9000));
    // retry-after-ms is the more precise: it wins, in either order.
    QCOMPARE(
        RateLimitHeaders::parse({ { "retry-after-ms", "1234" }, { "retry-after", "2" } }, NOW).retryAfterMs,
        std::optional<std::int64_t>(1234));
    QCOMPARE(
        RateLimitHeaders::parse({ { "retry-after", "2" }, { "retry-after-ms", "1234" } }, NOW).retryAfterMs,
        std::optional<std::int64_t>(1234));
    const RateLimitReport bad
        = RateLimitHeaders::parse({ { "retry-after", "Thu, 29 Feb 2027 10:00:00 GMT" } }, NOW);
    QVERIFY(!bad.retryAfterMs);
    QCOMPARE(bad.problems.size(), std::size_t(1));
}

// A subscription plan's answer (the header names and forms public clients of these plans
// read): the plan, its windows, the overage.
void TestProviderProtocol::subscriptionHeaders()
{
    const std::int64_t reset5h = NOW / 1000 + 2 * 3600;
    const std::int64_t reset7d = NOW / 1000 + 5 * 24 * 3600; // lawfully days ahead
    const HttpHeaders h { { "Anthropic-Ratelimit-Unified-Status", "allowed_warning" },
        { "anthropic-ratelimit-unified-reset", std::to_string(reset5h) },
        { "anthropic-ratelimit-unified-representative-claim", "five_hour" },
        { "anthropic-ratelimit-unified-5h-utilization", "0.9123" },
        { "anthropic-ratelimit-unified-5h-reset", std::to_string(reset5h) },
        { "anthropic-ratelimit-unified-5h-status", "allowed_warning" },
        { "anthropic-ratelimit-unified-5h-surpassed-threshold", "0.9" },
        { "anthropic-ratelimit-unified-7d-utilization", "0.3068459187383675" },
        { "anthropic-ratelimit-unified-7d-reset", std::to_string(reset7d) },
        { "anthropic-ratelimit-unified-7d-status", "allowed" },
        { "anthropic-ratelimit-unified-7d_sonnet-utilization", "0.06" },
        { "anthropic-ratelimit-unified-fallback-percentage", "0.5" },
        { "anthropic-ratelimit-unified-overage-status", "rejected" },
        { "anthropic-ratelimit-unified-overage-disabled-reason", "out_of_credits" },
        { "anthropic-ratelimit-unified-overage-in-use", "false" },
        { "anthropic-ratelimit-unified-fallback", "available" } };
    const RateLimitReport r = RateLimitHeaders::parse(h, NOW);
    QVERIFY2(r.problems.empty(), r.problems.empty() ? "" : r.problems.front().c_str());
    const SubscriptionReport& s = r.subscription;
    QVERIFY(s.known());
    QCOMPARE(s.status, std::optional<SubscriptionStatus>(SubscriptionStatus::AllowedWarning));
    QCOMPARE(s.resetAtMs, std::optional<std::int64_t>(reset5h * 1000));
    QCOMPARE(s.representativeClaim, std::string("five_hour"));
    QCOMPARE(s.fallbackPercentage, std::optional<double>(0.5));
    QCOMPARE(s.overageDisabledReason, std::string("out_of_credits"));
    QCOMPARE(s.overageInUse, std::optional<bool>(false));
    QCOMPARE(s.windows.size(), std::size_t(4));
    const SubscriptionWindow* five = s.window("5h");
    QVERIFY(five);
    QCOMPARE(five->utilization, std::optional<double>(0.9123));
    QCOMPARE(five->resetAtMs, std::optional<std::int64_t>(reset5h * 1000));
    QVERIFY(!five->resetBounded);
    QCOMPARE(five->status, std::optional<SubscriptionStatus>(SubscriptionStatus::AllowedWarning));
    const SubscriptionWindow* seven = s.window("7d");
    QVERIFY(seven);
    QCOMPARE(seven->resetAtMs, std::optional<std::int64_t>(NOW + RetryAfter::MAX_MS)); // a day at most
    QVERIFY(seven->resetBounded);
    QCOMPARE(s.window("7d_sonnet")->utilization, std::optional<double>(0.06));
    QCOMPARE(s.window("overage")->status, std::optional<SubscriptionStatus>(SubscriptionStatus::Rejected));
    QVERIFY(!s.window("1d"));
    // Overage refused alone does not refuse calls; nor does a warning.
    QVERIFY(!s.rejectedUntilMs());
    // The per-minute budgets and their hold are untouched by the unified headers.
    QVERIFY(!r.requests.known() && !r.tokens.known());
    QVERIFY(!r.exhaustedUntilMs());

    // Rejected: nobody before the reset (the plan's, or a rejected window's).
    const RateLimitReport rejected = RateLimitHeaders::parse(
        { { "anthropic-ratelimit-unified-status", "rejected" },
            { "anthropic-ratelimit-unified-reset", std::to_string(reset5h) },
            { "anthropic-ratelimit-unified-5h-status", "rejected" },
            { "anthropic-ratelimit-unified-5h-reset", std::to_string(reset5h + 60) } },
        NOW);
    QCOMPARE(rejected.subscription.rejectedUntilMs(), std::optional<std::int64_t>((reset5h + 60) * 1000));
    const RateLimitReport windowOnly
        = RateLimitHeaders::parse({ { "anthropic-ratelimit-unified-7d-status", "rejected" },
                                      { "anthropic-ratelimit-unified-7d-reset", std::to_string(reset5h) } },
            NOW);
    QCOMPARE(windowOnly.subscription.rejectedUntilMs(), std::optional<std::int64_t>(reset5h * 1000));
    // An API key's answer has none of it.
    QVERIFY(!RateLimitHeaders::parse({ { "anthropic-ratelimit-requests-limit", "50" } }, NOW)
                 .subscription.known());
}

void TestProviderProtocol::hostileSubscriptionHeaders()
{
    const auto one = [](const char* name, const std::string& value) {
        return RateLimitHeaders::parse({ { name, value } }, NOW);
    };
    // Utilisations that are not a share: left out and named.
    for (const char* bad :
        { "1e300", "-0.5", "nan", "NaN", "inf", "0x1p3", "+0.5", "0.5.1", "", "  ", "half", "10.5" }) {
        const RateLimitReport r = one("anthropic-ratelimit-unified-5h-utilization", bad);
        QVERIFY2(!r.subscription.window("5h"), bad);
        QCOMPARE(r.problems.size(), std::size_t(1));
    }
    QCOMPARE(
        one("anthropic-ratelimit-unified-5h-utilization", " 1.02 ").subscription.window("5h")->utilization,
        std::optional<double>(1.02)); // overrun a little: kept
    QVERIFY(!one("anthropic-ratelimit-unified-fallback-percentage", "1.5").subscription.fallbackPercentage);
    // Resets: the year 9999 is cut to a day and said; not a number, negative or huge: left out.
    RateLimitReport r = one("anthropic-ratelimit-unified-reset", "253402300799");
    QCOMPARE(r.subscription.resetAtMs, std::optional<std::int64_t>(NOW + RetryAfter::MAX_MS));
    QVERIFY(r.subscription.resetBounded);
    QCOMPARE(r.problems.size(), std::size_t(1));
    QVERIFY(r.problems.front().find("beyond any window") != std::string::npos);
    r = one("anthropic-ratelimit-unified-5h-reset", "99999999999999999999");
    QVERIFY(!r.subscription.window("5h"));
    QCOMPARE(r.problems.size(), std::size_t(1));
    for (const char* bad : { "-1", "1.7e9", "2026-11-24T10:00:00Z", "soon", "" }) {
        r = one("anthropic-ratelimit-unified-reset", bad);
        QVERIFY2(!r.subscription.resetAtMs, bad);
        QCOMPARE(r.problems.size(), std::size_t(1));
    }
    // Statuses: only the three.
    for (const char* bad : { "Allowed", "available", "ok", "rejected!", "" }) {
        r = one("anthropic-ratelimit-unified-status", bad);
        QVERIFY2(!r.subscription.status, bad);
        QCOMPARE(r.problems.size(), std::size_t(1));
        r = one("anthropic-ratelimit-unified-7d-status", bad);
        QVERIFY2(!r.subscription.window("7d"), bad);
    }
    // A 1 GiB-looking claim, control bytes, and names that are not a window's.
    r = one("anthropic-ratelimit-unified-representative-claim", std::string(1 << 20, 'a'));
    QVERIFY(r.subscription.representativeClaim.empty());
    QCOMPARE(r.problems.size(), std::size_t(1));
    QVERIFY(r.problems.front().size() < 200); // the value is quoted cut short
    QVERIFY(one("anthropic-ratelimit-unified-representative-claim", "five_hour\x1b[2J")
                .subscription.representativeClaim.empty());
    QVERIFY(!one("anthropic-ratelimit-unified-overage-in-use", "yes").subscription.overageInUse);
    r = one("anthropic-ratelimit-unified-../etc-utilization", "0.5");
    QVERIFY(r.subscription.windows.empty());
    QVERIFY(r.problems.empty()); // an unknown header shape is ignored, like any unknown header
    QVERIFY(one("anthropic-ratelimit-unified--utilization", "0.5").subscription.windows.empty());
    // Bounded memory: at most MAX_WINDOWS windows however many the answer names.
    HttpHeaders many;
    for (int i = 0; i < 1000; ++i)
        many.push_back({ "anthropic-ratelimit-unified-w" + std::to_string(i) + "-utilization", "0.1" });
    r = RateLimitHeaders::parse(many, NOW);
    QCOMPARE(r.subscription.windows.size(), SubscriptionReport::MAX_WINDOWS);
    QCOMPARE(r.problems.size(), std::size_t(1000) - SubscriptionReport::MAX_WINDOWS);
}

void TestProviderProtocol::usageFromJsonBodies()
{
    UsageMeter anthropic("application/json");
    anthropic.feed(R"({"id":"msg_1","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10,)");
    anthropic.feed(R"("cache_read_input_tokens":5,"cache_creation_input_tokens":2,"output_tokens":7}})");
    auto u = anthropic.finish();
    QVERIFY(u);
    QCOMPARE(u->input, std::int64_t(17));
    QCOMPARE(u->output, std::int64_t(7));
    QCOMPARE(u->total(), std::int64_t(24));

    UsageMeter openai("application/json; charset=utf-8");
    openai.feed(R"({"choices":[],"usage":{"prompt_tokens":31,"completion_tokens":9,"total_tokens":40}})");
    u = openai.finish();
    QVERIFY(u);
    QCOMPARE(u->input, std::int64_t(31));
    QCOMPARE(u->output, std::int64_t(9));

    for (const char* body : { "not json", R"({"usage":{"input_tokens":"ten"}})",
             R"({"usage":{"input_tokens":-4}})", R"({"usage":null})", R"([1,2])", "" }) {
        UsageMeter m("application/json");
        m.feed(body);
        QVERIFY2(!m.finish(), body);
    }
}

void TestProviderProtocol::usageFromAnthropicStreamSplitAnywhere()
{
    const std::string stream
        = "event: message_start\r\n"
          "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":"
          "{\"input_tokens\":25,\"cache_read_input_tokens\":3,\"output_tokens\":1}}}\r\n\r\n"
          "event: content_block_delta\r\n"
          "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"usage: 99\"}}\r\n\r\n"
          ": a comment\n\n"
          "event: message_delta\n"
          "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},"
          "\"usage\":{\"output_tokens\":15}}\n\n"
          "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    // In one piece, and fed one byte at a time (a stream arrives in any pieces).
    for (std::size_t step : { stream.size(), std::size_t(1), std::size_t(7) }) {
        UsageMeter m("text/event-stream; charset=utf-8");
        QVERIFY(m.streaming());
        for (std::size_t i = 0; i < stream.size(); i += step)
            m.feed(std::string_view(stream).substr(i, step));
        auto u = m.finish();
        QVERIFY(u);
        QCOMPARE(u->input, std::int64_t(28));
        QCOMPARE(u->output, std::int64_t(15));
    }
}

void TestProviderProtocol::usageFromOpenAiStream()
{
    UsageMeter m("text/event-stream");
    m.feed("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n");
    m.feed(
        "data: "
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":4,\"total_tokens\":16}}\n\n");
    m.feed("data: [DONE]"); // no final blank line: the stream simply ended
    auto u = m.finish();
    QVERIFY(u);
    QCOMPARE(u->total(), std::int64_t(16));
    // Events whose fields have unexpected types are ignored, never thrown over.
    UsageMeter odd("text/event-stream");
    odd.feed("data: {\"type\":null}\n\ndata: {\"type\":5,\"usage\":[1]}\n\ndata: "
             "{\"type\":\"message_start\",\"message\":7}\n\n"
             "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":\"x\"}}\n\n");
    QVERIFY(!odd.finish()); // nothing countable: the estimate stands (a usage of 0 would under-count)
    UsageMeter none("text/event-stream");
    none.feed("data: {\"choices\":[]}\n\ndata: [DONE]\n\n");
    QVERIFY(!none.finish());
}

void TestProviderProtocol::usageMeterIsBounded()
{
    UsageMeter event("text/event-stream");
    const std::string big(UsageMeter::MAX_EVENT_BYTES + 10, 'x');
    event.feed("data: ");
    event.feed(big);
    event.feed("\n\ndata: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n");
    QVERIFY(!event.finish()); // gave up: the estimate stands
    UsageMeter body("application/json");
    const std::string chunk(1 << 20, ' ');
    for (std::size_t i = 0; i <= UsageMeter::MAX_JSON_BYTES / chunk.size(); ++i)
        body.feed(chunk);
    body.feed(R"({"usage":{"input_tokens":1,"output_tokens":1}})");
    QVERIFY(!body.finish());
}

// OpenAI's Responses API (POST /v1/responses): the usage of a JSON answer, and of a stream in
// its response.completed event (the earlier events carry "usage": null), split anywhere.
void TestProviderProtocol::usageFromOpenAiResponses()
{
    UsageMeter json("application/json");
    json.feed(
        R"({"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":1200,)"
        R"("input_tokens_details":{"cached_tokens":1024},"output_tokens":90,)"
        R"("output_tokens_details":{"reasoning_tokens":40},"total_tokens":1290}})");
    auto u = json.finish();
    QVERIFY(u);
    QCOMPARE(u->input, std::int64_t(1200));
    QCOMPARE(u->cacheRead, std::int64_t(1024));
    QCOMPARE(u->output, std::int64_t(90));
    QCOMPARE(u->total(), std::int64_t(1290));

    const std::string stream
        = "event: response.created\n"
          "data: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"usage\":null}}\n\n"
          "event: response.output_text.delta\n"
          "data: {\"type\":\"response.output_text.delta\",\"delta\":\"the \\\"usage\\\" word\"}\n\n"
          "event: response.completed\r\n"
          "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\","
          "\"usage\":{\"input_tokens\":37,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":"
          "11,"
          "\"total_tokens\":48}}}\r\n\r\n";
    for (std::size_t step : { stream.size(), std::size_t(1), std::size_t(5) }) {
        UsageMeter m("text/event-stream");
        for (std::size_t i = 0; i < stream.size(); i += step)
            m.feed(std::string_view(stream).substr(i, step));
        auto t = m.finish();
        QVERIFY(t);
        QCOMPARE(t->input, std::int64_t(37));
        QCOMPARE(t->output, std::int64_t(11));
        QCOMPARE(t->uncachedInput, std::int64_t(37));
    }
    // A stream cut before response.completed reported nothing: the estimate stands.
    UsageMeter cut("text/event-stream");
    cut.feed(stream.substr(0, stream.find("event: response.completed")));
    QVERIFY(!cut.finish());
    // Wrong types where the usage should be: ignored, never thrown over.
    UsageMeter odd("text/event-stream");
    odd.feed("data: {\"type\":\"response.completed\",\"response\":[1]}\n\n"
             "data: {\"type\":\"response.completed\",\"response\":{\"usage\":\"lots\"}}\n\n"
             "data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":-1}}}\n\n");
    QVERIFY(!odd.finish());
}

// Gemini's usageMetadata: in a JSON answer, in a JSON array (streamGenerateContent without
// alt=sse) and in every event of an alt=sse stream (cumulative: the last one is the call's).
void TestProviderProtocol::usageFromGemini()
{
    UsageMeter json("application/json; charset=UTF-8");
    json.feed(
        R"({"candidates":[{"content":{"parts":[{"text":"hi"}]}}],"usageMetadata":{"promptTokenCount":15,)"
        R"("candidatesTokenCount":6,"totalTokenCount":21}})");
    auto u = json.finish();
    QVERIFY(u);
    QCOMPARE(u->input, std::int64_t(15));
    QCOMPARE(u->output, std::int64_t(6));

    UsageMeter array("application/json");
    array.feed(R"([{"candidates":[],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":1}},)"
               R"({"candidates":[],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":30,)"
               R"("thoughtsTokenCount":12,"toolUsePromptTokenCount":4}}, 7, [[[]]]])");
    u = array.finish();
    QVERIFY(u);
    QCOMPARE(u->input, std::int64_t(13)); // prompt + tool-use prompt
    QCOMPARE(u->output, std::int64_t(42)); // candidates + thoughts

    const std::string stream = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}],"
                               "\"usageMetadata\":{\"promptTokenCount\":120,\"cachedContentTokenCount\":100,"
                               "\"candidatesTokenCount\":1}}\r\n\r\n"
                               "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"b\"}]}}],"
                               "\"usageMetadata\":{\"promptTokenCount\":120,\"cachedContentTokenCount\":100,"
                               "\"candidatesTokenCount\":25,"
                               "\"thoughtsTokenCount\":5,\"totalTokenCount\":150}}\r\n\r\n";
    for (std::size_t step : { stream.size(), std::size_t(1), std::size_t(3) }) {
        UsageMeter m("text/event-stream");
        for (std::size_t i = 0; i < stream.size(); i += step)
            m.feed(std::string_view(stream).substr(i, step));
        auto t = m.finish();
        QVERIFY(t);
        QCOMPARE(t->input, std::int64_t(120));
        QCOMPARE(t->cacheRead, std::int64_t(100));
        QCOMPARE(t->output, std::int64_t(30));
    }
    for (const char* body :
        { R"({"usageMetadata":{}})", R"({"usageMetadata":[1]})",
            R"({"usageMetadata":{"promptTokenCount":"15"}})", R"({"usageMetadata":{"promptTokenCount":1.5}})",
            R"({"usageMetadata":{"promptTokenCount":99999999999999999999}})", R"([1,"x",null])" }) {
        UsageMeter m("application/json");
        m.feed(body);
        QVERIFY2(!m.finish(), body);
    }
    // A Gemini stream that is one endless event: given up at the bound (the estimate stands).
    UsageMeter big("text/event-stream");
    big.feed("data: {\"usageMetadata\":{\"promptTokenCount\":1},\"pad\":\"");
    const std::string mib(1 << 20, 'p');
    big.feed(mib);
    big.feed("\"}\n\n");
    QVERIFY(!big.finish());
}

void TestProviderProtocol::requestEstimate()
{
    const std::string body = R"({"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,)"
                             R"("messages":[{"role":"user","content":"Hello"}]})";
    RequestEstimate e = RequestEstimate::of(body);
    QVERIFY(e.json);
    QCOMPARE(e.model, std::string("claude-sonnet-4-5"));
    QVERIFY(e.stream);
    QCOMPARE(e.inputTokens, std::int64_t((body.size() + 3) / 4));
    QCOMPARE(e.maxOutputTokens, std::int64_t(1024));
    QCOMPARE(e.tokens(), e.inputTokens + 1024);

    e = RequestEstimate::of(R"({"model":"gpt-4o","max_completion_tokens":300,"messages":[]})");
    QCOMPARE(e.maxOutputTokens, std::int64_t(300));
    QVERIFY(!e.stream);
    e = RequestEstimate::of(R"({"model":"gpt-4o","messages":[]})");
    QCOMPARE(e.maxOutputTokens, RequestEstimate::DEFAULT_OUTPUT);
    e = RequestEstimate::of("not json at all");
    QVERIFY(!e.json);
    QVERIFY(e.model.empty());
    QCOMPARE(e.inputTokens, std::int64_t(4));
    QCOMPARE(e.maxOutputTokens, RequestEstimate::DEFAULT_OUTPUT);
    // A model name with a control byte, or absurdly long, names no model (no per-model limit
    // is looked up with it, nothing prints it).
    QVERIFY(RequestEstimate::of("{\"model\":\"a\\u001b[2Jb\"}").model.empty());
    QVERIFY(RequestEstimate::of("{\"model\":\"" + std::string(200, 'm') + "\"}").model.empty());
    QCOMPARE(RequestEstimate::of(R"({"max_tokens":-5})").maxOutputTokens, RequestEstimate::DEFAULT_OUTPUT);
    // A bound written as a float counts as its value, rounded up (not the smaller default).
    QCOMPARE(RequestEstimate::of(R"({"max_tokens":1e5})").maxOutputTokens, std::int64_t(100000));
    QCOMPARE(RequestEstimate::of(R"({"max_tokens":100000.0})").maxOutputTokens, std::int64_t(100000));
    QCOMPARE(RequestEstimate::of(R"({"max_completion_tokens":9.5})").maxOutputTokens, std::int64_t(10));
    // A bound past the largest count (2^40) counts as that count, never as the small default
    // (issue 26 item 7): such a request waits for room, as conservative as the estimate can be.
    QCOMPARE(
        RequestEstimate::of(R"({"max_tokens":1099511627777})").maxOutputTokens, RequestEstimate::MAX_OUTPUT);
    QCOMPARE(
        RequestEstimate::of(R"({"max_tokens":1099511627776})").maxOutputTokens, RequestEstimate::MAX_OUTPUT);
    QCOMPARE(RequestEstimate::of(R"({"max_tokens":9000000000000000000})").maxOutputTokens,
        RequestEstimate::MAX_OUTPUT);
    QCOMPARE(RequestEstimate::of(R"({"max_completion_tokens":5e15})").maxOutputTokens,
        RequestEstimate::MAX_OUTPUT);
    // Past 2^63 (or 9e18 as a float): the largest too.
    QCOMPARE(RequestEstimate::of(R"({"max_tokens":1e300})").maxOutputTokens, RequestEstimate::MAX_OUTPUT);
    QCOMPARE(RequestEstimate::of(R"({"max_tokens":18446744073709551615})").maxOutputTokens,
        RequestEstimate::MAX_OUTPUT);
    QCOMPARE(RequestEstimate::of(R"({"max_tokens":-1.5})").maxOutputTokens, RequestEstimate::DEFAULT_OUTPUT);
    // A member admission needs, named twice: refused (the provider might take either one).
    QCOMPARE(
        RequestEstimate::of(R"({"model":"a","max_tokens":1,"model":"b"})").repeated, std::string("model"));
    QCOMPARE(RequestEstimate::of(R"({"max_tokens":1,"messages":[],"max_tokens":9})").repeated,
        std::string("max_tokens"));
    // The same names deeper down are not the request's.
    e = RequestEstimate::of(R"({"model":"a","metadata":{"model":"b","max_tokens":7},"max_tokens":3})");
    QVERIFY(e.repeated.empty());
    QCOMPARE(e.model, std::string("a"));
    QCOMPARE(e.maxOutputTokens, std::int64_t(3));
    // Not one object: no members taken from it.
    QVERIFY(!RequestEstimate::of(R"({"model":"a","max_tokens":3} {"x":1})").json);
    QVERIFY(RequestEstimate::of(R"([{"model":"a"}])").model.empty());
}

// The output bound of the Responses API (max_output_tokens) and of Gemini
// (generationConfig.maxOutputTokens, one level down): read, not the 4,096 default.
void TestProviderProtocol::outputBoundsOfResponsesAndGemini()
{
    RequestEstimate e
        = RequestEstimate::of(R"({"model":"gpt-5","input":"Hello","max_output_tokens":2000,"stream":true})");
    QCOMPARE(e.maxOutputTokens, std::int64_t(2000));
    QCOMPARE(e.model, std::string("gpt-5"));
    QVERIFY(e.stream);
    QCOMPARE(RequestEstimate::of(R"({"model":"gpt-5","max_output_tokens":1e4})").maxOutputTokens,
        std::int64_t(10000));
    QCOMPARE(RequestEstimate::of(R"({"model":"gpt-5","max_output_tokens":"2000"})").maxOutputTokens,
        RequestEstimate::DEFAULT_OUTPUT);
    QCOMPARE(RequestEstimate::of(R"({"model":"gpt-5","max_output_tokens":-1})").maxOutputTokens,
        RequestEstimate::DEFAULT_OUTPUT);
    // Past every count: the largest, never the small default (issue 26 item 7).
    QCOMPARE(
        RequestEstimate::of(R"({"model":"gpt-5","max_output_tokens":18446744073709551615})").maxOutputTokens,
        RequestEstimate::MAX_OUTPUT);
    // Named twice, or after admission under another name: refused like the others.
    QCOMPARE(RequestEstimate::of(R"({"max_output_tokens":1,"input":"x","max_output_tokens":9000})").repeated,
        std::string("max_output_tokens"));
    QCOMPARE(RequestEstimate::of(R"({"model":"m","max_tokens":1,"max_output_tokens":9000})").repeated,
        std::string("max_output_tokens"));

    // Gemini: the model is in the URL, the bound inside generationConfig.
    const std::string gemini
        = R"({"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"temperature":0.2,)"
          R"("stopSequences":["maxOutputTokens"],"thinkingConfig":{"maxOutputTokens":5},)"
          R"("maxOutputTokens":800}})";
    e = RequestEstimate::of(gemini);
    QVERIFY(e.json);
    QCOMPARE(e.maxOutputTokens, std::int64_t(800)); // not the nested thinkingConfig's, not the string
    QVERIFY(e.model.empty());
    // The same name elsewhere is not the bound.
    QCOMPARE(
        RequestEstimate::of(R"({"maxOutputTokens":700,"config":{"maxOutputTokens":600}})").maxOutputTokens,
        RequestEstimate::DEFAULT_OUTPUT);
    QCOMPARE(RequestEstimate::of(R"({"generationConfig":[{"maxOutputTokens":600}]})").maxOutputTokens,
        RequestEstimate::DEFAULT_OUTPUT);
    QCOMPARE(
        RequestEstimate::of(R"({"generationConfig":{"maxOutputTokens":1,"maxOutputTokens":2}})").repeated,
        std::string("generationConfig.maxOutputTokens"));
    QCOMPARE(
        RequestEstimate::of(R"({"generationConfig":{},"generationConfig":{"maxOutputTokens":2}})").repeated,
        std::string("generationConfig"));
    // After generationConfig closed, a later top-level maxOutputTokens is not read as its.
    e = RequestEstimate::of(R"({"generationConfig":{"topK":3},"maxOutputTokens":900})");
    QCOMPARE(e.maxOutputTokens, RequestEstimate::DEFAULT_OUTPUT);
    QVERIFY(e.repeated.empty());
    // A huge body (a 1 MiB string in it) still yields its bound, parsed as it goes.
    const std::string big = R"({"contents":[{"parts":[{"text":")" + std::string(1 << 20, 'a')
        + R"("}]}],"generationConfig":{"maxOutputTokens":64}})";
    QCOMPARE(RequestEstimate::of(big).maxOutputTokens, std::int64_t(64));
}

// The members as a body arrives: known once the model and an output bound were read, so the
// proxy can admit before the rest (the messages) has come; after that the output bound under
// its other name is a repeat too (admission was made without it).
void TestProviderProtocol::topLevelFieldsAsTheBodyArrives()
{
    const std::string body = R"({"model":"m","max_tokens":16,"messages":[{"content":"hi"}],"stream":true})";
    TopLevelFields early;
    (void)nlohmann::json::sax_parse(body.substr(0, body.find("messages")), &early); // cut off mid-body
    QVERIFY(early.known());
    QCOMPARE(*early.model(), std::string("m"));
    QCOMPARE(*early.maxOutputTokens(), std::int64_t(16));
    QVERIFY(!early.wholeObject());
    TopLevelFields whole;
    QVERIFY(nlohmann::json::sax_parse(body, &whole));
    QVERIFY(whole.wholeObject());
    QCOMPARE(whole.stream(), std::optional<bool>(true));
    TopLevelFields late;
    (void)nlohmann::json::sax_parse(std::string(R"({"messages":[],"model":"m")"), &late);
    QVERIFY(!late.known()); // no output bound yet: held until it comes
    TopLevelFields other;
    QVERIFY(!nlohmann::json::sax_parse(
        std::string(R"({"model":"m","max_tokens":1,"max_completion_tokens":900})"), &other));
    QCOMPARE(other.repeated(), std::string("max_completion_tokens"));
    TopLevelFields before; // both bounds before the model: no repeat, the later name counts
    QVERIFY(nlohmann::json::sax_parse(
        std::string(R"({"max_tokens":1,"max_completion_tokens":9,"model":"m"})"), &before));
    QVERIFY(before.repeated().empty());
    QCOMPARE(*before.maxOutputTokens(), std::int64_t(9));
}

// JsonSkim: what nlohmann's parser reads of a streamed body. The members TopLevelFields reads
// come out the same (repeats included), byte by byte or whole; nothing deeper is passed on,
// strings are cut without breaking an escape or a UTF-8 sequence, and a number too long to
// read stops it.
void TestProviderProtocol::theSkimKeepsWhatTheFieldsNeedInBoundedTokens()
{
    auto skimmed = [](const std::string& body, bool byteByByte = false) {
        JsonSkim skim;
        std::string out(body.size(), '\0');
        std::size_t n = 0;
        if (byteByByte) {
            for (std::size_t i = 0; i < body.size(); ++i)
                n += skim.skim(body.data() + i, 1, out.data() + n);
        } else {
            n = skim.skim(body.data(), body.size(), out.data());
        }
        out.resize(n);
        return out;
    };
    QCOMPARE(
        skimmed(R"({"model":"m", "messages":[{"role":"user","content":"a]}\"["}],  "max_tokens":16,)"
                R"("generationConfig":{"maxOutputTokens":8,"x":{"y":[1]},"s":"t"},"metadata":{"a":[]}})"),
        std::string(R"({"model":"m", "messages":[], "max_tokens":16,)"
                    R"("generationConfig":{"maxOutputTokens":8,"x":{},"s":"t"},"metadata":{"a":[]}})"));
    QCOMPARE(skimmed(R"([{"model":"m"},1])"), std::string("[]")); // not an object: nothing inside
    const std::vector<std::string> bodies {
        R"({"model":"m","max_tokens":16,"messages":[{"content":"hi"}],"stream":true})",
        R"({"messages":[{"content":"x\"}]"}],"model":"m","max_tokens":1,"model":"n"})",
        R"({"contents":[{"parts":[{"text":"a"}]}],"generationConfig":{"topK":{"a":1},"maxOutputTokens":64}})",
        R"({"generationConfig":{"maxOutputTokens":1,"maxOutputTokens":2}})",
        R"({"model":"m","max_tokens":1,"max_completion_tokens":900})",
        "{\"max_tokens\" :\n\n 1e5 , \"model\":\"claude-\\u0078\"}",
    };
    for (const std::string& body : bodies) {
        for (const bool byteByByte : { false, true }) {
            TopLevelFields whole;
            TopLevelFields skim;
            const bool wholeParsed = nlohmann::json::sax_parse(body, &whole);
            QCOMPARE(nlohmann::json::sax_parse(skimmed(body, byteByByte), &skim), wholeParsed);
            QCOMPARE(skim.model(), whole.model());
            QCOMPARE(skim.maxOutputTokens(), whole.maxOutputTokens());
            QCOMPARE(skim.stream(), whole.stream());
            QCOMPARE(skim.repeated(), whole.repeated());
            QCOMPARE(skim.wholeObject(), whole.wholeObject());
        }
    }
    // A long string is cut after MAX_STRING bytes, never inside an escape or a UTF-8
    // character, at whichever byte it reaches that length: what is passed on still parses.
    for (std::size_t shift = 0; shift < 8; ++shift) {
        std::string text(JsonSkim::MAX_STRING - 8 + shift, 'a');
        for (int i = 0; i < 2000; ++i)
            text += i % 2 ? "\\u00e9\\\\" : "\xc3\xa9\xe2\x82\xac";
        const std::string body = R"({"system":")" + text + R"(","model":"m","max_tokens":5})";
        const std::string out = skimmed(body);
        QVERIFY(out.size() < JsonSkim::MAX_STRING + 60); // of more than 14,000
        TopLevelFields fields;
        QVERIFY2(nlohmann::json::sax_parse(out, &fields), out.substr(out.size() - 60).c_str());
        QCOMPARE(*fields.model(), std::string("m"));
        QCOMPARE(*fields.maxOutputTokens(), std::int64_t(5));
    }
    // Whitespace runs pass on as one byte; a number longer than MAX_BARE gives up.
    QCOMPARE(skimmed("{" + std::string(100000, ' ') + "}"), std::string("{ }"));
    JsonSkim skim;
    const std::string number = R"({"model":"m","max_tokens":)" + std::string(JsonSkim::MAX_BARE + 1, '9');
    std::string out(number.size(), '\0');
    QVERIFY(skim.skim(number.data(), number.size(), out.data()) < number.size());
    QVERIFY(skim.gaveUp());
    JsonSkim deep; // a long number inside messages is not read, so nothing to give up on
    const std::string inside = R"({"messages":[)" + std::string(100000, '9') + "]}";
    out.assign(inside.size(), '\0');
    QCOMPARE(deep.skim(inside.data(), inside.size(), out.data()), std::size_t(15)); // {"messages":[]}
    QVERIFY(!deep.gaveUp());
}

void TestProviderProtocol::answerKinds()
{
    using K = AnswerKind::Kind;
    QCOMPARE(AnswerKind::of(200, false, "{}").kind, K::Ok);
    QCOMPARE(AnswerKind::of(529, false, R"({"type":"error","error":{"type":"overloaded_error"}})").kind,
        K::Overloaded);
    QCOMPARE(AnswerKind::of(503, false, "").kind, K::Overloaded);
    QCOMPARE(AnswerKind::of(400, false, "{}").kind, K::Other);
    QCOMPARE(
        AnswerKind::of(429, true,
            R"({"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}})")
            .kind,
        K::RateLimited);
    QCOMPARE(AnswerKind::of(429, false, "not json").kind, K::RateLimited);
    const AnswerKind openai = AnswerKind::of(429, false,
        R"({"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}})");
    QCOMPARE(openai.kind, K::SpendCap);
    QVERIFY(openai.reason.find("current quota") != std::string::npos);
    const AnswerKind anthropic = AnswerKind::of(429, false,
        "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"You have reached your "
        "specified "
        "workspace API usage limits.\\u001b[2J\"}}");
    QCOMPARE(anthropic.kind, K::SpendCap);
    QVERIFY(anthropic.reason.find('\x1b') == std::string::npos);
    // The same words with a retry-after: a rate limit that will pass.
    QCOMPARE(AnswerKind::of(429, true,
                 R"({"type":"error","error":{"type":"rate_limit_error","message":"usage limits"}})")
                 .kind,
        K::RateLimited);
}

// "Claude AI usage limit reached|<epoch>": a subscription window used up until then — a hold
// until the reset, bounded like every time read from an answer; the three-argument of() keeps
// its earlier answer (the proxy does not handle the new kind yet).
void TestProviderProtocol::subscriptionWindowLimit()
{
    using K = AnswerKind::Kind;
    const auto body = [](const std::string& message) {
        return R"({"type":"error","error":{"type":"rate_limit_error","message":")" + message + R"("}})";
    };
    const std::int64_t resetSeconds = NOW / 1000 + 3 * 3600; // three hours ahead
    const std::string limit = "Claude AI usage limit reached|" + std::to_string(resetSeconds);
    AnswerKind a = AnswerKind::of(429, false, body(limit), NOW);
    QCOMPARE(a.kind, K::SubscriptionLimit);
    QCOMPARE(a.resetAtMs, std::optional<std::int64_t>(resetSeconds * 1000));
    QVERIFY(a.reason.find("usage limit reached") != std::string::npos);
    // With a retry-after too: the epoch is the better word.
    QCOMPARE(AnswerKind::of(429, true, body(limit), NOW).kind, K::SubscriptionLimit);
    // As a client passes the CLI's words on: a body that is not JSON.
    a = AnswerKind::of(429, false, limit, NOW);
    QCOMPARE(a.kind, K::SubscriptionLimit);
    QCOMPARE(a.resetAtMs, std::optional<std::int64_t>(resetSeconds * 1000));
    // Unchanged for callers of the three-argument form: a spend cap without retry-after (the
    // words name a usage limit), a rate limit with it, and no reset.
    const AnswerKind old = AnswerKind::of(429, false, body(limit));
    QCOMPARE(old.kind, K::SpendCap);
    QVERIFY(!old.resetAtMs);
    QCOMPARE(AnswerKind::of(429, true, body(limit)).kind, K::RateLimited);
    QCOMPARE(AnswerKind::of(429, false, limit).kind, K::RateLimited);
    // Bounded: the year 9999 is held for a day (and said), a reset in the past is now.
    a = AnswerKind::of(429, false, body("Claude AI usage limit reached|253402300799"), NOW);
    QCOMPARE(a.kind, K::SubscriptionLimit);
    QCOMPARE(a.resetAtMs, std::optional<std::int64_t>(NOW + RetryAfter::MAX_MS));
    QVERIFY(a.reason.find("more than a day") != std::string::npos);
    a = AnswerKind::of(429, false, body("Claude AI usage limit reached|1000"), NOW);
    QCOMPARE(a.resetAtMs, std::optional<std::int64_t>(NOW));
    // Not a time after the bar: the window's words still (never a spend cap), a rate limit.
    for (const std::string& bad : { std::string("Claude AI usage limit reached"),
             std::string("Claude AI usage limit reached|"), std::string("Claude AI usage limit reached|-5"),
             std::string("Claude AI usage limit reached|1.7e9"),
             std::string("Claude AI usage limit reached|17557x"),
             "Claude AI usage limit reached|" + std::string(13, '9'),
             "Claude AI usage limit reached|" + std::string(1 << 20, '7') }) {
        const AnswerKind k = AnswerKind::of(429, false, body(bad), NOW);
        QVERIFY2(k.kind == K::RateLimited, bad.substr(0, 60).c_str());
        QVERIFY(!k.resetAtMs);
    }
    // The words in another field, another status, or a hostile message: not this kind.
    QCOMPARE(
        AnswerKind::of(429, false, R"({"error":{"type":"Claude AI usage limit reached|1795525200"}})", NOW)
            .kind,
        K::RateLimited);
    QCOMPARE(AnswerKind::of(400, false, body(limit), NOW).kind, K::Other);
    QCOMPARE(AnswerKind::of(200, false, body(limit), NOW).kind, K::Ok);
    a = AnswerKind::of(
        429, false, body("\\u001b[2JClaude AI usage limit reached|" + std::to_string(resetSeconds)), NOW);
    QCOMPARE(a.kind, K::SubscriptionLimit);
    QVERIFY(a.reason.find('\x1b') == std::string::npos);
    // Everything else is what the three-argument form says.
    const AnswerKind openai = AnswerKind::of(429, false,
        R"({"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}})",
        NOW);
    QCOMPARE(openai.kind, K::SpendCap);
    QCOMPARE(AnswerKind::of(529, false, "", NOW).kind, K::Overloaded);
    QCOMPARE(AnswerKind::of(429, false, "not json", NOW).kind, K::RateLimited);
}

QTEST_GUILESS_MAIN(TestProviderProtocol)
#include "tst_providerprotocol.moc"
