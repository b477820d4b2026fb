// Fuzz regressions: every input under tests/data/fuzz-regressions/<target>/ goes through the
// same core functions, with the same invariants, as the libFuzzer target of that name in
// fuzz/ (fuzz_lockinfo, fuzz_statefile, fuzz_history). A crash found by scripts/fuzz.sh is
// added there (see fuzz/README.md); the seed corpus is there too, as a smoke test. A core
// function must return cleanly (a value or an error) and never throw.

#include "base/crc32.h"
#include "base/textsanitizer.h"
#include "history/historyevent.h"
#include "history/historyreader.h"
#include "lock/lockinfo.h"
#include "quota/quotastate.h"
#include "store/statefile.h"

#include <QDir>
#include <QFile>
#include <QTest>
#include <algorithm>
#include <cstring>
#include <string>

using namespace tollgate;

class TestFuzzRegressions final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void everyTargetHasInputs_data();
    void everyTargetHasInputs();
    void lockinfo_data();
    void lockinfo();
    void statefile_data();
    void statefile();
    void history_data();
    void history();
};

namespace {

QString regressionDir(const char* target)
{
    return QStringLiteral(TOLLGATE_TEST_DATA "/fuzz-regressions/") + QString::fromLatin1(target);
}

QStringList inputsOf(const char* target)
{
    return QDir(regressionDir(target)).entryList(QDir::Files | QDir::Hidden, QDir::Name);
}

void addRows(const char* target)
{
    QTest::addColumn<QString>("path");
    for (const QString& name : inputsOf(target))
        QTest::newRow(qPrintable(name)) << regressionDir(target) + QLatin1Char('/') + name;
}

std::string readInput(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        qFatal("cannot read %s", qPrintable(path));
    return f.readAll().toStdString();
}

std::string_view trimmed(std::string_view s)
{
    constexpr std::string_view ws = " \t\r\n\v\f";
    const auto b = s.find_first_not_of(ws);
    if (b == std::string_view::npos)
        return {};
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

bool sanitizedOk(std::string_view clean)
{
    if (TextSanitizer::invalidUtf8Offset(clean) != std::string_view::npos)
        return false;
    std::size_t chars = 0;
    for (std::size_t i = 0; i < clean.size(); ++i) {
        const auto c = static_cast<unsigned char>(clean[i]);
        if (c < 0x20 || c == 0x7F)
            return false;
        if (c == 0xC2 && i + 1 < clean.size()) {
            const auto n = static_cast<unsigned char>(clean[i + 1]);
            if (n >= 0x80 && n <= 0x9F)
                return false; // a C1 control
        }
        chars += (c & 0xC0) != 0x80 ? 1 : 0;
    }
    return chars <= LockInfo::MAX_TAG_CHARS;
}

// The state-slot layout of docs/PROTOCOL.md section 3 (as fuzz/fuzzcheck.h builds it).
std::string makeSlot(std::string_view payload, std::uint64_t seq, bool badCrc)
{
    constexpr std::uint32_t magic = 0x4C534754;
    std::string out(StateFile::HEADER_BYTES, '\0');
    const auto length = static_cast<std::uint32_t>(payload.size());
    std::memcpy(out.data(), &magic, 4);
    std::memcpy(out.data() + 4, &length, 4);
    std::memcpy(out.data() + 8, &seq, 8);
    std::uint32_t crc = Crc32::compute(payload, Crc32::compute(std::string_view(out).substr(4, 12)));
    if (badCrc)
        crc ^= 1;
    std::memcpy(out.data() + 16, &crc, 4);
    out.append(payload);
    return out;
}

// What decoding gave, comparable between decode() and decodeImage().
struct Verdict
{
    bool ok = false;
    ErrorKind kind = ErrorKind::Corrupt;
    std::string encoding;
};

// The checks of fuzz_statefile on a decoded state; an empty string when they all hold.
QString stateProblem(const QuotaState& s, std::size_t inputSize)
{
    if (s.providers.size() > QuotaState::MAX_PROVIDERS)
        return QStringLiteral("too many providers");
    for (const auto& p : s.providers) {
        if (p.scopes.size() > 64 || p.slots.size() > QuotaState::MAX_SLOTS
            || p.queue.size() > QuotaState::MAX_WAITERS)
            return QStringLiteral("a count is over its bound");
        for (const auto& sc : p.scopes) {
            const auto w = sc.window.windowMs();
            const auto g = sc.window.bucketMs();
            // 32 buckets of ceil(window / 32) ms must cover the window.
            if (w < 1 || g < 1 || g < w / RollingWindow::BUCKETS)
                return QStringLiteral("window of %1 ms got buckets of %2 ms").arg(w).arg(g);
            // usage() sums the buckets and whenFits() computes (index + 1) × g + w: a
            // decoded window must not make them overflow.
            std::int64_t requests = 0, tokens = 0, next = 0, end = 0;
            for (const auto& b : sc.window.buckets()) {
                if (b.index < 0)
                    continue;
                if (__builtin_add_overflow(requests, b.requests, &requests)
                    || __builtin_add_overflow(tokens, b.tokens, &tokens))
                    return QStringLiteral("the window's request or token sum overflows an int64");
                if (__builtin_add_overflow(b.index, 1, &next) || __builtin_mul_overflow(next, g, &end)
                    || __builtin_add_overflow(end, w, &end))
                    return QStringLiteral("bucket %1 ends past the int64 range").arg(b.index);
            }
        }
    }
    // An older state is rewritten in the current format: from format 1, 24 more bytes per
    // slot and waiter; from formats 1 and 2, 24 more per provider (its reported limits).
    std::size_t holders = 0;
    for (const auto& p : s.providers)
        holders += p.slots.size() + p.queue.size();
    const std::string once = s.encode();
    if (once.size() > inputSize + holders * 24 + s.providers.size() * 24)
        return QStringLiteral("re-encoding is longer than the input");
    auto back = QuotaState::decode(once);
    if (!back)
        return QStringLiteral("re-encoding does not decode: ") + QString::fromStdString(back.error().message);
    if (back->encode() != once)
        return QStringLiteral("encode(decode(encode(s))) != encode(s)");
    return {};
}

Verdict decodePayload(std::string_view payload)
{
    Verdict v;
    auto r = QuotaState::decode(payload);
    if (r) {
        const QString problem = stateProblem(*r, payload.size());
        if (!problem.isEmpty())
            QTest::qFail(qPrintable(problem), __FILE__, __LINE__);
        v.ok = true;
        v.encoding = r->encode();
    } else {
        v.kind = r.error().kind;
        if (v.kind != ErrorKind::Corrupt && v.kind != ErrorKind::Unsupported)
            QTest::qFail("decode failed with an unexpected error kind", __FILE__, __LINE__);
    }
    return v;
}

Verdict decodeWholeImage(std::string_view image)
{
    Verdict v;
    auto r = StateFile::decodeImage(image);
    if (!r) {
        v.kind = r.error().kind;
        if (v.kind != ErrorKind::Corrupt && v.kind != ErrorKind::Unsupported)
            QTest::qFail("decodeImage failed with an unexpected error kind", __FILE__, __LINE__);
        return v;
    }
    if (!r->has_value()) {
        if (!image.empty())
            QTest::qFail("a non-empty image gave \"no state\"", __FILE__, __LINE__);
        v.kind = ErrorKind::NotFound;
        return v;
    }
    const QString problem = stateProblem(**r, image.size());
    if (!problem.isEmpty())
        QTest::qFail(qPrintable(problem), __FILE__, __LINE__);
    v.ok = true;
    v.encoding = (*r)->encode();
    return v;
}

bool sameEvent(const HistoryEvent& a, const HistoryEvent& b)
{
    return a.timeMs == b.timeMs && a.type == b.type && a.otherType == b.otherType && a.provider == b.provider
        && a.caller == b.caller && a.model == b.model && a.pid == b.pid && a.tokens == b.tokens
        && a.fence == b.fence && a.waitedMs == b.waitedMs && a.reason == b.reason
        && a.retryAfterMs == b.retryAfterMs && a.backoffMs == b.backoffMs;
}

} // namespace

void TestFuzzRegressions::everyTargetHasInputs_data()
{
    QTest::addColumn<QString>("target");
    for (const char* t : { "lockinfo", "statefile", "history" })
        QTest::newRow(t) << QString::fromLatin1(t);
}

void TestFuzzRegressions::everyTargetHasInputs()
{
    QFETCH(QString, target);
    QVERIFY2(!inputsOf(qPrintable(target)).isEmpty(), qPrintable(regressionDir(qPrintable(target))));
}

void TestFuzzRegressions::lockinfo_data()
{
    addRows("lockinfo");
}

void TestFuzzRegressions::lockinfo()
{
    QFETCH(QString, path);
    const std::string in = readInput(path);

    const std::string clean = LockInfo::sanitizeTag(in);
    QVERIFY(sanitizedOk(clean));
    QCOMPARE(LockInfo::sanitizeTag(clean), clean);

    auto parsed = LockInfo::parse(in);
    if (!parsed) {
        QCOMPARE(parsed.error().kind, ErrorKind::Corrupt);
        QVERIFY(!parsed.error().message.empty());
        return;
    }
    QVERIFY(parsed->pid >= 1 && parsed->pid <= INT32_MAX);
    QVERIFY(parsed->timestamp >= 0);
    QCOMPARE(std::string(trimmed(parsed->tag)), parsed->tag); // values are trimmed, also after sanitising
    const std::string bytes = parsed->serialize();
    QVERIFY(bytes.size() <= LockInfo::MAX_FILE_BYTES);
    QCOMPARE(std::count(bytes.begin(), bytes.end(), '\n'), std::ptrdiff_t(parsed->tag.empty() ? 2 : 3));
    auto again = LockInfo::parse(bytes);
    QVERIFY(again.ok());
    QCOMPARE(again->pid, parsed->pid);
    QCOMPARE(again->timestamp, parsed->timestamp);
    QCOMPARE(again->tag, std::string(trimmed(LockInfo::sanitizeTag(parsed->tag))));
    auto third = LockInfo::parse(again->serialize());
    QVERIFY(third.ok());
    QVERIFY(*third == *again);
}

void TestFuzzRegressions::statefile_data()
{
    addRows("statefile");
}

// Same input format as fuzz/fuzz_statefile.cpp: the low two bits of the first byte choose
// 0 raw image, 1 payload in a valid slot 0, 2 two valid slots, 3 payload only.
void TestFuzzRegressions::statefile()
{
    QFETCH(QString, path);
    const std::string in = readInput(path);
    if (in.empty()) {
        auto r = StateFile::decodeImage(in);
        QVERIFY(r.ok() && !r->has_value());
        return;
    }
    const unsigned mode = static_cast<unsigned char>(in[0]) & 3u;
    const std::string_view rest = std::string_view(in).substr(1);
    const Verdict direct = decodePayload(rest);
    if (QTest::currentTestFailed())
        return;

    if (mode == 0) {
        decodeWholeImage(in);
    } else if (mode == 1) {
        const Verdict viaSlot = decodeWholeImage(makeSlot(rest, 2, false));
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(viaSlot.ok, direct.ok);
        if (direct.ok)
            QVERIFY(viaSlot.encoding == direct.encoding);
        else
            QCOMPARE(viaSlot.kind, direct.kind);
    } else if (mode == 2 && rest.size() >= 2) {
        const std::string_view body = rest.substr(2);
        const std::size_t split = body.size() * static_cast<unsigned char>(rest[0]) / 255;
        const std::string_view p0 = body.substr(0, split);
        const std::string_view p1 = body.substr(split);
        const auto flags = static_cast<unsigned char>(rest[1]);
        const bool slot1Newer = flags & 1;
        const bool break0 = flags & 2;
        const bool break1 = (flags & 6) == 4;
        std::string image = makeSlot(p0, slot1Newer ? 4 : 5, break0);
        image.resize(static_cast<std::size_t>(StateFile::SLOT_BYTES), '\0');
        image += makeSlot(p1, slot1Newer ? 5 : 4, break1);
        const Verdict got = decodeWholeImage(image);
        const Verdict d0 = decodePayload(p0);
        const Verdict d1 = decodePayload(p1);
        if (QTest::currentTestFailed())
            return;
        const Verdict* order[2] = { slot1Newer ? &d1 : &d0, slot1Newer ? &d0 : &d1 };
        const bool broken[2] = { slot1Newer ? break1 : break0, slot1Newer ? break0 : break1 };
        Verdict expect;
        for (int i = 0; i < 2; ++i) {
            if (!broken[i] && (order[i]->ok || order[i]->kind == ErrorKind::Unsupported)) {
                expect = *order[i];
                break;
            }
        }
        QCOMPARE(got.ok, expect.ok);
        if (expect.ok)
            QVERIFY(got.encoding == expect.encoding);
        else
            QCOMPARE(got.kind, expect.kind);
    }
}

void TestFuzzRegressions::history_data()
{
    addRows("history");
}

void TestFuzzRegressions::history()
{
    QFETCH(QString, path);
    const std::string in = readInput(path);

    HistoryReader::Batch batch;
    std::size_t consumed = ~std::size_t(0);
    HistoryReader::parseLines(in, batch, consumed);
    QVERIFY(consumed <= in.size());
    if (consumed < in.size()) {
        QVERIFY(in.find('\n', consumed) == std::string::npos);
        QVERIFY(in.size() - consumed <= HistoryReader::MAX_LINE);
    }
    const auto lines = static_cast<std::size_t>(
        std::count(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(consumed), '\n'));
    QVERIFY(batch.events.size() + batch.badLines <= lines + 1);

    std::string rewritten;
    for (const auto& e : batch.events) {
        QVERIFY(!e.typeName().empty());
        const std::string line = e.toJsonLine();
        QVERIFY(!line.empty() && line.back() == '\n');
        QCOMPARE(std::count(line.begin(), line.end(), '\n'), std::ptrdiff_t(1));
        auto again = HistoryEvent::fromJsonLine(std::string_view(line).substr(0, line.size() - 1));
        QVERIFY2(again.ok(), line.c_str());
        QVERIFY2(sameEvent(*again, e), line.c_str());
        rewritten += line;
    }
    HistoryReader::Batch again;
    std::size_t consumedAgain = 0;
    HistoryReader::parseLines(rewritten, again, consumedAgain);
    QCOMPARE(consumedAgain, rewritten.size());
    QCOMPARE(again.badLines, std::size_t(0));
    QCOMPARE(again.events.size(), batch.events.size());

    auto single = HistoryEvent::fromJsonLine(in);
    if (single) {
        auto back = HistoryEvent::fromJsonLine(single->toJsonLine());
        QVERIFY(back.ok());
        QVERIFY(sameEvent(*back, *single));
    } else {
        QCOMPARE(single.error().kind, ErrorKind::Corrupt);
    }
}

QTEST_APPLESS_MAIN(TestFuzzRegressions)
#include "tst_fuzzregressions.moc"
