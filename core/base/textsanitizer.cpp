#include "base/textsanitizer.h"

#include <cstdint>

namespace tollgate {

namespace {

// Length of the valid UTF-8 sequence at text[i] and its code point; 0 when invalid.
std::size_t decodeOne(std::string_view text, std::size_t i, char32_t& cp)
{
    const auto b0 = static_cast<std::uint8_t>(text[i]);
    if (b0 < 0x80) {
        cp = b0;
        return 1;
    }
    std::size_t len;
    char32_t min;
    if ((b0 & 0xE0) == 0xC0) {
        len = 2;
        cp = b0 & 0x1F;
        min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3;
        cp = b0 & 0x0F;
        min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        len = 4;
        cp = b0 & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (i + len > text.size())
        return 0;
    for (std::size_t k = 1; k < len; ++k) {
        const auto b = static_cast<std::uint8_t>(text[i + k]);
        if ((b & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

} // namespace

std::string TextSanitizer::clean(std::string_view text, std::size_t maxChars)
{
    std::string out;
    out.reserve(std::min(text.size(), maxChars * 4));
    std::size_t chars = 0;
    std::size_t i = 0;
    while (i < text.size() && chars < maxChars) {
        char32_t cp = 0;
        const std::size_t len = decodeOne(text, i, cp);
        if (len == 0) {
            out += "\xEF\xBF\xBD"; // U+FFFD for a byte that is not UTF-8
            ++i;
        } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F)) {
            out += ' ';
            i += len;
        } else {
            out.append(text.substr(i, len));
            i += len;
        }
        ++chars;
    }
    return out;
}

std::size_t TextSanitizer::invalidUtf8Offset(std::string_view text)
{
    std::size_t i = 0;
    while (i < text.size()) {
        char32_t cp = 0;
        const std::size_t len = decodeOne(text, i, cp);
        if (len == 0)
            return i;
        i += len;
    }
    return std::string_view::npos;
}

std::string TextSanitizer::asciiLower(std::string_view text)
{
    std::string out(text);
    for (char& c : out) {
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
}

} // namespace tollgate
