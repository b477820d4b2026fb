#pragma once

// Shared by the fuzz targets and makecorpus: an invariant check that aborts (so libFuzzer
// records the input as a crash) and the state-slot builder of docs/PROTOCOL.md section 3.

#include "base/crc32.h"
#include "store/statefile.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#define FUZZ_CHECK(cond)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond);              \
            std::abort();                                                                                    \
        }                                                                                                    \
    } while (0)

namespace fuzz {

inline constexpr std::uint32_t SLOT_MAGIC = 0x4C534754; // "TGSL" little-endian

// A slot: 24-byte header (magic, length, sequence, CRC-32 of header bytes 4..15 then the
// payload, reserved) followed by the payload. badCrc flips the checksum (a torn write).
inline std::string makeSlot(std::string_view payload, std::uint64_t seq, bool badCrc = false)
{
    std::string out(tollgate::StateFile::HEADER_BYTES, '\0');
    const auto length = static_cast<std::uint32_t>(payload.size());
    std::memcpy(out.data(), &SLOT_MAGIC, 4);
    std::memcpy(out.data() + 4, &length, 4);
    std::memcpy(out.data() + 8, &seq, 8);
    std::uint32_t crc
        = tollgate::Crc32::compute(payload, tollgate::Crc32::compute(std::string_view(out).substr(4, 12)));
    if (badCrc)
        crc ^= 1;
    std::memcpy(out.data() + 16, &crc, 4);
    out.append(payload);
    return out;
}

} // namespace fuzz
