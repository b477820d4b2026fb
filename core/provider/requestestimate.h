#pragma once

// RequestEstimate: what the proxy admits a request with, read from its JSON body before it is
// forwarded — the model (per-model limits), whether it streams, and the tokens it may use:
//
//   input   ceil(body bytes / 4): about four bytes of English per token for both providers'
//           tokenizers, and the body's JSON syntax and field names make it an over-estimate
//           (conservative: the window never under-counts before the real usage comes back)
//   output  max_tokens (Anthropic, OpenAI) or max_completion_tokens (OpenAI); when the body
//           names neither, DEFAULT_OUTPUT
//
// The estimate is replaced by the answer's real usage when it arrives (UsageMeter). A body
// that is not a JSON object still gets an estimate (from its size), with `json` false and no
// model: the provider, not the proxy, will refuse it.

#include <cstdint>
#include <string>
#include <string_view>

namespace tollgate {

struct RequestEstimate
{
    static constexpr std::int64_t DEFAULT_OUTPUT = 4096;
    static constexpr std::size_t MAX_MODEL = 128;

    bool json = false; // the body is a JSON object
    std::string model; // empty: none named (or not a printable string of at most MAX_MODEL)
    bool stream = false;
    std::int64_t inputTokens = 0;
    std::int64_t maxOutputTokens = 0;
    [[nodiscard]] std::int64_t tokens() const { return inputTokens + maxOutputTokens; }

    [[nodiscard]] static RequestEstimate of(std::string_view body);
};

} // namespace tollgate
