#pragma once

// Console: everything the CLI prints goes through here, for three reasons.
//   - Text that came from a user, a file or the environment (provider, caller, reason, tag,
//     path, error messages) may hold control bytes that drive a terminal (`\e[2J` clears it,
//     OSC sequences set its title): every line is passed through printable() on its way out,
//     so such bytes are shown escaped (`\x1b`), never raw.
//   - With --json, every command prints exactly one JSON document on stdout: its result, or
//     {"error", "code", "kind", "path"} when it failed; warnings ride along in "warnings".
//   - Exit codes are decided in one place (exitCodeFor).

#include "base/result.h"

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate {
class QuotaBackend;
}

namespace tollgate::cli {

class Console
{
public:
    // command: the words after "tollgate" ("limits set", "lock try-acquire"), for messages.
    Console(std::string command, bool json, bool quiet);

    // Control bytes (C0, DEL, C1) and bytes that are not UTF-8 become \xNN escapes.
    [[nodiscard]] static std::string printable(std::string_view text);
    // A JSON text with every non-ASCII character and DEL escaped: safe on a terminal.
    [[nodiscard]] static std::string dumpJson(const nlohmann::json& doc);
    [[nodiscard]] static int exitCodeFor(const Error& e);

    [[nodiscard]] bool json() const { return m_json; }
    [[nodiscard]] bool quiet() const { return m_quiet; }
    [[nodiscard]] const std::string& command() const { return m_command; }

    // A line of the human-readable result on stdout (not with --json or -q).
    void say(const std::string& line) const;
    // A line for people on stderr (not with -q): a refusal explained, a note.
    void tell(const std::string& line) const;
    // "tollgate: warning: ..." on stderr; with --json also in the document's "warnings".
    void warn(const std::string& message);
    // Takes the store's warnings (a committed deed whose history could not be written...).
    void collectWarnings(QuotaBackend* store);
    void setStore(QuotaBackend* store) { m_store = store; }

    // Prints the one JSON document of this command (with --json only).
    void emit(nlohmann::json doc);
    // Reports a failure (stderr, and the JSON error object) and returns its exit code.
    int fail(const Error& e);
    // The same with an explicit exit code (a refusal: 1, an interrupted wait: 130, ...).
    int fail(const Error& e, int exitCode);
    // "tollgate COMMAND: message" + the --help hint; exit 2.
    int usage(const std::string& message);

private:
    std::string m_command;
    bool m_json = false;
    bool m_quiet = false;
    bool m_emitted = false;
    QuotaBackend* m_store = nullptr; // not owned; its warnings are collected before printing
    std::vector<std::string> m_warnings;
};

} // namespace tollgate::cli
