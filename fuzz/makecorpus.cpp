// makecorpus: writes the seed inputs of fuzz_statefile (see the input format there) into
// the directory given as argument — real states, written by the real StateFile writer.
//
//   build-fuzz/makecorpus fuzz/corpus/statefile

#include "fuzzcheck.h"
#include "quota/quotastate.h"
#include "store/statefile.h"

#include <cstdio>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <vector>

using namespace tollgate;

namespace {

QuotaState emptyState()
{
    return QuotaState {};
}

QuotaState busyState()
{
    QuotaState s;
    s.nextFence = 1735420800000ULL * 1000 + 17;
    s.nextTicket = 42;
    auto& p = s.ensureProvider("anthropic");
    p.consecutive429 = 2;
    p.backoffUntilMs = 1735420860000;
    p.last429Ms = 1735420800000;
    p.paceUntilMs = 1735420920000;
    p.lastAdmitMs = 1735420799000;
    p.admittedTotal = 1234;
    p.rateLimitedTotal = 3;
    p.reportedAtMs = 1700000000000;
    p.reportedRequests = 40;
    p.reportedTokens = -1;
    ScopeWindow all { "", RollingWindow(60000) };
    for (std::int64_t t = 0; t < 70000; t += 1700)
        all.window.record(1735420740000 + t, 1, 150 + t % 7);
    p.scopes.push_back(all);
    ScopeWindow opus { "claude-opus", RollingWindow(3600000) };
    opus.window.record(1735420000000, 3, 4000);
    p.scopes.push_back(opus);
    // A holder of this namespace (with start time) and one of another namespace (a lease).
    p.slots.push_back(Slot {
        17, 4242, 1735420790000, 2000, "nightly-report", "claude-opus", 4026531836, 987654, 1735420820000, "" });
    p.slots.push_back(Slot { 19, 33, 1735420792000, 0, "container-job", "", 4026532177, 0, 1735420822000, "" });
    p.slots.push_back(Slot { 18, 0, 1735420791000, 0, "", "", 0, 0, 0, "" }); // a placeholder after a reset
    p.queue.push_back(Waiter { 40, 5151, 1735420795000, 1735420915000, 1500, "my-script", "", true,
        WaitReason::Backoff, 4026531836, 123456, 1735420810000, "" });
    p.queue.push_back(Waiter { 41, 5152, 1735420796000, 1735420797000, 0, "cron", "claude-opus", false,
        WaitReason::Queue, 4026532177, 0, 1735420811000, "" });
    return s;
}

QuotaState pausedState()
{
    QuotaState s;
    s.pausedAll = true;
    s.pauseReason = "key rotation";
    s.pausedAtMs = 1735420800000;
    auto& a = s.ensureProvider("openai");
    a.paused = true;
    a.pauseReason = "quota exhausted \xE2\x80\x94 wait";
    a.pausedAtMs = 1735420700000;
    a.scopes.push_back(ScopeWindow { "", RollingWindow(100) });
    a.scopes.back().window.record(5, 1, 1);
    auto& b = s.ensureProvider("local:llm@host");
    b.scopes.push_back(ScopeWindow { "", RollingWindow(604800000) });
    b.scopes.back().window.record(1735420800000, 1000000, 0);
    return s;
}

QuotaState crowdedState()
{
    QuotaState s;
    auto& p = s.ensureProvider("p");
    p.scopes.push_back(ScopeWindow { "", RollingWindow(1000) });
    for (std::int64_t t = 0; t < 1100; t += 31)
        p.scopes.back().window.record(t, 1, t);
    for (std::uint64_t i = 0; i < 12; ++i)
        p.slots.push_back(Slot { 100 + i, 1000 + static_cast<std::int64_t>(i), 10, 1,
            "worker-" + std::to_string(i), "m", 4026531836 + i % 3, 5000 + i, 30010, "" });
    for (std::uint64_t i = 0; i < 12; ++i)
        p.queue.push_back(Waiter { 200 + i, 3000 + static_cast<std::int64_t>(i), 20, 30, 5, "q", "",
            i % 2 == 0, static_cast<WaitReason>(i % 7), 4026531836, 0, i % 2 == 0 ? 15020 : 0, "" });
    return s;
}

// Format 4: a provider scope that splits tokens and counts a rolling day, a class that
// counts a calendar day (issue 25's metrics).
QuotaState providerTermsState()
{
    QuotaState s;
    auto& p = s.ensureProvider("anthropic");
    ScopeWindow provider { "", RollingWindow(60000) };
    provider.split = true;
    provider.day = ScopeWindow::Day::Rolling;
    for (std::int64_t t = 0; t < 120000; t += 7000) {
        provider.window.record(1735420800000 + t, RollingWindow::Usage { 1, 300 + t / 1000, 200, 100 + t / 1000 });
        provider.rollingDay.record(1735420800000 + t, RollingWindow::Usage { 1, 300, 200, 100 });
    }
    p.scopes.push_back(provider);
    ScopeWindow opus { "opus", RollingWindow(60000) };
    opus.split = true;
    opus.day = ScopeWindow::Day::Calendar;
    opus.dayStartMs = 1735372800000;
    opus.dayUsed = RollingWindow::Usage { 40, 90000, 60000, 30000 };
    p.scopes.push_back(opus);
    return s;
}

// A slot-0-only state.bin image as StateFile::write leaves it: write twice (sequence 1 goes
// to slot 1, sequence 2 to slot 0), then keep slot 0 (header + payload) only.
std::string slot0Image(const QuotaState& s)
{
    char dir[] = "/tmp/tollgate-makecorpus-XXXXXX";
    FUZZ_CHECK(::mkdtemp(dir) != nullptr);
    const std::string path = std::string(dir) + "/state.bin";
    std::string image;
    {
        auto fd = Fd::open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        FUZZ_CHECK(fd.ok());
        StateFile file(std::move(fd).value());
        FUZZ_CHECK(file.write(QuotaState {}).ok());
        FUZZ_CHECK(file.write(s).ok());
        auto all = Fd::open(path, O_RDONLY);
        FUZZ_CHECK(all.ok());
        image.resize(StateFile::HEADER_BYTES + s.encode().size());
        auto n = all->preadSome(image.data(), image.size(), 0);
        FUZZ_CHECK(n.ok() && *n == image.size());
    }
    ::unlink(path.c_str());
    ::rmdir(dir);
    auto back = StateFile::decodeImage(image);
    FUZZ_CHECK(back.ok() && back->has_value() && (*back)->encode() == s.encode());
    return image;
}

void put(const std::string& dir, const std::string& name, const std::string& bytes)
{
    FUZZ_CHECK(bytes.size() < 8192);
    const std::string path = dir + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    FUZZ_CHECK(f != nullptr);
    FUZZ_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
    FUZZ_CHECK(std::fclose(f) == 0);
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    const std::vector<std::pair<std::string, QuotaState>> states = {
        { "empty", emptyState() },
        { "busy", busyState() },
        { "paused", pausedState() },
        { "crowded", crowdedState() },
        { "provider-terms", providerTermsState() },
    };
    for (const auto& [name, s] : states) {
        const std::string payload = s.encode();
        put(dir, "image-" + name + ".bin", slot0Image(s)); // mode 0 (starts with 'T' = 0x54)
        put(dir, "slot-" + name + ".bin", '\x01' + payload); // mode 1
        put(dir, "payload-" + name + ".bin", '\x03' + payload); // mode 3
    }
    // Mode 2: two slots (split byte, flags, payload 0 + payload 1).
    const std::string older = pausedState().encode();
    const std::string newer = busyState().encode();
    const auto split = [&](const std::string& a, const std::string& b) {
        const std::size_t total = a.size() + b.size();
        // The target splits at body.size() * byte / 255: pick the byte that hits a.size().
        for (unsigned k = 0; k < 256; ++k) {
            if (total * k / 255 == a.size())
                return static_cast<char>(k);
        }
        return static_cast<char>(128);
    };
    put(dir, "two-slots.bin", std::string("\x02") + split(older, newer) + '\x01' + older + newer);
    put(dir, "two-slots-torn.bin", std::string("\x02") + split(older, newer) + '\x02' + older + newer);
    // An intact slot of a future format version (Unsupported: never set aside).
    std::string future = emptyState().encode();
    future[4] = static_cast<char>(QuotaState::FORMAT_VERSION + 1);
    put(dir, "slot-version" + std::to_string(QuotaState::FORMAT_VERSION + 1) + ".bin", '\x01' + future);
    return 0;
}
