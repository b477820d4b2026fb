#include "retryafter.h"

#include <charconv>
#include <cmath>
#include <ctime>
#include <string>

namespace tollgate {

Result<std::int64_t> RetryAfter::parseMs(std::string_view value, std::int64_t nowUnixMs)
{
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
        value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
        value.remove_suffix(1);
    if (value.empty())
        return Error::make(ErrorKind::Usage, "", "empty Retry-After value");
    double seconds = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (ec == std::errc() && end == value.data() + value.size()) {
        if (!std::isfinite(seconds) || seconds < 0 || seconds > 366.0 * 24 * 3600)
            return Error::make(ErrorKind::Usage, "", "Retry-After seconds out of range: " + std::string(value));
        return static_cast<std::int64_t>(seconds * 1000.0 + 0.5);
    }
    const std::string text(value);
    for (const char* format : { "%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %d %H:%M:%S %Y" }) {
        std::tm tm {};
        const char* rest = ::strptime(text.c_str(), format, &tm);
        if (rest && *rest == '\0') {
            const std::int64_t at = static_cast<std::int64_t>(::timegm(&tm)) * 1000;
            return at > nowUnixMs ? at - nowUnixMs : 0;
        }
    }
    return Error::make(ErrorKind::Usage, "",
        "Retry-After must be seconds or an HTTP date like 'Wed, 21 Oct 2026 07:28:00 GMT', not '" + text + "'");
}

} // namespace tollgate
