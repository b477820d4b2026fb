#pragma once

// QuotaContext: what the shared-quota command families (limits, admit, control, status,
// release) share, owned by main() and passed to each family's addTo and from there to every
// handler, instead of a global: the options CLI11 fills in, the words after "--" (run's
// command line), and the one way a command is added (with --home, --json and -q, its action
// in the CommandTable).

#include "commandtable.h"
#include "quotaoptions.h"

#include <functional>
#include <string>
#include <vector>

namespace tollgate::cli {

class QuotaContext
{
public:
    // What a command runs once parsing succeeded; returns the exit code.
    using Handler = std::function<int(const QuotaContext&)>;

    explicit QuotaContext(CommandTable& table);
    // The actions in the table refer to this object: it stays where it was made.
    QuotaContext(const QuotaContext&) = delete;
    QuotaContext& operator=(const QuotaContext&) = delete;

    // Bound by the families' options while they are added; read by the handlers.
    [[nodiscard]] QuotaOptions& options() { return m_options; }
    [[nodiscard]] const QuotaOptions& options() const { return m_options; }
    // The words after the first "--" (the command `run` runs).
    [[nodiscard]] const std::vector<std::string>& trailing() const { return m_table.trailing; }

    // Adds `name` under `parent` with the common options; `handler` runs with this context.
    CLI::App* addCommand(CLI::App* parent, const std::string& name, const std::string& help, Handler handler);
    // The optional PROVIDER positional.
    void addProvider(CLI::App* command, const std::string& help);
    // --caller NAME.
    void addCaller(CLI::App* command, const std::string& help);

private:
    CommandTable& m_table; // main()'s; outlives this object
    QuotaOptions m_options;
};

} // namespace tollgate::cli
