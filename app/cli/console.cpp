#include "console.h"

#include "backend/quotabackend.h"
#include "base/textsanitizer.h"
#include "exitcodes.h"

#include <cstdio>
#include <iostream>

namespace tollgate::cli {

namespace {

void appendEscaped(std::string& out, unsigned char byte)
{
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(byte));
    out += buf;
}

// Length of the well-formed UTF-8 sequence at text[i], 0 when it is not one (the decoding
// itself is TextSanitizer's: a prefix it finds valid is one).
std::size_t validLength(std::string_view text, std::size_t i)
{
    const auto b0 = static_cast<unsigned char>(text[i]);
    const std::size_t len = b0 < 0x80 ? 1
        : (b0 & 0xE0) == 0xC0         ? 2
        : (b0 & 0xF0) == 0xE0         ? 3
        : (b0 & 0xF8) == 0xF0         ? 4
                                      : 0;
    if (len == 0 || i + len > text.size())
        return 0;
    return TextSanitizer::invalidUtf8Offset(text.substr(i, len)) == std::string_view::npos ? len : 0;
}

} // namespace

Console::Console(std::string command, bool json, bool quiet)
    : m_command(std::move(command))
    , m_json(json)
    , m_quiet(quiet)
{
}

namespace {

// U+200E/U+200F (marks), U+202A..U+202E (embeddings, overrides), U+2066..U+2069 (isolates),
// U+2028/U+2029 (line and paragraph separators): E2 80 8E/8F/A8..AE, E2 81 A6..A9.
bool reordersOrBreaks(std::string_view c)
{
    const auto b0 = static_cast<unsigned char>(c[0]);
    const auto b1 = static_cast<unsigned char>(c[1]);
    const auto b2 = static_cast<unsigned char>(c[2]);
    if (b0 != 0xE2)
        return false;
    if (b1 == 0x80)
        return b2 == 0x8E || b2 == 0x8F || (b2 >= 0xA8 && b2 <= 0xAE);
    return b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9;
}

} // namespace

std::string Console::printable(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    std::size_t i = 0;
    while (i < text.size()) {
        const auto b0 = static_cast<unsigned char>(text[i]);
        const std::size_t len = validLength(text, i);
        if (len == 0) {
            appendEscaped(out, b0);
            ++i;
            continue;
        }
        if (b0 < 0x20 || b0 == 0x7F) {
            appendEscaped(out, b0);
        } else if (len == 2 && b0 == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
            // U+0080..U+009F: C1 controls (U+009B is a one-byte CSI on some terminals)
            appendEscaped(out, b0);
            appendEscaped(out, static_cast<unsigned char>(text[i + 1]));
        } else if (len == 3 && reordersOrBreaks(text.substr(i, 3))) {
            // Bidirectional overrides and isolates make a line read differently from what it
            // holds (a name that shows "txt.exe" as "exe.txt"); line and paragraph separators
            // start a new line in some terminals. Shown by code point.
            const auto b1 = static_cast<unsigned char>(text[i + 1]);
            const auto b2 = static_cast<unsigned char>(text[i + 2]);
            const unsigned cp = ((b0 & 0x0Fu) << 12) | ((b1 & 0x3Fu) << 6) | (b2 & 0x3Fu);
            char buf[12];
            std::snprintf(buf, sizeof buf, "\\u%04X", cp);
            out += buf;
        } else {
            out.append(text.substr(i, len));
        }
        i += len;
    }
    return out;
}

std::string Console::dumpJson(const nlohmann::json& doc)
{
    // ensure_ascii escapes C0 and everything above 0x7F; DEL (only ever inside a string) too.
    std::string text = doc.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        if (c == '\x7f')
            out += "\\u007f";
        else
            out += c;
    }
    return out;
}

int Console::exitCodeFor(const Error& e)
{
    switch (e.kind) {
    case ErrorKind::Usage:
        return EXIT_USAGE;
    case ErrorKind::Busy:
        return EXIT_REFUSED;
    case ErrorKind::Timeout:
        // A file lock that was not granted (the store did not answer) is an I/O problem;
        // only a wait for the quota itself, which names no file, is a refusal.
        return e.path.empty() ? EXIT_REFUSED : EXIT_IO;
    default:
        return EXIT_IO;
    }
}

void Console::say(const std::string& line) const
{
    if (!m_json && !m_quiet)
        std::cout << printable(line) << '\n';
}

void Console::tell(const std::string& line) const
{
    if (!m_quiet)
        std::cerr << printable(line) << '\n';
}

void Console::warn(const std::string& message)
{
    std::cerr << "tollgate: warning: " << printable(message) << '\n';
    m_warnings.push_back(message);
}

void Console::collectWarnings(QuotaBackend* store)
{
    if (!store)
        return;
    for (const Error& w : store->takeWarnings())
        warn(w.describe());
}

void Console::emit(nlohmann::json doc)
{
    collectWarnings(m_store);
    if (!m_json || m_emitted)
        return;
    if (!m_warnings.empty() && doc.is_object())
        doc["warnings"] = m_warnings;
    std::cout << dumpJson(doc) << '\n' << std::flush;
    m_emitted = true;
}

int Console::fail(const Error& e)
{
    return fail(e, exitCodeFor(e));
}

int Console::fail(const Error& e, int exitCode)
{
    std::string message = e.describe();
    if (e.kind == ErrorKind::Usage && exitCode == EXIT_USAGE)
        return usage(message);
    std::string kind = errorKindName(e.kind);
    if (e.kind == ErrorKind::Timeout && !e.path.empty()) {
        // A Redis home is a server that did not answer, not a file that stayed locked.
        const bool server = e.path.rfind("redis://", 0) == 0;
        message = "the store did not answer: " + e.path
            + (server ? " (the server is stopped, overloaded or unreachable): "
                      : " stayed locked (a process may be stopped inside a transaction, or the disk hangs): ")
            + e.message;
        kind = "store-timeout";
    }
    if (!m_quiet)
        std::cerr << "tollgate: " << printable(message) << '\n';
    nlohmann::json j;
    j["error"] = message;
    j["code"] = exitCode;
    j["kind"] = kind;
    j["path"] = e.path;
    emit(j);
    return exitCode;
}

int Console::usage(const std::string& message)
{
    std::cerr << "tollgate " << printable(m_command) << ": " << printable(message) << "\nRun 'tollgate "
              << printable(m_command) << " --help' for more.\n";
    nlohmann::json j;
    j["error"] = message;
    j["code"] = EXIT_USAGE;
    j["kind"] = "usage";
    j["path"] = "";
    emit(j);
    return EXIT_USAGE;
}

} // namespace tollgate::cli
