#include "argparser.h"

#include <charconv>
#include <cmath>

namespace tollgate::cli {

const ArgParser::Option* ArgParser::find(const std::string& name) const
{
    for (const auto& o : m_options) {
        if (o.name == name)
            return &o;
    }
    return nullptr;
}

const ArgParser::Option* ArgParser::findShort(char c) const
{
    for (const auto& o : m_options) {
        if (o.shortName == c)
            return &o;
    }
    return nullptr;
}

std::optional<std::string> ArgParser::value(const std::string& name) const
{
    auto it = m_values.find(name);
    if (it == m_values.end())
        return std::nullopt;
    return it->second;
}

Result<void> ArgParser::parse(const std::vector<std::string>& args)
{
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") {
            m_sawDoubleDash = true;
            m_trailing.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
            return {};
        }
        if (a.size() > 2 && a.rfind("--", 0) == 0) {
            std::string name = a.substr(2);
            std::optional<std::string> inlineValue;
            if (auto eq = name.find('='); eq != std::string::npos) {
                inlineValue = name.substr(eq + 1);
                name.resize(eq);
            }
            const Option* o = find(name);
            if (!o)
                return Error::make(ErrorKind::Usage, "", "unknown option --" + name);
            if (!o->takesValue) {
                if (inlineValue)
                    return Error::make(ErrorKind::Usage, "", "option --" + name + " takes no value");
                m_values[name] = "";
                continue;
            }
            if (inlineValue) {
                m_values[name] = *inlineValue;
            } else {
                if (i + 1 >= args.size())
                    return Error::make(ErrorKind::Usage, "", "option --" + name + " needs a value");
                m_values[name] = args[++i];
            }
            continue;
        }
        if (a.size() == 2 && a[0] == '-' && a[1] != '-') {
            const Option* o = findShort(a[1]);
            if (!o)
                return Error::make(ErrorKind::Usage, "", "unknown option " + a);
            if (o->takesValue) {
                if (i + 1 >= args.size())
                    return Error::make(ErrorKind::Usage, "", "option " + a + " needs a value");
                m_values[o->name] = args[++i];
            } else {
                m_values[o->name] = "";
            }
            continue;
        }
        m_positional.push_back(a);
    }
    return {};
}

Result<double> ArgParser::parseSeconds(const std::string& option, const std::string& text)
{
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 0)
        return Error::make(ErrorKind::Usage, "",
            "--" + option + " takes a number of seconds (fractions allowed, not negative), not '" + text + "'");
    return v;
}

Result<std::int64_t> ArgParser::parseInteger(
    const std::string& option, const std::string& text, std::int64_t min, std::int64_t max)
{
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < min || v > max)
        return Error::make(ErrorKind::Usage, "",
            "--" + option + " takes a whole number from " + std::to_string(min) + " to " + std::to_string(max)
                + ", not '" + text + "'");
    return v;
}

} // namespace tollgate::cli
