#include "proxy/requestrules.h"

#include "base/textsanitizer.h"

#include <algorithm>
#include <vector>

namespace tollgate::proxy {

// Hop-by-hop headers (RFC 9110 §7.6.1) and ours: never forwarded.
bool RequestRules::hopByHop(const std::string& lowerName)
{
    static const char* const NAMES[] = { "connection", "keep-alive", "proxy-connection", "proxy-authenticate",
        "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length",
        "x-tollgate-caller", "x-tollgate-token", "expect" };
    for (const char* n : NAMES) {
        if (lowerName == n)
            return true;
    }
    return false;
}

// Why a request's framing or target cannot be forwarded as it is (nullopt: it can), as the
// answer to give before its connection is closed.
// - Transfer-Encoding (RFC 9112 §6.1, §6.3): Beast frames a body as chunked only when chunked
//   is the last coding, and reads any other as having no body — whose bytes would then be
//   parsed as the next request and forwarded unadmitted (request smuggling). So chunked must
//   be last and only once (else 400), and no other coding is taken (501: the proxy would
//   forward a body it cannot read, and decoding is not its job).
// - The target is joined to --upstream's base path: only origin-form (a path from "/") without
//   dot-segments (plain or percent-encoded, or with ";" parameters) and without encoded
//   slashes or backslashes stays under it; absolute-form and "*" are for other kinds of proxies.
std::optional<std::pair<unsigned, std::string>> RequestRules::unforwardable(
    const http::request<http::string_body>& request)
{
    std::vector<std::string> codings;
    bool named = false;
    for (const auto& field : request) {
        if (field.name() != http::field::transfer_encoding)
            continue;
        named = true;
        const std::string value
            = TextSanitizer::asciiLower(std::string_view(field.value().data(), field.value().size()));
        const std::string_view all(value);
        for (std::size_t at = 0; at <= all.size();) {
            const std::size_t comma = std::min(all.find(',', at), all.size());
            std::string_view coding = all.substr(at, comma - at);
            while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t'))
                coding.remove_prefix(1);
            while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t'))
                coding.remove_suffix(1);
            if (!coding.empty())
                codings.emplace_back(coding);
            at = comma + 1;
        }
    }
    if (named) {
        const auto chunked = std::count(codings.begin(), codings.end(), std::string("chunked"));
        if (codings.empty() || codings.back() != "chunked" || chunked != 1)
            return std::pair { 400u,
                std::string("the request's Transfer-Encoding must end in chunked, once: its body's length "
                            "cannot be told otherwise") };
        if (codings.size() > 1)
            return std::pair { 501u,
                "the request's Transfer-Encoding " + TextSanitizer::clean(codings.front(), 32)
                    + " is not supported (chunked alone is)" };
    }
    const std::string_view target(request.target().data(), request.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    bool dotted = false;
    for (std::size_t at = 1; !path.empty() && at <= path.size();) {
        const std::size_t slash = std::min(path.find('/', at), path.size());
        std::string segment = TextSanitizer::asciiLower(path.substr(at, slash - at));
        for (std::size_t p = segment.find("%2e"); p != std::string::npos; p = segment.find("%2e"))
            segment.replace(p, 3, ".");
        // Servers that decode an encoded slash or backslash before resolving dot-segments, or
        // read ";..." as a segment's parameters, would see one in "..%2f", "..\\" or "..;".
        const std::string_view bare = std::string_view(segment).substr(0, segment.find(';'));
        dotted = dotted || bare == "." || bare == ".." || segment.find("%2f") != std::string::npos
            || segment.find("%5c") != std::string::npos || segment.find('\\') != std::string::npos;
        at = slash + 1;
    }
    if (path.empty() || path.front() != '/' || dotted)
        return std::pair { 400u,
            std::string("the request target must be a path from / without . or .. segments (it is joined to "
                        "the upstream's base path)") };
    return std::nullopt;
}

void RequestRules::dropFragment(http::request<http::string_body>& request)
{
    const std::string_view target(request.target().data(), request.target().size());
    if (const std::size_t hash = target.find('#'); hash != std::string_view::npos)
        request.target(std::string(target.substr(0, hash)));
}

} // namespace tollgate::proxy
