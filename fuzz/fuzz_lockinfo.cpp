// fuzz_lockinfo: the lock-file parser (LockInfo::parse) and the tag sanitizer.
//
// Invariants checked (abort on violation):
// - sanitizeTag() output is valid UTF-8, holds no control character (C0, DEL, C1), has at
//   most MAX_TAG_CHARS characters and is a fixed point (sanitizing it again changes nothing);
// - a parse error is ErrorKind::Corrupt with a message and no path;
// - a parsed lock has 1 ≤ pid ≤ 2^31−1 and timestamp ≥ 0; serialize() gives 2 or 3 '\n'
//   lines of at most MAX_FILE_BYTES that parse again to the same pid and timestamp and to
//   the sanitized, trimmed tag; serializing that again is a fixed point.

#include "base/textsanitizer.h"
#include "fuzzcheck.h"
#include "lock/lockinfo.h"

#include <algorithm>

using tollgate::LockInfo;
using tollgate::TextSanitizer;

namespace {

std::string_view trimmed(std::string_view s)
{
    constexpr std::string_view ws = " \t\r\n\v\f";
    const auto b = s.find_first_not_of(ws);
    if (b == std::string_view::npos)
        return {};
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Checks the sanitizer's contract; returns the number of characters of `clean`.
std::size_t checkSanitized(std::string_view clean)
{
    FUZZ_CHECK(TextSanitizer::invalidUtf8Offset(clean) == std::string_view::npos);
    std::size_t chars = 0;
    for (std::size_t i = 0; i < clean.size(); ++i) {
        const auto c = static_cast<unsigned char>(clean[i]);
        FUZZ_CHECK(c >= 0x20 && c != 0x7F);
        // C1 controls U+0080..U+009F are encoded as C2 80..C2 9F.
        if (c == 0xC2 && i + 1 < clean.size()) {
            const auto n = static_cast<unsigned char>(clean[i + 1]);
            FUZZ_CHECK(n < 0x80 || n > 0x9F);
        }
        if ((c & 0xC0) != 0x80)
            ++chars;
    }
    FUZZ_CHECK(chars <= LockInfo::MAX_TAG_CHARS);
    return chars;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view in(reinterpret_cast<const char*>(data), size);

    // The sanitizer on arbitrary bytes (tags come from the command line).
    const std::string clean = LockInfo::sanitizeTag(in);
    checkSanitized(clean);
    FUZZ_CHECK(LockInfo::sanitizeTag(clean) == clean);
    if (!in.empty())
        FUZZ_CHECK(!clean.empty());

    auto parsed = LockInfo::parse(in);
    if (!parsed) {
        FUZZ_CHECK(parsed.error().kind == tollgate::ErrorKind::Corrupt);
        FUZZ_CHECK(!parsed.error().message.empty());
        FUZZ_CHECK(parsed.error().path.empty());
        return 0;
    }
    const LockInfo& info = *parsed;
    FUZZ_CHECK(info.pid >= 1 && info.pid <= INT32_MAX);
    FUZZ_CHECK(info.timestamp >= 0);
    FUZZ_CHECK(trimmed(info.tag) == info.tag); // values are trimmed

    const std::string bytes = info.serialize();
    FUZZ_CHECK(bytes.size() <= LockInfo::MAX_FILE_BYTES);
    FUZZ_CHECK(bytes.rfind("pid=", 0) == 0);
    FUZZ_CHECK(!bytes.empty() && bytes.back() == '\n');
    const auto lines = std::count(bytes.begin(), bytes.end(), '\n');
    FUZZ_CHECK(lines == (info.tag.empty() ? 2 : 3));
    FUZZ_CHECK(bytes.find('\r') == std::string::npos);

    auto again = LockInfo::parse(bytes);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->pid == info.pid);
    FUZZ_CHECK(again->timestamp == info.timestamp);
    FUZZ_CHECK(again->tag == trimmed(LockInfo::sanitizeTag(info.tag)));

    auto third = LockInfo::parse(again->serialize());
    FUZZ_CHECK(third.ok());
    FUZZ_CHECK(*third == *again);
    return 0;
}
