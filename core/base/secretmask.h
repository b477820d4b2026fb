#pragma once

// SecretMask: hides the password of a userinfo ("user:password@") in text that is about to be
// shown — an error, a --json "error" or "path", a status line, the dashboard's banner.
//
// Why one function: a home string is typed by people, and a password pasted into it must not
// reach stderr, a log or a screenshot whatever shape the string has. Only "redis://" used to be
// masked; "rediss://", "http://", "unix://", a leading space and a malformed "redis:/" were
// repeated as typed. Every place that shows a home string the user gave (HomeSpec's refusals
// above all) passes it through here.

#include <string>
#include <string_view>

namespace tollgate {

class SecretMask
{
public:
    static constexpr std::string_view HIDDEN = "***";

    // `text` with everything between the first ':' of its userinfo and the last '@' replaced by
    // "***": "rediss://u:pw@h" -> "rediss://u:***@h", " redis:/u:p@w@h" -> " redis:/u:***@h",
    // "u:pw@h:6379" -> "u:***@h:6379". The userinfo starts after a scheme and its slashes
    // ("x:/", "x://", "x:///"), or at the first non-blank byte; a password may hold anything
    // ('/', '?', '#', '@', '%'), so it ends at the last '@'. Text without a ':' before that
    // '@', or whose would-be user name holds a '/' (a path such as "/data/a:b@c", or
    // "http://host/a:b@c": no userinfo there), is returned as it is.
    [[nodiscard]] static std::string userinfo(std::string_view text);
    // True when userinfo() would hide something.
    [[nodiscard]] static bool holdsPassword(std::string_view text);
};

} // namespace tollgate
