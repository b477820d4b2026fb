#pragma once

// RemainingWords: the remaining-requests words of a directory home's answers (issue 26: every
// answer states one), noted in the store without the answer waiting for it.
//
// On a directory home the proxy's store operations go one at a time on the store strand
// (Server::storeExecutor), so a word that the relay awaited cost the answer a turn behind
// every admission and settling queued before it, and a store operation per answer (6 % of the
// proxy's CPU per request at 16 clients: docs/BENCHMARKS.md, tenth measurement). The word is
// about other admissions, not this answer's, and the strand
// runs its jobs in the order they were posted: a job posted when the headers are read is done
// before any first try posted after it, whether or not the answer waits. A first try made off
// the strand (a streamed body's, on the body's thread) calls noteNow() first: it notes a word
// still pending, or waits for the job noting one. So the answer is relayed at once.
//
// Invariants:
// - The latest word offered replaces one not yet noted. For the word's own scope that is what
//   noting both in a row leaves (QuotaPolicy::applyRemaining: the latest word replaces the one
//   kept, less the admissions after its fence, which each take one of the remainder anyway);
//   admissions of other scopes in between, which that count includes and the remainder does
//   not, are not taken off. A burst of words costs one store operation.
// - A word is noted no later than a job posted when it was offered would be: offer() says to
//   post a job unless one is queued that has not yet taken the pending word (noteNow() ends
//   that); a word is taken and noted under m_noting, so noteNow() returns only once every word
//   offered before it is in the store (or its store operation failed: a word is advice the next
//   answer repeats, and a failed one is dropped, as a failed learnFromHeaders is).
// - Thread-safe: offered on the event loop, noted on a store thread or a body's thread.

#include "exchange/quotaexchange.h"

#include <mutex>
#include <optional>

namespace tollgate::proxy {

class RemainingWords
{
public:
    using Word = QuotaExchange::RemainingWord;

    // Keeps `word` for the next job; true: no job is queued, so the caller posts one (to the
    // store strand) that calls noteNow(), or withdraws (the post failed).
    [[nodiscard]] bool offer(Word word);
    // The caller of an offer() that returned true could not post its job: the word is dropped.
    void withdraw();
    // Notes the word pending, if any, with `note(const Word&)`, after any note in progress has
    // ended; a word offered after the pending one was taken posts a job of its own.
    template <class Note> void noteNow(Note&& note)
    {
        std::lock_guard noting(m_noting);
        if (const std::optional<Word> word = take())
            note(*word);
    }

private:
    [[nodiscard]] std::optional<Word> take();

    std::mutex m_noting; // held while a word is taken and noted; taken before m_mutex
    std::mutex m_mutex; // guards the two below
    std::optional<Word> m_pending;
    bool m_queued = false; // a job is posted that has not taken m_pending yet
};

} // namespace tollgate::proxy
