#include "crc32.h"

#include <array>

namespace tollgate {

namespace {

constexpr std::array<std::uint32_t, 256> makeTable()
{
    std::array<std::uint32_t, 256> t {};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
    return t;
}

constexpr auto TABLE = makeTable();

} // namespace

std::uint32_t Crc32::compute(std::string_view data, std::uint32_t crc)
{
    crc = ~crc;
    for (unsigned char c : data)
        crc = TABLE[(crc ^ c) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

} // namespace tollgate
