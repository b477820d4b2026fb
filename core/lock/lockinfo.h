#pragma once

// LockInfo: the content of a sema/semats-compatible lock file.
//
// Written exactly as   pid=N\ntimestamp=S\n   plus   tag=T\n   only when a tag is given.
// Parsed like the peers: split on \n (accepting \r\n), trim, split on the first '=', skip
// blank lines and lines without '=', ignore unknown keys, last duplicate wins. pid and
// timestamp are required integers; empty, whitespace-only and binary content are errors.

#include "base/result.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tollgate {

struct LockInfo
{
    static constexpr std::size_t MAX_TAG_CHARS = 10000;
    // Largest lock file we read: a 10,000-character tag of 4-byte characters plus the rest.
    static constexpr std::size_t MAX_FILE_BYTES = 64 * 1024;

    std::int64_t pid = 0;
    std::int64_t timestamp = 0; // unix seconds at which the lock was won
    std::string tag; // empty = no tag line

    [[nodiscard]] std::string serialize() const;
    // The error message says what is wrong, without the path (the caller adds it).
    [[nodiscard]] static Result<LockInfo> parse(std::string_view content);
    [[nodiscard]] static std::string sanitizeTag(std::string_view tag);

    bool operator==(const LockInfo&) const = default;
};

} // namespace tollgate
