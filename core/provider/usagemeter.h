#pragma once

// UsageMeter: the tokens an answer really used, read from its body as it streams past (the
// proxy feeds it every chunk it forwards; nothing is held back from the client).
//
//   JSON answers        Anthropic {"usage": {"input_tokens", "output_tokens",
//                       "cache_creation_input_tokens", "cache_read_input_tokens"}}
//                       OpenAI Chat Completions {"usage": {"prompt_tokens", "completion_tokens",
//                       "prompt_tokens_details": {"cached_tokens"}}}
//                       OpenAI Responses {"usage": {"input_tokens", "output_tokens",
//                       "input_tokens_details": {"cached_tokens"}}}
//                       Gemini {"usageMetadata": {"promptTokenCount", "cachedContentTokenCount",
//                       "candidatesTokenCount", "thoughtsTokenCount", "toolUsePromptTokenCount"}}
//                       (also a JSON array of such answers: streamGenerateContent without alt=sse)
//   server-sent events  Anthropic: message_start (message.usage: input and the first output
//                       count) and message_delta (usage.output_tokens, cumulative);
//                       OpenAI Chat Completions: the chunk whose "usage" is not null
//                       (stream_options.include_usage); OpenAI Responses: the response.completed
//                       event (also response.incomplete / response.failed), response.usage;
//                       Gemini (alt=sse): every chunk's usageMetadata, the last one standing
//
// What each provider's fields mean (docs/PROVIDERS.md): Anthropic's input_tokens exclude the
// cache's reads and writes; OpenAI's prompt/input tokens and Gemini's promptTokenCount include
// the cached part (cached_tokens / cachedContentTokenCount are a share of them). TokenUsage
// keeps both views: `input` (everything the prompt held, as before) and the split, so that a
// CountingRule can count in the provider's own terms.
//
// Bounded: a JSON body is kept up to MAX_JSON_BYTES and one event up to MAX_EVENT_BYTES; past
// that the meter gives up (usage unknown: the estimate stands) rather than grow. Bodies that
// are not JSON, events that do not parse and usage fields that are not whole numbers are
// ignored, never guessed.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate {

struct TokenUsage
{
    std::int64_t input = 0; // prompt tokens, cache reads and writes included
    std::int64_t output = 0; // reasoning / thinking tokens included (they are output)
    // The split of `input`, when the answer said it (UsageMeter sets all three so that they add
    // up to `input`). A usage made otherwise (two counts) has them 0: hasSplit() is then false
    // and a CountingRule counts the whole input, never less.
    std::int64_t uncachedInput = 0; // neither read from nor written to a cache
    std::int64_t cacheCreation = 0; // written to the cache (Anthropic's cache_creation_input_tokens)
    std::int64_t cacheRead = 0; // read from the cache (cache_read / cached_tokens / cachedContent)
    [[nodiscard]] std::int64_t total() const { return input + output; }
    [[nodiscard]] bool hasSplit() const
    {
        // Written without a sum that could overflow on a usage built from hostile numbers.
        return input >= 0 && uncachedInput >= 0 && cacheCreation >= 0 && cacheRead >= 0
            && uncachedInput <= input && cacheCreation <= input - uncachedInput
            && cacheRead == input - uncachedInput - cacheCreation;
    }
};

class UsageMeter
{
public:
    static constexpr std::size_t MAX_JSON_BYTES = 8u << 20;
    static constexpr std::size_t MAX_EVENT_BYTES = 1u << 20;

    // `contentType`: the answer's Content-Type (text/event-stream selects the event reader).
    explicit UsageMeter(std::string_view contentType);

    void feed(std::string_view chunk);
    // After the last chunk: the usage the answer reported, if it reported one.
    [[nodiscard]] std::optional<TokenUsage> finish();

    [[nodiscard]] bool streaming() const { return m_events; }

private:
    void eventLine(std::string_view line);
    void eventDone();

    bool m_events = false;
    bool m_gaveUp = false;
    bool m_lastCr = false; // events: the last byte ended a line with \r
    std::string m_buffer; // JSON: the body so far; events: the partial line
    std::string m_data; // events: the data lines of the current event
    std::optional<TokenUsage> m_usage;
};

} // namespace tollgate
