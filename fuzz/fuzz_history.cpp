// fuzz_history: the history reader — HistoryReader::parseLines (complete lines of a chunk
// of history.jsonl) and HistoryEvent::fromJsonLine (one line).
//
// Invariants checked (abort on violation):
// - consumed ≤ size; what is left unconsumed is one partial line (no '\n') of at most
//   MAX_LINE bytes, and consumption stops right after a '\n' (or at the very end);
// - events + bad lines ≤ the number of non-empty complete lines;
// - every parsed event's toJsonLine() is one line ending in '\n' that parses again to the
//   same event, and parseLines() of all of them gives them all back with no bad line;
// - fromJsonLine of the whole input agrees with parseLines on a single line.

#include "fuzzcheck.h"
#include "history/historyevent.h"
#include "history/historyreader.h"

#include <algorithm>

using tollgate::HistoryEvent;
using tollgate::HistoryReader;

namespace {

bool sameEvent(const HistoryEvent& a, const HistoryEvent& b)
{
    return a.timeMs == b.timeMs && a.type == b.type && a.otherType == b.otherType && a.provider == b.provider
        && a.caller == b.caller && a.model == b.model && a.pid == b.pid && a.tokens == b.tokens
        && a.fence == b.fence && a.waitedMs == b.waitedMs && a.reason == b.reason
        && a.retryAfterMs == b.retryAfterMs && a.backoffMs == b.backoffMs;
}

void checkEvent(const HistoryEvent& e)
{
    FUZZ_CHECK(!e.typeName().empty());
    const std::string line = e.toJsonLine();
    FUZZ_CHECK(!line.empty() && line.back() == '\n');
    FUZZ_CHECK(std::count(line.begin(), line.end(), '\n') == 1);
    auto again = HistoryEvent::fromJsonLine(std::string_view(line).substr(0, line.size() - 1));
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(sameEvent(*again, e));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view in(reinterpret_cast<const char*>(data), size);

    HistoryReader::Batch batch;
    std::size_t consumed = ~std::size_t(0);
    HistoryReader::parseLines(in, batch, consumed);
    FUZZ_CHECK(consumed <= in.size());
    if (consumed < in.size()) {
        const std::string_view left = in.substr(consumed);
        FUZZ_CHECK(left.find('\n') == std::string_view::npos);
        FUZZ_CHECK(left.size() <= HistoryReader::MAX_LINE);
        FUZZ_CHECK(consumed == 0 || in[consumed - 1] == '\n');
    }
    std::size_t nonEmptyLines = 0;
    for (std::size_t at = 0; at < consumed;) {
        auto nl = in.find('\n', at);
        if (nl == std::string_view::npos || nl >= consumed)
            nl = consumed; // a runaway partial line skipped as bad
        nonEmptyLines += nl > at ? 1 : 0;
        at = nl + 1;
    }
    FUZZ_CHECK(batch.events.size() + batch.badLines <= nonEmptyLines);

    std::string rewritten;
    for (const auto& e : batch.events) {
        checkEvent(e);
        rewritten += e.toJsonLine();
    }
    HistoryReader::Batch again;
    std::size_t consumedAgain = 0;
    HistoryReader::parseLines(rewritten, again, consumedAgain);
    FUZZ_CHECK(consumedAgain == rewritten.size());
    FUZZ_CHECK(again.badLines == 0);
    FUZZ_CHECK(again.events.size() == batch.events.size());
    for (std::size_t i = 0; i < again.events.size(); ++i)
        FUZZ_CHECK(sameEvent(again.events[i], batch.events[i]));

    // One line on its own.
    auto single = HistoryEvent::fromJsonLine(in);
    if (single) {
        checkEvent(*single);
    } else {
        FUZZ_CHECK(single.error().kind == tollgate::ErrorKind::Corrupt);
    }
    if (!in.empty() && in.back() == '\n' && in.find('\n') == in.size() - 1 && in.size() > 1) {
        FUZZ_CHECK(batch.events.size() + batch.badLines == 1);
        FUZZ_CHECK(
            HistoryEvent::fromJsonLine(in.substr(0, in.size() - 1)).ok() == (batch.events.size() == 1));
    }
    return 0;
}
