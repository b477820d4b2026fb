#pragma once

// TextSanitizer: makes user-supplied text (lock tags, caller names) safe to store in our
// line-based files and to print on a terminal: control characters (C0, DEL, C1) become
// spaces, invalid UTF-8 bytes become U+FFFD, and the text is cut to a number of characters.

#include <cstddef>
#include <string>
#include <string_view>

namespace tollgate {

class TextSanitizer
{
public:
    [[nodiscard]] static std::string clean(std::string_view text, std::size_t maxChars);
    // Offset of the first byte that is not part of valid UTF-8, or npos.
    [[nodiscard]] static std::size_t invalidUtf8Offset(std::string_view text);
    // A-Z to a-z, every other byte as it is (header names, protocol words: ASCII by definition).
    [[nodiscard]] static std::string asciiLower(std::string_view text);
};

} // namespace tollgate
