#pragma once

// UsageMeter: the tokens an answer really used, read from its body as it streams past (the
// proxy feeds it every chunk it forwards; nothing is held back from the client).
//
//   JSON answers        Anthropic {"usage": {"input_tokens", "output_tokens",
//                       "cache_creation_input_tokens", "cache_read_input_tokens"}}
//                       OpenAI {"usage": {"prompt_tokens", "completion_tokens", "total_tokens"}}
//   server-sent events  Anthropic: message_start (message.usage: input and the first output
//                       count) and message_delta (usage.output_tokens, cumulative);
//                       OpenAI: the chunk whose "usage" is not null (stream_options.include_usage)
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
    std::int64_t output = 0;
    [[nodiscard]] std::int64_t total() const { return input + output; }
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
