#pragma once

// AnswerKind: what a provider's answer means for the shared quota (the rules, with their
// sources, are in docs/PROXY.md):
//
//   RateLimited  429 that is a rate limit: everyone backs off (system-wide), honouring the
//                answer's retry-after-ms / retry-after
//   SpendCap     429 that is a spending or credit cap, not a rate: retrying cannot help, so
//                the provider is paused with the provider's words as the reason. Recognised
//                by OpenAI's error code "insufficient_quota", or by an error message naming a
//                spend/usage/credit limit on a 429 without retry-after
//   Overloaded   529 (Anthropic "overloaded_error") and 503: the provider's capacity, not our
//                quota; recorded, no backoff
//   Ok           2xx; Other: anything else (passed through, nothing learned)

#include <optional>
#include <string>
#include <string_view>

namespace tollgate {

struct AnswerKind
{
    enum class Kind { Ok, RateLimited, SpendCap, Overloaded, Other };
    Kind kind = Kind::Other;
    std::string reason; // SpendCap: the provider's message (sanitised, bounded)

    // `body`: the answer's body, or its first bytes (error bodies are small).
    [[nodiscard]] static AnswerKind of(int status, bool hasRetryAfter, std::string_view body);
};

} // namespace tollgate
