#include "provider/countingrule.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace tollgate {

namespace {

constexpr std::array<CountingRule::Kind, 4> KINDS { CountingRule::Kind::Anthropic, CountingRule::Kind::OpenAi,
    CountingRule::Kind::Gemini, CountingRule::Kind::Plain };

std::int64_t nonNegative(std::int64_t v)
{
    return v < 0 ? 0 : v;
}

} // namespace

std::optional<CountingRule> CountingRule::fromName(std::string_view name)
{
    for (std::size_t i = 0; i < NAMES.size(); ++i)
        if (name == NAMES[i])
            return CountingRule(KINDS[i]);
    return std::nullopt;
}

Result<CountingRule> CountingRule::parse(std::string_view name)
{
    if (auto rule = fromName(name))
        return *rule;
    // The value is the user's: shown printable and short.
    std::string shown;
    for (char c : name.substr(0, 64))
        shown += (c >= 0x20 && c < 0x7f) ? c : '?';
    return Error::make(ErrorKind::Usage, {},
        "unknown counting '" + shown + "': expected anthropic, openai, gemini or plain");
}

CountingRule CountingRule::forProvider(std::string_view provider)
{
    return fromName(provider).value_or(CountingRule());
}

std::string_view CountingRule::name() const
{
    return NAMES[static_cast<std::size_t>(m_kind)];
}

std::string_view CountingRule::source() const
{
    switch (m_kind) {
    case Kind::Anthropic:
        return "https://platform.claude.com/docs/en/api/rate-limits";
    case Kind::OpenAi:
        return "https://platform.openai.com/docs/guides/rate-limits";
    case Kind::Gemini:
        return "https://ai.google.dev/gemini-api/docs/rate-limits";
    case Kind::Plain:
        break;
    }
    return {};
}

CountedUsage CountingRule::count(const TokenUsage& usage) const
{
    CountedUsage c;
    const std::int64_t input = nonNegative(usage.input);
    c.outputTokens = nonNegative(usage.output);
    c.inputTokens = input;
    // Only Anthropic leaves a part of the prompt out, and only when the answer said which part.
    if (m_kind == Kind::Anthropic && usage.hasSplit())
        c.inputTokens = std::min(input, usage.uncachedInput + usage.cacheCreation);
    // Saturating: a usage built from hostile numbers cannot wrap into a negative count.
    c.tokens = c.inputTokens > INT64_MAX - c.outputTokens ? INT64_MAX : c.inputTokens + c.outputTokens;
    return c;
}

} // namespace tollgate
