#pragma once

// StateFile: the hot state on disk, double-buffered so that a writer killed at any instant
// (SIGKILL mid-pwrite) never leaves an unreadable state.
//
// The file holds two slots, at offset 0 and at SLOT_BYTES. Each slot is a 24-byte header
// (magic "TGSL", payload length, sequence number, CRC-32 of length+sequence+payload, reserved)
// followed by the QuotaState payload. A write goes to the slot the newest sequence is *not*
// in, so the previous state stays intact until the new one is complete; a reader takes the
// valid slot with the highest sequence. The file is rewritten in place, never replaced, and
// only under the home's state.lock (see FileQuotaStore).

#include "quota/quotastate.h"
#include "system/fd.h"

#include <optional>

namespace tollgate {

class StateFile
{
public:
    static constexpr off_t SLOT_BYTES = 1 << 20;
    static constexpr std::size_t HEADER_BYTES = 24;
    static constexpr std::size_t MAX_PAYLOAD = SLOT_BYTES - HEADER_BYTES;

    explicit StateFile(Fd fd)
        : m_fd(std::move(fd))
    {
    }

    // nullopt: the file is empty (new). ErrorKind::Corrupt: non-empty, yet no slot is valid.
    [[nodiscard]] Result<std::optional<QuotaState>> read();
    [[nodiscard]] Result<void> write(const QuotaState& state);

    [[nodiscard]] const Fd& fd() const { return m_fd; }
    // Decodes a whole state file image (both slots), as read() does; for tools and fuzzing.
    [[nodiscard]] static Result<std::optional<QuotaState>> decodeImage(std::string_view image);

private:
    Fd m_fd;
    std::uint64_t m_seq = 0; // sequence of the slot last read or written
};

} // namespace tollgate
