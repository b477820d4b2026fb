#pragma once

// ArgParser: a small declarative parser for "--name value", "--name=value", short flags and
// a trailing "-- CMD ARGS..." part. Unknown options are usage errors, never ignored.

#include "result.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tollgate::cli {

class ArgParser {
public:
    struct Option {
        std::string name; // long name without "--"
        bool takesValue = false;
        char shortName = 0; // e.g. 'q' for -q
    };

    explicit ArgParser(std::vector<Option> options)
        : m_options(std::move(options))
    {
    }

    [[nodiscard]] Result<void> parse(const std::vector<std::string>& args);

    [[nodiscard]] bool has(const std::string& name) const { return m_values.count(name) != 0; }
    [[nodiscard]] std::optional<std::string> value(const std::string& name) const;
    [[nodiscard]] const std::vector<std::string>& positional() const { return m_positional; }
    [[nodiscard]] const std::vector<std::string>& trailing() const { return m_trailing; }
    [[nodiscard]] bool sawDoubleDash() const { return m_sawDoubleDash; }

    // Value parsers that name the option in their error.
    [[nodiscard]] static Result<double> parseSeconds(const std::string& option, const std::string& text);
    [[nodiscard]] static Result<std::int64_t> parseInteger(
        const std::string& option, const std::string& text, std::int64_t min, std::int64_t max);

private:
    const Option* find(const std::string& name) const;
    const Option* findShort(char c) const;

    std::vector<Option> m_options;
    std::map<std::string, std::string> m_values;
    std::vector<std::string> m_positional;
    std::vector<std::string> m_trailing;
    bool m_sawDoubleDash = false;
};

} // namespace tollgate::cli
