#pragma once

// RequestEstimate: what the proxy admits a request with, read from its JSON body before it is
// forwarded — the model (per-model limits), whether it streams, and the tokens it may use:
//
//   input   ceil(body bytes / 4): about four bytes of English per token for both providers'
//           tokenizers, and the body's JSON syntax and field names make it an over-estimate
//           (conservative: the window never under-counts before the real usage comes back)
//   output  max_tokens (Anthropic, OpenAI) or max_completion_tokens (OpenAI Chat Completions),
//           max_output_tokens (OpenAI Responses, POST /v1/responses) or
//           generationConfig.maxOutputTokens (Gemini); when the body names none, DEFAULT_OUTPUT;
//           a bound above MAX_OUTPUT (2^40, the largest count a limit takes) counts as
//           MAX_OUTPUT — the conservative side: such an estimate waits for room like any other,
//           it is never refused as too large (QuotaExchange::askFor), and never taken as the
//           default either. A bound of 0 or below (the provider refuses it) is the default.
//
// The estimate is replaced by the answer's real usage when it arrives (UsageMeter). A body
// that is not a JSON object still gets an estimate (from its size), with `json` false and no
// model: the provider, not the proxy, will refuse it. A body that names one of the members
// twice is refused by the proxy (`repeated`; see TopLevelFields).
//
// The members are read by TopLevelFields, the same way for a whole body (of) and for one whose
// admission comes before the rest of it has arrived (fromFields, with its Content-Length).

#include "provider/toplevelfields.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace tollgate {

struct RequestEstimate
{
    static constexpr std::int64_t DEFAULT_OUTPUT = 4096;
    static constexpr std::int64_t MAX_OUTPUT = 1LL << 40;
    static constexpr std::size_t MAX_MODEL = 128;

    bool json = false; // the body is a JSON object (or, from fields, one so far)
    std::string repeated; // a member named twice: refuse the request
    std::string model; // empty: none named (or not a printable string of at most MAX_MODEL)
    bool stream = false;
    std::int64_t inputTokens = 0;
    std::int64_t maxOutputTokens = 0;
    [[nodiscard]] std::int64_t tokens() const { return inputTokens + maxOutputTokens; }

    [[nodiscard]] static RequestEstimate of(std::string_view body);
    // A body that is not a JSON object (or is broken before its members), by its size alone.
    [[nodiscard]] static RequestEstimate ofSize(std::uint64_t bodyBytes);
    // From the members parsed so far of a body of `bodyBytes` bytes (all of it, or not yet).
    [[nodiscard]] static RequestEstimate fromFields(const TopLevelFields& fields, std::uint64_t bodyBytes);
};

} // namespace tollgate
