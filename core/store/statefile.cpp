#include "store/statefile.h"

#include "base/crc32.h"

#include <algorithm>
#include <cstring>

namespace tollgate {

namespace {

constexpr std::uint32_t SLOT_MAGIC = 0x4C534754; // "TGSL" little-endian
constexpr std::size_t FIRST_READ = 1024; // most states fit: one pread per slot

struct SlotHeader
{
    std::uint32_t magic = 0;
    std::uint32_t length = 0;
    std::uint64_t seq = 0;
    std::uint32_t crc = 0;
    std::uint32_t reserved = 0;
};

SlotHeader parseHeader(std::string_view bytes)
{
    SlotHeader h;
    if (bytes.size() >= StateFile::HEADER_BYTES) {
        std::memcpy(&h.magic, bytes.data(), 4);
        std::memcpy(&h.length, bytes.data() + 4, 4);
        std::memcpy(&h.seq, bytes.data() + 8, 8);
        std::memcpy(&h.crc, bytes.data() + 16, 4);
    }
    return h;
}

std::uint32_t slotCrc(std::string_view header, std::string_view payload)
{
    // CRC over length + sequence (header bytes 4..15), then the payload.
    return Crc32::compute(payload, Crc32::compute(header.substr(4, 12)));
}

struct Candidate
{
    SlotHeader header;
    std::string head; // header + first bytes of payload
    off_t offset = 0;
};

template <typename FetchRest>
Result<std::optional<QuotaState>> pick(
    std::vector<Candidate> slots, bool fileEmpty, FetchRest fetchRest, std::uint64_t& seqOut)
{
    std::sort(slots.begin(), slots.end(),
        [](const Candidate& a, const Candidate& b) { return a.header.seq > b.header.seq; });
    std::string lastProblem = "no slot holds a state";
    for (auto& c : slots) {
        if (c.header.magic != SLOT_MAGIC)
            continue;
        if (c.header.length > StateFile::MAX_PAYLOAD) {
            lastProblem = "slot length out of range";
            continue;
        }
        std::string payload;
        const std::size_t have = c.head.size() - StateFile::HEADER_BYTES;
        if (c.header.length <= have) {
            payload = c.head.substr(StateFile::HEADER_BYTES, c.header.length);
        } else {
            auto rest = fetchRest(c.offset + static_cast<off_t>(StateFile::HEADER_BYTES), c.header.length);
            if (!rest)
                return rest.error();
            payload = std::move(*rest);
            if (payload.size() != c.header.length) {
                lastProblem = "slot truncated";
                continue;
            }
        }
        if (slotCrc(c.head, payload) != c.header.crc) {
            lastProblem = "slot checksum mismatch";
            continue;
        }
        auto decoded = QuotaState::decode(payload);
        if (!decoded && decoded.error().kind == ErrorKind::Unsupported)
            return decoded.error(); // intact, just not ours to read: never set it aside
        if (!decoded) {
            lastProblem = decoded.error().message;
            continue;
        }
        seqOut = c.header.seq;
        return std::optional<QuotaState>(std::move(decoded).value());
    }
    if (fileEmpty)
        return std::optional<QuotaState>();
    return Error::make(ErrorKind::Corrupt, "", "no valid state in either slot (" + lastProblem + ")");
}

} // namespace

Result<std::optional<QuotaState>> StateFile::read()
{
    std::vector<Candidate> slots(2);
    bool empty = true;
    for (int i = 0; i < 2; ++i) {
        slots[i].offset = i * SLOT_BYTES;
        slots[i].head.resize(FIRST_READ);
        auto n = m_fd.preadSome(slots[i].head.data(), FIRST_READ, slots[i].offset);
        if (!n)
            return n.error();
        slots[i].head.resize(*n);
        empty = empty && *n == 0;
        slots[i].header = parseHeader(slots[i].head);
        if (slots[i].head.size() < HEADER_BYTES)
            slots[i].header.magic = 0;
    }
    auto fetch = [this](off_t offset, std::size_t len) -> Result<std::string> {
        std::string out(len, '\0');
        std::size_t got = 0;
        while (got < len) {
            auto n = m_fd.preadSome(out.data() + got, len - got, offset + static_cast<off_t>(got));
            if (!n)
                return n.error();
            if (*n == 0)
                break;
            got += *n;
        }
        out.resize(got);
        return out;
    };
    auto r = pick(std::move(slots), empty, fetch, m_seq);
    if (!r && (r.error().kind == ErrorKind::Corrupt || r.error().kind == ErrorKind::Unsupported)) {
        auto e = r.error();
        e.path = m_fd.path();
        return e;
    }
    return r;
}

Result<std::optional<QuotaState>> StateFile::decodeImage(std::string_view image)
{
    std::vector<Candidate> slots(2);
    for (int i = 0; i < 2; ++i) {
        slots[i].offset = i * SLOT_BYTES;
        const auto at = static_cast<std::size_t>(slots[i].offset);
        slots[i].head = at < image.size() ? std::string(image.substr(at, FIRST_READ)) : std::string();
        slots[i].header = parseHeader(slots[i].head);
        if (slots[i].head.size() < HEADER_BYTES)
            slots[i].header.magic = 0;
    }
    auto fetch = [image](off_t offset, std::size_t len) -> Result<std::string> {
        const auto at = static_cast<std::size_t>(offset);
        return at < image.size() ? std::string(image.substr(at, len)) : std::string();
    };
    std::uint64_t seq = 0;
    return pick(std::move(slots), image.empty(), fetch, seq);
}

Result<void> StateFile::write(const QuotaState& state)
{
    const std::string payload = state.encode();
    if (payload.size() > MAX_PAYLOAD)
        return Error::make(
            ErrorKind::Busy, m_fd.path(), "the state has grown past its bound; refusing to write it");
    const std::uint64_t seq = m_seq + 1;
    std::string buf(HEADER_BYTES, '\0');
    const std::uint32_t magic = SLOT_MAGIC;
    const auto length = static_cast<std::uint32_t>(payload.size());
    std::memcpy(buf.data(), &magic, 4);
    std::memcpy(buf.data() + 4, &length, 4);
    std::memcpy(buf.data() + 8, &seq, 8);
    const std::uint32_t crc = slotCrc(buf, payload);
    std::memcpy(buf.data() + 16, &crc, 4);
    buf += payload;
    if (auto w = m_fd.pwriteAll(buf, static_cast<off_t>(seq % 2) * SLOT_BYTES); !w)
        return w.error();
    m_seq = seq;
    return {};
}

} // namespace tollgate
