// fuzz_statefile: the state reader — StateFile::decodeImage (a whole state.bin image) and
// QuotaState::decode (one slot's payload).
//
// Input: the first byte selects how the image is built (its low two bits):
//   0  the whole input is the image (a real slot-0-only state.bin starts with 'T' = 0x54);
//   1  the rest is a payload, wrapped in a valid slot 0 (correct CRC); no slot 1;
//   2  two payloads in two valid slots (byte 1: where the rest is split; byte 2: which
//      slot has the higher sequence and whether one slot's CRC is broken);
//   3  the rest goes to QuotaState::decode only.
// QuotaState::decode always also gets the rest (everything after the first byte).
//
// Invariants checked (abort on violation):
// - a decoded state re-encodes to at most its input's size (plus the 24 bytes per slot and
//   waiter that format 1 lacked and the 24 per provider that formats 1 and 2 lacked: older
//   states are rewritten in the current format), that encoding decodes
//   again, and re-encoding is a fixed point (encode(decode(encode(s))) == encode(s));
// - decoded counts respect the documented bounds (providers ≤ 64, scopes ≤ 64, slots ≤ 256,
//   waiters ≤ 512, texts ≤ 256 bytes, windows ≥ 1 ms, 32 buckets cover the window);
// - a decoded window can be used: its request/token sums and bucket end times fit in an
//   int64, and usage()/whenFits() run without undefined behaviour;
// - through a valid slot, decodeImage agrees with QuotaState::decode of the payload;
// - errors are Corrupt or Unsupported (never something else), an empty image is "no state".

#include "fuzzcheck.h"
#include "quota/quotastate.h"
#include "store/statefile.h"

using tollgate::ErrorKind;
using tollgate::QuotaState;
using tollgate::StateFile;

namespace {

// The window's sums (usage) and bucket end times ((index + 1) × width + window, whenFits)
// must be representable: a decoded state must not make RollingWindow overflow.
bool windowArithmeticOk(const tollgate::RollingWindow& w)
{
    std::int64_t requests = 0, tokens = 0, next = 0, end = 0;
    for (const auto& b : w.buckets()) {
        if (b.index < 0)
            continue;
        if (__builtin_add_overflow(requests, b.requests, &requests)
            || __builtin_add_overflow(tokens, b.tokens, &tokens) || __builtin_add_overflow(b.index, 1, &next)
            || __builtin_mul_overflow(next, w.bucketMs(), &end)
            || __builtin_add_overflow(end, w.windowMs(), &end))
            return false;
    }
    return true;
}

void checkBounds(const QuotaState& s)
{
    FUZZ_CHECK(s.providers.size() <= QuotaState::MAX_PROVIDERS);
    FUZZ_CHECK(s.pauseReason.size() <= QuotaState::MAX_TEXT);
    for (const auto& p : s.providers) {
        FUZZ_CHECK(p.name.size() <= QuotaState::MAX_TEXT);
        FUZZ_CHECK(p.pauseReason.size() <= QuotaState::MAX_TEXT);
        FUZZ_CHECK(p.scopes.size() <= 64);
        FUZZ_CHECK(p.slots.size() <= QuotaState::MAX_SLOTS);
        FUZZ_CHECK(p.queue.size() <= QuotaState::MAX_WAITERS);
        for (const auto& sc : p.scopes) {
            FUZZ_CHECK(sc.model.size() <= QuotaState::MAX_TEXT);
            FUZZ_CHECK(sc.window.windowMs() >= 1);
            // The bucket width is ceil(window / 32): 32 buckets must cover the window.
            FUZZ_CHECK(sc.window.bucketMs() >= 1);
            FUZZ_CHECK(sc.window.bucketMs() >= sc.window.windowMs() / tollgate::RollingWindow::BUCKETS);
            for (const auto& b : sc.window.buckets())
                FUZZ_CHECK(b.index == -1 || (b.index >= 0 && b.requests >= 0 && b.tokens >= 0));
            FUZZ_CHECK(windowArithmeticOk(sc.window));
            // What the policy does with a loaded window must be defined (UBSan watches).
            for (const std::int64_t now : { std::int64_t(0), std::int64_t(1735420800000) }) {
                const auto u = sc.window.usage(now);
                FUZZ_CHECK(u.requests >= 0 && u.tokens >= 0);
                (void)sc.window.whenFits(now, 1, 1, 1, 1);
            }
        }
        for (const auto& sl : p.slots)
            FUZZ_CHECK(sl.caller.size() <= QuotaState::MAX_TEXT && sl.model.size() <= QuotaState::MAX_TEXT);
        for (const auto& q : p.queue) {
            FUZZ_CHECK(q.caller.size() <= QuotaState::MAX_TEXT && q.model.size() <= QuotaState::MAX_TEXT);
            FUZZ_CHECK(static_cast<int>(q.reason) <= static_cast<int>(tollgate::WaitReason::Slots));
        }
    }
}

// What format 1 lacked per slot and waiter (namespace, start time, lease: 3 × 8 bytes) and
// formats 1 and 2 per provider (the reported limits: 3 × 8 bytes).
std::size_t olderFormatGrowth(const QuotaState& s)
{
    std::size_t holders = 0;
    for (const auto& p : s.providers)
        holders += p.slots.size() + p.queue.size();
    return holders * 24 + s.providers.size() * 24;
}

// Checks a successfully decoded state; returns its encoding.
std::string checkState(const QuotaState& s, std::size_t inputSize)
{
    checkBounds(s);
    const std::string once = s.encode();
    FUZZ_CHECK(once.size() <= inputSize + olderFormatGrowth(s));
    auto back = QuotaState::decode(once);
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(back->encode() == once);
    return once;
}

void checkError(const tollgate::Error& e)
{
    FUZZ_CHECK(e.kind == ErrorKind::Corrupt || e.kind == ErrorKind::Unsupported);
    FUZZ_CHECK(!e.message.empty());
}

// What decode(payload) says, reduced to something comparable with decodeImage's answer.
struct Verdict
{
    bool ok = false;
    ErrorKind kind = ErrorKind::Corrupt;
    std::string encoding;
};

Verdict decodePayload(std::string_view payload)
{
    Verdict v;
    auto r = QuotaState::decode(payload);
    if (r) {
        v.ok = true;
        v.encoding = checkState(*r, payload.size());
    } else {
        checkError(r.error());
        v.kind = r.error().kind;
    }
    return v;
}

Verdict decodeWholeImage(std::string_view image)
{
    Verdict v;
    auto r = StateFile::decodeImage(image);
    if (!r) {
        checkError(r.error());
        v.kind = r.error().kind;
        FUZZ_CHECK(!image.empty());
        return v;
    }
    if (!r->has_value()) {
        FUZZ_CHECK(image.empty()); // "no state" only for an empty file
        v.kind = ErrorKind::NotFound;
        return v;
    }
    v.ok = true;
    v.encoding = checkState(**r, image.size());
    return v;
}

// A two-slot image is 1 MiB + slot 1; build it in one reused, zeroed buffer.
std::string& twoSlotBuffer()
{
    static std::string buf(static_cast<std::size_t>(StateFile::SLOT_BYTES), '\0');
    return buf;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    if (in.empty()) {
        auto r = StateFile::decodeImage(in);
        FUZZ_CHECK(r.ok() && !r->has_value());
        return 0;
    }
    const unsigned mode = static_cast<unsigned char>(in[0]) & 3u;
    const std::string_view rest = in.substr(1);

    const Verdict direct = decodePayload(rest);

    switch (mode) {
    case 0:
        decodeWholeImage(in);
        break;
    case 1: {
        const Verdict viaSlot = decodeWholeImage(fuzz::makeSlot(rest, 2));
        FUZZ_CHECK(viaSlot.ok == direct.ok);
        if (direct.ok)
            FUZZ_CHECK(viaSlot.encoding == direct.encoding);
        else
            FUZZ_CHECK(viaSlot.kind == direct.kind);
        break;
    }
    case 2: {
        if (rest.size() < 2)
            break;
        const std::string_view body = rest.substr(2);
        const std::size_t split = body.size() * static_cast<unsigned char>(rest[0]) / 255;
        const std::string_view p0 = body.substr(0, split);
        const std::string_view p1 = body.substr(split);
        const auto flags = static_cast<unsigned char>(rest[1]);
        const bool slot1Newer = flags & 1;
        const bool break0 = flags & 2;
        const bool break1 = (flags & 6) == 4;
        const std::string s0 = fuzz::makeSlot(p0, slot1Newer ? 4 : 5, break0);
        const std::string s1 = fuzz::makeSlot(p1, slot1Newer ? 5 : 4, break1);

        std::string& image = twoSlotBuffer();
        image.replace(0, s0.size(), s0);
        image.resize(static_cast<std::size_t>(StateFile::SLOT_BYTES));
        image += s1;
        const Verdict got = decodeWholeImage(image);
        std::fill(image.begin(), image.begin() + static_cast<std::ptrdiff_t>(s0.size()), '\0');
        image.resize(static_cast<std::size_t>(StateFile::SLOT_BYTES));

        // The reader takes the newest slot that is valid; an intact slot of an unknown
        // version stops it (never set aside).
        const Verdict d0 = decodePayload(p0);
        const Verdict d1 = decodePayload(p1);
        const Verdict* order[2] = { slot1Newer ? &d1 : &d0, slot1Newer ? &d0 : &d1 };
        const bool broken[2] = { slot1Newer ? break1 : break0, slot1Newer ? break0 : break1 };
        Verdict expect;
        expect.kind = ErrorKind::Corrupt;
        for (int i = 0; i < 2; ++i) {
            if (broken[i])
                continue;
            if (order[i]->ok || order[i]->kind == ErrorKind::Unsupported) {
                expect = *order[i];
                break;
            }
        }
        FUZZ_CHECK(got.ok == expect.ok);
        if (expect.ok)
            FUZZ_CHECK(got.encoding == expect.encoding);
        else
            FUZZ_CHECK(got.kind == expect.kind);
        break;
    }
    case 3:
        break;
    }
    return 0;
}
