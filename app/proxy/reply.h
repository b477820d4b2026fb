#pragma once

// Reply: an answer of the proxy's own (a refusal, a 502 for an upstream that cannot be reached,
// a 408 for a request that did not arrive in time...), in the provider's error format: both
// SDKs read {"type":"error","error":{"type","message"}} / {"error":{"message","type"}} (one
// body is both: Anthropic's error types, a 503 the proxy's own overload "overloaded_error"),
// and their retry logic reads Retry-After. `linger`: the client may still be sending, so its bytes
// are read and dropped for a moment before the close (lingerClose), or closing on unread bytes
// would reset the connection before it read this.

#include "exchange/quotaexchange.h"
#include "proxy/netcommon.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tollgate::proxy {

struct Reply
{
    Reply(unsigned status, std::string message, bool keepAlive = false,
        std::optional<std::int64_t> retryAfterSeconds = std::nullopt, bool linger = false)
        : status(status)
        , message(std::move(message))
        , keepAlive(keepAlive)
        , retryAfterSeconds(retryAfterSeconds)
        , linger(linger)
    {
    }
    unsigned status = 0;
    std::string message;
    bool keepAlive = false;
    std::optional<std::int64_t> retryAfterSeconds;
    bool linger = false;

    // The HTTP answer to write.
    [[nodiscard]] http::response<http::string_body> response() const;
    // What a read that failed gets, when the client can still hear it (nothing: then a close).
    // `bufferedLimit`: --max-buffered, named in its refusals.
    [[nodiscard]] static std::optional<Reply> forFailedRead(
        const beast::error_code& ec, std::size_t bufferedLimit);
    // The answer to a request the quota did not admit (QuotaExchange::conclude).
    [[nodiscard]] static Reply refusal(const QuotaExchange::Refusal& refusal, bool keepAlive)
    {
        return Reply { refusal.status, refusal.message, keepAlive, refusal.retryAfterSeconds };
    }
};

} // namespace tollgate::proxy
