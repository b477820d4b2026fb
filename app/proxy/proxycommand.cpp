#include "proxy/proxycommand.h"

#include "cli/clioptions.h"
#include "cli/console.h"
#include "cli/exitcodes.h"
#include "proxy/proxyserver.h"

#include <csignal>
#include <cstdio>
#include <iostream>

namespace tollgate::cli {

namespace {

struct Options
{
    CliOptions::Common common;
    std::string provider;
    std::optional<std::string> upstream;
    std::optional<std::string> upstreamCa;
    std::optional<std::string> listen;
    std::optional<std::string> caller;
    std::optional<std::string> counting;
    std::optional<double> queueTimeout;
    std::optional<double> headerTimeout;
    std::optional<double> bodyTimeout;
    std::optional<std::string> tokenFile;
    std::optional<double> stallTimeout;
    std::optional<std::int64_t> maxBufferedMib;
} g_options;

std::atomic<bool> g_stop { false };

void onProxySignal(int)
{
    g_stop = true;
}

int runProxy()
{
    Console console("proxy", g_options.common.json, g_options.common.quiet);
    proxy::ProxyServer::Options o;
    o.provider = g_options.provider;
    o.home = g_options.common.home.value_or("");
    o.upstream = g_options.upstream.value_or("");
    o.listen = g_options.listen.value_or("127.0.0.1:8787");
    o.upstreamCa = g_options.upstreamCa.value_or("");
    if (g_options.caller) {
        o.defaultCaller = *g_options.caller;
        o.callerGiven = true;
    }
    if (g_options.counting) {
        auto rule = CountingRule::parse(*g_options.counting);
        if (!rule)
            return console.usage("--counting: " + rule.error().message);
        o.counting = *rule;
    }
    const double maxSeconds = std::chrono::duration<double>(proxy::ProxyServer::MAX_OPTION_TIME).count();
    // 0 is a real answer for the queue (do not wait), never for these: every request or exchange
    // would end at once.
    for (const auto& [name, value] : { std::pair { "--header-timeout", g_options.headerTimeout },
             std::pair { "--body-timeout", g_options.bodyTimeout },
             std::pair { "--stall-timeout", g_options.stallTimeout } }) {
        if (value && *value <= 0)
            return console.usage(
                std::string(name) + " must be more than 0 seconds: 0 would end every request at once");
    }
    if (g_options.queueTimeout)
        o.queueTimeout = std::chrono::milliseconds(
            static_cast<std::int64_t>(std::min(*g_options.queueTimeout, maxSeconds) * 1000));
    if (g_options.headerTimeout)
        o.headerTimeout = std::chrono::milliseconds(std::max<std::int64_t>(
            1, static_cast<std::int64_t>(std::min(*g_options.headerTimeout, maxSeconds) * 1000)));
    if (g_options.bodyTimeout)
        o.bodyTimeout = std::chrono::milliseconds(std::max<std::int64_t>(
            1, static_cast<std::int64_t>(std::min(*g_options.bodyTimeout, maxSeconds) * 1000)));
    if (g_options.stallTimeout)
        o.stallTimeout = std::chrono::milliseconds(std::max<std::int64_t>(
            1, static_cast<std::int64_t>(std::min(*g_options.stallTimeout, maxSeconds) * 1000)));
    o.tokenFile = g_options.tokenFile.value_or("");
    if (g_options.maxBufferedMib)
        o.maxBufferedBytes = static_cast<std::size_t>(*g_options.maxBufferedMib) << 20;
    if (o.upstream.empty())
        return console.usage("--upstream URL is required (e.g. https://api.anthropic.com)");
    auto server = proxy::ProxyServer::start(o);
    if (!server)
        return server.error().kind == ErrorKind::Usage ? console.usage(server.error().message)
                                                       : console.fail(server.error());
    struct sigaction sa
    {
    };
    sa.sa_handler = onProxySignal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::signal(SIGPIPE, SIG_IGN); // a client that hangs up mid-answer is an error on its write, not our death
    std::cout << "listening on " << (*server)->address() << " for " << Console::printable(o.provider)
              << " -> " << Console::printable(o.upstream) << std::endl;
    (*server)->serve(g_stop);
    return EXIT_OK;
}

} // namespace

void ProxyCommand::addTo(CLI::App& app, CommandTable& table)
{
    Options& o = g_options;
    CLI::App* sub = app.add_subcommand("proxy",
        "an HTTP proxy in front of a provider's API: every SDK pointed at it shares the quota (see README)");
    CliOptions::addCommon(sub, o.common);
    sub->add_option("PROVIDER", o.provider, "the provider whose quota the requests use")->required();
    CliOptions::addText(sub, "--upstream", o.upstream, "the provider's API, e.g. https://api.anthropic.com")
        ->type_name("URL");
    CliOptions::addText(sub, "--upstream-ca", o.upstreamCa,
        "a PEM file of CA certificates to trust for the upstream besides the system's (certificates are "
        "always verified)")
        ->type_name("FILE");
    CliOptions::addText(
        sub, "--listen", o.listen, "127.0.0.1:PORT (default 127.0.0.1:8787; port 0: any) or unix:PATH")
        ->type_name("ADDR");
    CliOptions::addText(sub, "--token-file", o.tokenFile,
        "a 0600 file with a shared token every request must carry (base URL http://HOST:PORT/t/TOKEN, or an "
        "X-Tollgate-Token header); needed to listen on an address other than loopback")
        ->type_name("FILE");
    CliOptions::addText(sub, "--caller", o.caller,
        "the caller's name for requests that name none (default: the process at the other end, else proxy)")
        ->type_name("NAME");
    CliOptions::addText(sub, "--counting", o.counting,
        "how the provider counts an answer's usage toward its limits: anthropic (cache reads left out of "
        "input), openai, gemini or plain (default: the provider's name when it is one of these, else plain)")
        ->type_name("RULE");
    CliOptions::addSeconds(sub, "--queue-timeout", o.queueTimeout,
        "how long a request may wait for room before the proxy answers 429 itself (default 60)");
    CliOptions::addSeconds(sub, "--header-timeout", o.headerTimeout,
        "how long a client may take to send a request's headers (default 10)");
    CliOptions::addSeconds(sub, "--body-timeout", o.bodyTimeout,
        "how long a client may take to send a body of up to 64 KiB, and to start a longer or chunked one, "
        "which must then keep coming at 256 KiB/s (default 60)");
    CliOptions::addSeconds(sub, "--stall-timeout", o.stallTimeout,
        "end an exchange in which no byte moved for this long (default 600)");
    CliOptions::addInteger(sub, "--max-buffered", o.maxBufferedMib, 1, 65536,
        "MiB of request bodies all connections may hold while they wait for admission (default 256); past "
        "it: 503")
        ->type_name("MIB");
    table.add(sub, runProxy);
}

} // namespace tollgate::cli
