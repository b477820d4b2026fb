#pragma once

// Crc32: the IEEE 802.3 CRC-32 (the one zlib's crc32() computes), so a client in any
// language can verify a state slot with its standard library.

#include <cstdint>
#include <string_view>

namespace tollgate {

class Crc32
{
public:
    [[nodiscard]] static std::uint32_t compute(std::string_view data, std::uint32_t crc = 0);
};

} // namespace tollgate
