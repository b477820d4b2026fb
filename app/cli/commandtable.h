#pragma once

// CommandTable: what main() needs to run a parsed command line. Each module adds its CLI11
// subcommands with the action to run once parsing succeeded; the words after the first "--"
// (the command line of `run` and `lock run`) are kept apart, never parsed as options.

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tollgate::cli {

class CommandTable
{
public:
    using Action = std::function<int()>;

    void add(const CLI::App* command, Action action) { m_actions[command] = std::move(action); }
    [[nodiscard]] const Action* find(const CLI::App* command) const
    {
        auto it = m_actions.find(command);
        return it == m_actions.end() ? nullptr : &it->second;
    }

    std::vector<std::string> trailing; // after "--"
    bool sawDoubleDash = false;

private:
    std::map<const CLI::App*, Action> m_actions;
};

} // namespace tollgate::cli
