#include "lock/lockinfo.h"

#include "base/textsanitizer.h"

#include <charconv>
#include <optional>

namespace tollgate {

namespace {

std::string_view trimSpace(std::string_view s)
{
    constexpr std::string_view ws = " \t\r\n\v\f";
    const auto b = s.find_first_not_of(ws);
    if (b == std::string_view::npos)
        return {};
    const auto e = s.find_last_not_of(ws);
    return s.substr(b, e - b + 1);
}

std::optional<std::int64_t> parseInteger(std::string_view s, std::int64_t min, std::int64_t max)
{
    if (s.empty())
        return std::nullopt;
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < min || v > max)
        return std::nullopt;
    return v;
}

std::string quotedField(std::string_view s)
{
    return "'" + TextSanitizer::clean(s, 40) + "'";
}

Error parseError(std::string message)
{
    return Error::make(ErrorKind::Corrupt, "", std::move(message));
}

} // namespace

std::string LockInfo::serialize() const
{
    std::string out = "pid=" + std::to_string(pid) + "\ntimestamp=" + std::to_string(timestamp) + "\n";
    if (!tag.empty())
        out += "tag=" + sanitizeTag(tag) + "\n";
    return out;
}

std::string LockInfo::sanitizeTag(std::string_view tag)
{
    return TextSanitizer::clean(tag, MAX_TAG_CHARS);
}

Result<LockInfo> LockInfo::parse(std::string_view content)
{
    if (trimSpace(content).empty())
        return parseError(content.empty() ? "empty lock file" : "lock file holds only whitespace");
    for (std::size_t i = 0; i < content.size(); ++i) {
        const auto c = static_cast<unsigned char>(content[i]);
        if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7F) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02X", c);
            return parseError(
                "binary content (byte " + std::string(hex) + " at offset " + std::to_string(i) + ")");
        }
    }
    if (auto bad = TextSanitizer::invalidUtf8Offset(content); bad != std::string_view::npos)
        return parseError("binary content (invalid UTF-8 at offset " + std::to_string(bad) + ")");

    std::optional<std::string_view> pidText;
    std::optional<std::string_view> tsText;
    std::optional<std::string_view> tagText;
    std::size_t start = 0;
    while (start < content.size()) {
        auto end = content.find('\n', start);
        if (end == std::string_view::npos)
            end = content.size();
        const auto line = content.substr(start, end - start);
        start = end + 1;
        const auto eq = line.find('=');
        if (trimSpace(line).empty() || eq == std::string_view::npos)
            continue;
        const auto key = trimSpace(line.substr(0, eq));
        const auto value = trimSpace(line.substr(eq + 1));
        if (key == "pid")
            pidText = value;
        else if (key == "timestamp")
            tsText = value;
        else if (key == "tag")
            tagText = value;
    }
    if (!pidText)
        return parseError("no pid= line");
    if (!tsText)
        return parseError("no timestamp= line");
    LockInfo info;
    const auto pid = parseInteger(*pidText, 1, INT32_MAX);
    if (!pid)
        return parseError("pid is not a process id: " + quotedField(*pidText));
    const auto ts = parseInteger(*tsText, 0, INT64_MAX);
    if (!ts)
        return parseError("timestamp is not a non-negative integer: " + quotedField(*tsText));
    info.pid = *pid;
    info.timestamp = *ts;
    if (tagText) { // another tool may not have sanitised it (a CR or a C1 CSI would reach terminals)
        const std::string clean = sanitizeTag(*tagText);
        info.tag = std::string(trimSpace(clean)); // a control at either end became a space
    }
    return info;
}

} // namespace tollgate
