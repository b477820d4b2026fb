#pragma once

// The names every transport file of the proxy uses for Boost.Asio and Boost.Beast, and
// into(), the completion token that turns an operation's error into a code instead of an
// exception (every awaited operation here uses it: no exception on a socket error).

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

namespace tollgate::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using local = net::local::stream_protocol;
using Steady = std::chrono::steady_clock;

using Redirect = net::redirect_error_t<net::use_awaitable_t<>>;
inline Redirect into(beast::error_code& ec)
{
    return net::redirect_error(net::use_awaitable, ec);
}

} // namespace tollgate::proxy
