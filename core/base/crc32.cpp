#include "base/crc32.h"

#include <array>

namespace tollgate {

namespace {

// Slicing-by-8 tables: eight bytes per step instead of one (the state is CRC'd on every
// read and write of a transaction).
using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr Tables makeTables()
{
    Tables t {};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[0][i] = c;
    }
    for (std::uint32_t i = 0; i < 256; ++i) {
        for (std::size_t k = 1; k < 8; ++k)
            t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
    }
    return t;
}

constexpr Tables TABLES = makeTables();

} // namespace

std::uint32_t Crc32::compute(std::string_view data, std::uint32_t crc)
{
    crc = ~crc;
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    std::size_t n = data.size();
    while (n >= 8) {
        const std::uint32_t lo = crc
            ^ (std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16
                | std::uint32_t(p[3]) << 24);
        crc = TABLES[7][lo & 0xFF] ^ TABLES[6][(lo >> 8) & 0xFF] ^ TABLES[5][(lo >> 16) & 0xFF]
            ^ TABLES[4][lo >> 24] ^ TABLES[3][p[4]] ^ TABLES[2][p[5]] ^ TABLES[1][p[6]] ^ TABLES[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = TABLES[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

} // namespace tollgate
