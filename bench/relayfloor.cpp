// tollgate-relayfloor: the least an HTTP proxy in front of the mock provider can do, as a
// floor for what `tollgate proxy` adds (bench/proxylatency.sh measures it when it is built). One thread, one
// io_context, Beast's asynchronous reads and writes: requests are read whole and forwarded on
// one upstream connection per client connection; answers are relayed piece by piece as they
// arrive. No admission, no store, no deadlines, no limits: never a thing to run in front of
// a real provider — it measures what the machine charges for a second hop, nothing else.
//
//   tollgate-relayfloor UPSTREAM_PORT      (prints "listening on http://127.0.0.1:PORT")
#include <boost/asio.hpp>
#include <boost/asio/experimental/as_tuple.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <string>

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using net::awaitable;
using net::use_awaitable;

namespace {

awaitable<void> session(tcp::socket client, tcp::endpoint upstreamAt)
{
    beast::flat_buffer clientBuffer;
    beast::flat_buffer upstreamBuffer;
    tcp::socket upstream(client.get_executor());
    co_await upstream.async_connect(upstreamAt, use_awaitable);
    upstream.set_option(tcp::no_delay(true));
    for (;;) {
        http::request<http::string_body> request;
        co_await http::async_read(client, clientBuffer, request, use_awaitable);
        const bool keepAlive = request.keep_alive();
        request.keep_alive(true);
        co_await http::async_write(upstream, request, use_awaitable);
        http::response_parser<http::buffer_body> parser;
        parser.body_limit(boost::none);
        co_await http::async_read_header(upstream, upstreamBuffer, parser, use_awaitable);
        auto& response = parser.get();
        response.keep_alive(keepAlive);
        http::serializer<false, http::buffer_body> serializer { response };
        char chunk[16384];
        do {
            if (!parser.is_done()) {
                response.body().data = chunk;
                response.body().size = sizeof chunk;
                auto [ec, n] = co_await http::async_read_some(
                    upstream, upstreamBuffer, parser, net::experimental::as_tuple(use_awaitable));
                if (ec && ec != http::error::need_buffer)
                    co_return;
                response.body().size = sizeof chunk - response.body().size;
                response.body().data = response.body().size > 0 ? chunk : nullptr;
                response.body().more = !parser.is_done();
                if (response.body().size == 0 && !parser.is_done())
                    continue;
            } else {
                response.body().data = nullptr;
                response.body().size = 0;
                response.body().more = false;
            }
            auto [ec, n]
                = co_await http::async_write(client, serializer, net::experimental::as_tuple(use_awaitable));
            if (ec && ec != http::error::need_buffer)
                co_return;
        } while (!parser.is_done() || !serializer.is_done());
        if (!keepAlive)
            co_return;
    }
}

awaitable<void> listen(tcp::acceptor& acceptor, tcp::endpoint upstreamAt)
{
    for (;;) {
        tcp::socket s = co_await acceptor.async_accept(use_awaitable);
        s.set_option(tcp::no_delay(true));
        net::co_spawn(acceptor.get_executor(), session(std::move(s), upstreamAt), net::detached);
    }
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: tollgate-relayfloor UPSTREAM_PORT\n");
        return 2;
    }
    net::io_context io(1);
    tcp::acceptor acceptor(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    const tcp::endpoint upstreamAt(
        net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(std::stoi(argv[1])));
    std::printf("listening on http://127.0.0.1:%u\n", acceptor.local_endpoint().port());
    std::fflush(stdout);
    net::co_spawn(io, listen(acceptor, upstreamAt), net::detached);
    io.run();
}
