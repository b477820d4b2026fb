#include "proxy/reply.h"

#include "proxy/proxyserver.h"

#include <nlohmann/json.hpp>

namespace tollgate::proxy {

http::response<http::string_body> Reply::response() const
{
    const Reply& r = *this;
    const char* type = r.status == 429       ? "rate_limit_error"
        : r.status == 401                    ? "authentication_error"
        : r.status == 503 || r.status == 529 ? "overloaded_error"
        : r.status >= 500                    ? "api_error"
                                             : "invalid_request_error";
    nlohmann::json body { { "type", "error" },
        { "error", { { "type", type }, { "message", "tollgate proxy: " + r.message } } } };
    http::response<http::string_body> res { static_cast<http::status>(r.status), 11 };
    res.set(http::field::content_type, "application/json");
    res.set(http::field::server, "tollgate-proxy");
    if (r.retryAfterSeconds)
        res.set(http::field::retry_after, std::to_string(*r.retryAfterSeconds));
    res.keep_alive(r.keepAlive);
    res.body() = body.dump();
    res.prepare_payload();
    return res;
}

std::optional<Reply> Reply::forFailedRead(const beast::error_code& ec, std::size_t bufferedLimit)
{
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset)
        return std::nullopt;
    if (ec == http::error::header_limit)
        return Reply { 431,
            "request headers larger than " + std::to_string(ProxyServer::MAX_HEADER_BYTES / 1024) + " KiB" };
    // Refusals of a body the client is still sending: then the rest is read and dropped for
    // a moment (linger).
    if (ec == http::error::body_limit)
        return Reply { 413,
            "request body larger than " + std::to_string(ProxyServer::MAX_STREAMED_BODY_BYTES >> 20)
                + " MiB, or larger than " + std::to_string(ProxyServer::MAX_BODY_BYTES >> 20)
                + " MiB and held whole (chunked, or its model and output bound come late)",
            false, std::nullopt, true };
    if (ec == net::error::message_size)
        return Reply { 413,
            "request body larger than all the proxy may hold (--max-buffered "
                + std::to_string(bufferedLimit >> 20) + " MiB)",
            false, std::nullopt, true };
    if (ec == net::error::no_buffer_space)
        return Reply { 503,
            "the proxy already holds " + std::to_string(bufferedLimit >> 20)
                + " MiB of request bodies (--max-buffered); try again shortly",
            false, 1, true };
    if (ec == beast::error::timeout || ec == net::error::would_block || ec == net::error::try_again)
        return Reply { 408, "the request did not arrive in time" };
    if (ec.category() == beast::error_code(http::error::end_of_stream).category())
        return Reply { 400, "malformed HTTP request (" + ec.message() + ")" };
    return std::nullopt;
}

} // namespace tollgate::proxy
