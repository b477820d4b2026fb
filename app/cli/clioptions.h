#pragma once

// CliOptions: the option kinds the CLI's commands share, added to CLI11 subcommands with a
// validator whose one-line message names the option and the value given, and the number
// parsers behind them (seconds with fractions, bounded whole numbers).

#include "base/result.h"

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

namespace tollgate::cli {

class CliOptions
{
public:
    // How long a waiting command (lock, acquire, run) waits when --timeout is not given, and
    // the most any --timeout may ask (ten years; longer would overflow a deadline's clock).
    static constexpr double DEFAULT_TIMEOUT_SECONDS = 60.0;
    static constexpr double MAX_TIMEOUT_SECONDS = 10.0 * 365 * 24 * 3600;

    // What every shared-quota command takes: --home DIR, --json, -q.
    struct Common
    {
        std::optional<std::string> home;
        bool json = false;
        bool quiet = false;
    };
    static void addCommon(CLI::App* app, Common& into);
    static void addJsonQuiet(CLI::App* app, bool& json, bool& quiet);

    static CLI::Option* addText(
        CLI::App* app, const std::string& name, std::optional<std::string>& into, const std::string& help);
    static CLI::Option* addInteger(CLI::App* app, const std::string& name, std::optional<std::int64_t>& into,
        std::int64_t min, std::int64_t max, const std::string& help);
    static CLI::Option* addSeconds(
        CLI::App* app, const std::string& name, std::optional<double>& into, const std::string& help);

    // Any number ("1e18", "-1", "0.5"): for values whose range is checked later, with a
    // message naming the range (QuotaLimits::check), rather than by the parser.
    static CLI::Option* addNumber(
        CLI::App* app, const std::string& name, std::optional<double>& into, const std::string& help);

    [[nodiscard]] static Result<double> parseNumber(const std::string& text);
    [[nodiscard]] static Result<double> parseSeconds(const std::string& text);
    [[nodiscard]] static Result<std::int64_t> parseInteger(
        const std::string& text, std::int64_t min, std::int64_t max);
};

} // namespace tollgate::cli
