// RemainingWords, how `tollgate proxy` notes the provider's remaining-requests words on a
// directory home without an answer waiting for the store: the latest word offered is the one
// noted, a burst of words costs one store operation, no word is left behind (a word is noted no
// later than a job posted when it was offered would have been), and a first try made off the
// strand (a streamed body's) finds every word offered before it noted. The jobs run on a strand
// of a thread pool, as the proxy's store operations do (Server::storeTurn).

#include "proxy/netcommon.h"
#include "proxy/remainingwords.h"

#include <QTest>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

using namespace tollgate;
using namespace std::chrono_literals;
using proxy::RemainingWords;
using Word = QuotaExchange::RemainingWord;

class TestRemainingWords final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void theLatestWordIsNotedOnce();
    void noWordIsLeftBehindOnTheStrand();
    void aFirstTryOffTheStrandWaitsForTheNoteInProgress();
};

namespace {

Word wordOf(std::int64_t left, std::uint64_t fence)
{
    return Word { "claude-x", left, 1000 + left, fence };
}

// The words noteNow() hands over, in order.
std::vector<Word> noteAll(RemainingWords& words)
{
    std::vector<Word> noted;
    words.noteNow([&](const Word& w) { noted.push_back(w); });
    return noted;
}

} // namespace

void TestRemainingWords::theLatestWordIsNotedOnce()
{
    RemainingWords words;
    QVERIFY(words.offer(wordOf(9, 1))); // no job queued: post one
    QVERIFY(!words.offer(wordOf(8, 2))); // the queued job notes it
    QVERIFY(!words.offer(wordOf(7, 3)));
    const std::vector<Word> noted = noteAll(words);
    QCOMPARE(noted.size(), std::size_t(1));
    QCOMPARE(noted[0].left, std::int64_t(7));
    QCOMPARE(noted[0].fence, std::uint64_t(3));
    QCOMPARE(noted[0].untilMs, std::int64_t(1007));
    QCOMPARE(noted[0].model, std::string("claude-x"));
    QVERIFY(noteAll(words).empty()); // noted: nothing twice
    // Taken, so a word offered now needs a job of its own (the one that took it may have noted
    // it already).
    QVERIFY(words.offer(wordOf(6, 4)));
    const std::vector<Word> next = noteAll(words);
    QCOMPARE(next.size(), std::size_t(1));
    QCOMPARE(next[0].left, std::int64_t(6));
    // A job that could not be posted: the word is dropped, and the next offer posts again.
    QVERIFY(words.offer(wordOf(5, 5)));
    words.withdraw();
    QVERIFY(noteAll(words).empty());
    QVERIFY(words.offer(wordOf(4, 6)));
}

// Words offered from one thread (the event loop) while the strand notes them on another: after
// a marker posted behind the last offer has run, the last word noted is the last offered.
void TestRemainingWords::noWordIsLeftBehindOnTheStrand()
{
    constexpr int WORDS = 20000;
    RemainingWords words;
    proxy::net::thread_pool threads(2);
    auto strand = proxy::net::make_strand(threads.get_executor());
    std::vector<std::uint64_t> noted; // the strand's alone until the marker has run
    for (int i = 1; i <= WORDS; ++i) {
        if (!words.offer(wordOf(WORDS - i, static_cast<std::uint64_t>(i))))
            continue;
        proxy::net::post(strand, [&] { words.noteNow([&](const Word& w) { noted.push_back(w.fence); }); });
    }
    std::promise<void> markerRan;
    proxy::net::post(strand, [&] { markerRan.set_value(); });
    QVERIFY(markerRan.get_future().wait_for(120s) == std::future_status::ready);
    threads.join();
    QVERIFY(!noted.empty());
    QCOMPARE(noted.back(), std::uint64_t(WORDS));
    for (std::size_t i = 1; i < noted.size(); ++i)
        QVERIFY(noted[i] > noted[i - 1]);
}

// A job has taken a word and is noting it (its store operation blocked): a streamed body's
// first try calls noteNow() and must not go on before that note is in the store — else it could
// be admitted against the remainder the word replaces.
void TestRemainingWords::aFirstTryOffTheStrandWaitsForTheNoteInProgress()
{
    RemainingWords words;
    QVERIFY(words.offer(wordOf(1, 1)));
    std::promise<void> taken;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<bool> inStore { false };
    std::thread job([&] {
        words.noteNow([&](const Word&) {
            taken.set_value();
            released.wait();
            inStore = true;
        });
    });
    taken.get_future().wait();
    auto firstTry = std::async(std::launch::async, [&] {
        noteAll(words);
        return inStore.load(); // what the first try would see of the word
    });
    // Still waiting while the note is in progress: it cannot go on before the release below (a
    // first try that did not wait would be done long before, and see no word in the store).
    const bool waited = firstTry.wait_for(300ms) == std::future_status::timeout;
    release.set_value();
    job.join();
    QVERIFY(waited);
    QVERIFY(firstTry.get());
}

QTEST_GUILESS_MAIN(TestRemainingWords)
#include "tst_remainingwords.moc"
