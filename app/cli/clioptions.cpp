#include "clioptions.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace tollgate::cli {

void CliOptions::addJsonQuiet(CLI::App* app, bool& json, bool& quiet)
{
    app->add_flag("--json", json, "machine-readable output: one JSON document on stdout, errors included");
    app->add_flag("-q,--quiet", quiet, "no messages");
}

void CliOptions::addCommon(CLI::App* app, Common& into)
{
    app->add_option_function<std::string>(
           "--home", [&into](const std::string& v) { into.home = v; },
           "the Tollgate home (default: $TOLLGATE_HOME, $XDG_STATE_HOME/tollgate, ~/.local/state/tollgate)")
        ->type_name("DIR")
        ->check(CLI::Validator(
            [](std::string& v) {
                return v.empty() ? std::string("must not be empty (leave --home out for the default home)")
                                 : std::string();
            },
            ""));
    addJsonQuiet(app, into.json, into.quiet);
}

CLI::Option* CliOptions::addText(
    CLI::App* app, const std::string& name, std::optional<std::string>& into, const std::string& help)
{
    return app->add_option_function<std::string>(
        name, [&into](const std::string& v) { into = v; }, help);
}

CLI::Option* CliOptions::addInteger(CLI::App* app, const std::string& name, std::optional<std::int64_t>& into,
    std::int64_t min, std::int64_t max, const std::string& help)
{
    return app
        ->add_option_function<std::string>(
            name, [&into, min, max](const std::string& v) { into = parseInteger(v, min, max).value(); }, help)
        ->type_name("N")
        ->check(CLI::Validator(
            [min, max](std::string& v) {
                auto n = parseInteger(v, min, max);
                return n ? std::string() : n.error().message;
            },
            ""));
}

CLI::Option* CliOptions::addSeconds(
    CLI::App* app, const std::string& name, std::optional<double>& into, const std::string& help)
{
    return app
        ->add_option_function<std::string>(
            name, [&into](const std::string& v) { into = parseSeconds(v).value(); }, help)
        ->type_name("SECONDS")
        ->check(CLI::Validator(
            [](std::string& v) {
                auto n = parseSeconds(v);
                return n ? std::string() : n.error().message;
            },
            ""));
}

CLI::Option* CliOptions::addNumber(
    CLI::App* app, const std::string& name, std::optional<double>& into, const std::string& help)
{
    return app
        ->add_option_function<std::string>(
            name, [&into](const std::string& v) { into = parseNumber(v).value(); }, help)
        ->type_name("SECONDS")
        ->check(CLI::Validator(
            [](std::string& v) {
                auto n = parseNumber(v);
                return n ? std::string() : n.error().message;
            },
            ""));
}

Result<double> CliOptions::parseNumber(const std::string& text)
{
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || (ec != std::errc() && ec != std::errc::result_out_of_range)
        || end != text.data() + text.size())
        return Error::make(ErrorKind::Usage, "", "takes a number, not '" + text + "'");
    // Beyond double's range ("1e999", "1e-999") from_chars leaves v alone; strtod gives the
    // nearest (infinity or 0), which the range check that follows judges.
    if (ec == std::errc::result_out_of_range)
        return std::strtod(text.c_str(), nullptr);
    return v;
}

Result<double> CliOptions::parseSeconds(const std::string& text)
{
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 0)
        return Error::make(ErrorKind::Usage, "",
            "takes a number of seconds (fractions allowed, not negative), not '" + text + "'");
    return v;
}

Result<std::int64_t> CliOptions::parseInteger(const std::string& text, std::int64_t min, std::int64_t max)
{
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < min || v > max)
        return Error::make(ErrorKind::Usage, "",
            "takes a whole number from " + std::to_string(min) + " to " + std::to_string(max) + ", not '"
                + text + "'");
    return v;
}

} // namespace tollgate::cli
