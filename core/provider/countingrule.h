#pragma once

// CountingRule: what of an answer's real usage counts toward each of a provider's metrics, in
// the provider's own terms (issue 25). The rules and their sources are in docs/PROVIDERS.md:
//
//   anthropic  input_tokens  = uncached input + cache creation; cache reads do NOT count (the
//                              Claude API "Rate limits" page: ITPM counts input_tokens and
//                              cache_creation_input_tokens; cache_read_input_tokens count only
//                              on the older models the page marks)
//   openai     input_tokens  = all prompt / input tokens, cached ones included (caching does
//                              not change what the token rate limits count)
//   gemini     input_tokens  = promptTokenCount (+ toolUsePromptTokenCount), cached content
//                              included (the "Rate limits" page counts input tokens and says
//                              nothing of the cache: the whole prompt, never less)
//   plain      input_tokens  = the whole input (what Tollgate counted before issue 25)
//   all        output_tokens = output (reasoning / thinking included); tokens = input + output
//
// Invariants: every count is >= 0 and never more than the usage's own total(); a usage that
// does not carry its split (hasSplit() false: two counts, not three) is counted whole, so a
// rule never counts less than it can justify. A rule is a value: no state, no time.

#include "base/result.h"
#include "provider/usagemeter.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tollgate {

// What one answer counts toward each metric.
struct CountedUsage
{
    std::int64_t inputTokens = 0;
    std::int64_t outputTokens = 0;
    std::int64_t tokens = 0; // inputTokens + outputTokens
};

class CountingRule
{
public:
    enum class Kind { Anthropic, OpenAi, Gemini, Plain };
    static constexpr std::array<std::string_view, 4> NAMES { "anthropic", "openai", "gemini", "plain" };

    constexpr CountingRule() = default; // plain
    constexpr explicit CountingRule(Kind kind)
        : m_kind(kind)
    {
    }

    // "anthropic", "openai", "gemini", "plain" (exactly, as the CLI spells them); else nullopt.
    [[nodiscard]] static std::optional<CountingRule> fromName(std::string_view name);
    // The same, refusing anything else with an error that lists the names (for --counting).
    [[nodiscard]] static Result<CountingRule> parse(std::string_view name);
    // The default for a provider named `provider`: its rule when the name is one of the
    // four, else plain (a provider called "work-claude" must say --counting itself).
    [[nodiscard]] static CountingRule forProvider(std::string_view provider);

    [[nodiscard]] constexpr Kind kind() const { return m_kind; }
    [[nodiscard]] std::string_view name() const;
    // The provider's page this rule follows (empty for plain).
    [[nodiscard]] std::string_view source() const;

    [[nodiscard]] CountedUsage count(const TokenUsage& usage) const;

    friend constexpr bool operator==(CountingRule a, CountingRule b) { return a.m_kind == b.m_kind; }

private:
    Kind m_kind = Kind::Plain;
};

} // namespace tollgate
