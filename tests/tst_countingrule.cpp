// Counting in the provider's own terms (issue 25): which part of a real usage counts toward
// input_tokens, output_tokens and tokens under each provider's rule, from usages read off real
// answer shapes (Anthropic with cache reads and writes, OpenAI Chat Completions and Responses
// with cached tokens, Gemini with cached content and thoughts), names the CLI takes, and
// usages that lie (huge, negative, a split that does not add up).

#include "provider/countingrule.h"
#include "provider/usagemeter.h"

#include <QTest>

using namespace tollgate;

namespace {

TokenUsage metered(std::string_view contentType, std::string_view body)
{
    UsageMeter m(contentType);
    m.feed(body);
    auto u = m.finish();
    if (!u)
        qFatal("no usage metered from %.*s", int(body.size()), body.data());
    return *u;
}

} // namespace

class TestCountingRule final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void names();
    void anthropicLeavesCacheReadsOut();
    void openAiCountsCachedTokens();
    void geminiCountsThePromptAndThoughts();
    void aUsageWithoutItsSplitIsCountedWhole();
    void hostileUsages();
};

void TestCountingRule::names()
{
    QCOMPARE(CountingRule::fromName("anthropic")->kind(), CountingRule::Kind::Anthropic);
    QCOMPARE(CountingRule::fromName("openai")->kind(), CountingRule::Kind::OpenAi);
    QCOMPARE(CountingRule::fromName("gemini")->kind(), CountingRule::Kind::Gemini);
    QCOMPARE(CountingRule::fromName("plain")->kind(), CountingRule::Kind::Plain);
    for (std::string_view name : CountingRule::NAMES)
        QCOMPARE(CountingRule::fromName(name)->name(), name); // round trip
    // Exactly as the CLI spells them: no case folding, no spaces, no prefixes.
    for (const char* bad : { "", "Anthropic", " openai", "openai ", "claude", "gemini2", "plain\n" })
        QVERIFY2(!CountingRule::fromName(bad), bad);
    const auto refused = CountingRule::parse("claude\x1b[2J");
    QVERIFY(!refused);
    QCOMPARE(refused.error().kind, ErrorKind::Usage);
    const std::string message = refused.error().message;
    QVERIFY2(message.find("claude?[2J") != std::string::npos, message.c_str()); // shown, made printable
    QVERIFY2(message.find("anthropic, openai, gemini or plain") != std::string::npos, message.c_str());
    QVERIFY(CountingRule::parse(std::string(1 << 20, 'x')).error().message.size() < 200); // bounded
    QCOMPARE(CountingRule::parse("gemini")->kind(), CountingRule::Kind::Gemini);
    // The default follows the provider's name when it is one of the four.
    QCOMPARE(CountingRule::forProvider("anthropic").kind(), CountingRule::Kind::Anthropic);
    QCOMPARE(CountingRule::forProvider("openai").kind(), CountingRule::Kind::OpenAi);
    QCOMPARE(CountingRule::forProvider("work-claude").kind(), CountingRule::Kind::Plain);
    QCOMPARE(CountingRule().kind(), CountingRule::Kind::Plain);
    QVERIFY(!CountingRule(CountingRule::Kind::Anthropic).source().empty());
    QVERIFY(CountingRule().source().empty());
}

// input 10 uncached + 2 written + 5000 read: Anthropic's ITPM counts 12, plain counts 5012.
void TestCountingRule::anthropicLeavesCacheReadsOut()
{
    const TokenUsage u = metered("application/json",
        R"({"usage":{"input_tokens":10,"cache_creation_input_tokens":2,"cache_read_input_tokens":5000,"output_tokens":7}})");
    QCOMPARE(u.input, std::int64_t(5012)); // unchanged meaning for existing callers
    QCOMPARE(u.total(), std::int64_t(5019));
    QVERIFY(u.hasSplit());
    QCOMPARE(u.uncachedInput, std::int64_t(10));
    QCOMPARE(u.cacheCreation, std::int64_t(2));
    QCOMPARE(u.cacheRead, std::int64_t(5000));
    const CountedUsage a = CountingRule(CountingRule::Kind::Anthropic).count(u);
    QCOMPARE(a.inputTokens, std::int64_t(12));
    QCOMPARE(a.outputTokens, std::int64_t(7));
    QCOMPARE(a.tokens, std::int64_t(19));
    const CountedUsage p = CountingRule().count(u);
    QCOMPARE(p.inputTokens, std::int64_t(5012));
    QCOMPARE(p.tokens, std::int64_t(5019));
    // The same answer streamed: message_start carries the split.
    const TokenUsage s = metered("text/event-stream",
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,"
        "\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":900,\"output_tokens\":1}}}\n\n"
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":40}}\n\n");
    QCOMPARE(CountingRule(CountingRule::Kind::Anthropic).count(s).inputTokens, std::int64_t(103));
    QCOMPARE(CountingRule(CountingRule::Kind::Anthropic).count(s).tokens, std::int64_t(143));
    QCOMPARE(s.input, std::int64_t(1003));
}

void TestCountingRule::openAiCountsCachedTokens()
{
    const CountingRule openai(CountingRule::Kind::OpenAi);
    const TokenUsage chat = metered("application/json",
        R"({"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,)"
        R"("prompt_tokens_details":{"cached_tokens":1920},"completion_tokens_details":{"reasoning_tokens":64}}})");
    QCOMPARE(chat.input, std::int64_t(2006));
    QCOMPARE(chat.cacheRead, std::int64_t(1920));
    QCOMPARE(chat.uncachedInput, std::int64_t(86));
    QVERIFY(chat.hasSplit());
    QCOMPARE(openai.count(chat).inputTokens, std::int64_t(2006)); // cached tokens count too
    QCOMPARE(openai.count(chat).tokens, std::int64_t(2306));
    // The same figures under Anthropic's rule would leave the cache read out: the rule matters.
    QCOMPARE(CountingRule(CountingRule::Kind::Anthropic).count(chat).inputTokens, std::int64_t(86));
    const TokenUsage responses = metered("application/json",
        R"({"id":"resp_1","object":"response","usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":256},)"
        R"("output_tokens":52,"output_tokens_details":{"reasoning_tokens":10},"total_tokens":380}})");
    QCOMPARE(responses.input, std::int64_t(328)); // Responses' input_tokens include the cached ones
    QCOMPARE(responses.cacheRead, std::int64_t(256));
    QCOMPARE(responses.uncachedInput, std::int64_t(72));
    QCOMPARE(openai.count(responses).inputTokens, std::int64_t(328));
    QCOMPARE(openai.count(responses).outputTokens, std::int64_t(52));
    QCOMPARE(openai.count(responses).tokens, std::int64_t(380));
}

void TestCountingRule::geminiCountsThePromptAndThoughts()
{
    const TokenUsage g = metered("application/json",
        R"({"candidates":[],"usageMetadata":{"promptTokenCount":4000,"cachedContentTokenCount":3000,)"
        R"("candidatesTokenCount":200,"thoughtsTokenCount":50,"totalTokenCount":4250}})");
    QCOMPARE(g.input, std::int64_t(4000));
    QCOMPARE(g.cacheRead, std::int64_t(3000));
    QCOMPARE(g.uncachedInput, std::int64_t(1000));
    QCOMPARE(g.output, std::int64_t(250)); // thoughts are output
    const CountedUsage c = CountingRule(CountingRule::Kind::Gemini).count(g);
    QCOMPARE(c.inputTokens, std::int64_t(4000));
    QCOMPARE(c.outputTokens, std::int64_t(250));
    QCOMPARE(c.tokens, std::int64_t(4250));
}

// A usage of two counts (a CLI's --tokens-used, an old caller): no split, so every rule counts
// all of its input (never less than it can justify).
void TestCountingRule::aUsageWithoutItsSplitIsCountedWhole()
{
    const TokenUsage twoCounts { 500, 20 };
    QVERIFY(!twoCounts.hasSplit());
    for (std::string_view name : CountingRule::NAMES) {
        const CountedUsage c = CountingRule::fromName(name)->count(twoCounts);
        QCOMPARE(c.inputTokens, std::int64_t(500));
        QCOMPARE(c.tokens, std::int64_t(520));
    }
    TokenUsage wrong { 500, 20 };
    wrong.uncachedInput = 10;
    wrong.cacheRead = 100; // 10 + 0 + 100 != 500: not a split
    QVERIFY(!wrong.hasSplit());
    QCOMPARE(CountingRule(CountingRule::Kind::Anthropic).count(wrong).inputTokens, std::int64_t(500));
}

void TestCountingRule::hostileUsages()
{
    const CountingRule anthropic(CountingRule::Kind::Anthropic);
    TokenUsage huge { INT64_MAX, INT64_MAX };
    huge.uncachedInput = INT64_MAX;
    huge.cacheCreation = INT64_MAX; // a sum that would overflow: not a split, no UB
    QVERIFY(!huge.hasSplit());
    const CountedUsage h = anthropic.count(huge);
    QCOMPARE(h.inputTokens, INT64_MAX);
    QCOMPARE(h.tokens, INT64_MAX); // saturated, not wrapped negative
    TokenUsage negative { -5, -7 };
    negative.uncachedInput = -5;
    QVERIFY(!negative.hasSplit());
    const CountedUsage n = CountingRule(CountingRule::Kind::OpenAi).count(negative);
    QCOMPARE(n.inputTokens, std::int64_t(0));
    QCOMPARE(n.outputTokens, std::int64_t(0));
    QCOMPARE(n.tokens, std::int64_t(0));
    // The meter's side: a cached count larger than the prompt is cut to the prompt (the split
    // stays non-negative); floats, strings and negatives in the split are left out.
    const TokenUsage lie = metered("application/json",
        R"({"usage":{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":99999}}})");
    QCOMPARE(lie.cacheRead, std::int64_t(10));
    QCOMPARE(lie.uncachedInput, std::int64_t(0));
    QVERIFY(lie.hasSplit());
    const TokenUsage odd = metered("application/json",
        R"({"usage":{"input_tokens":8,"cache_creation_input_tokens":1.5,"cache_read_input_tokens":"9",)"
        R"("output_tokens":2}})");
    QCOMPARE(odd.input, std::int64_t(8));
    QCOMPARE(anthropic.count(odd).inputTokens, std::int64_t(8));
    const TokenUsage wrongDetails = metered(
        "application/json", R"({"usage":{"input_tokens":8,"input_tokens_details":[1],"output_tokens":2}})");
    QCOMPARE(wrongDetails.cacheRead, std::int64_t(0));
    QCOMPARE(CountingRule(CountingRule::Kind::OpenAi).count(wrongDetails).inputTokens, std::int64_t(8));
    const TokenUsage geminiLie = metered("application/json",
        R"({"usageMetadata":{"promptTokenCount":5,"cachedContentTokenCount":1e300,"candidatesTokenCount":-3}})");
    QCOMPARE(geminiLie.input, std::int64_t(5));
    QCOMPARE(geminiLie.cacheRead, std::int64_t(0));
    QCOMPARE(geminiLie.output, std::int64_t(0));
}

QTEST_APPLESS_MAIN(TestCountingRule)
#include "tst_countingrule.moc"
