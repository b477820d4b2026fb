#pragma once

// DemoProvider: the API that `tollgate demo` pretends to call. Its true quota (requests per
// rolling window) is shared by every demo caller process through one small file, so it answers
// 429 exactly when the callers together really went over — which they do, because the demo
// sets Tollgate's limit above this quota, as a user who misread the provider's docs would.
//
// provider.lock is never replaced (flock on it guards provider.log); provider.log holds the
// admission times of the current window, one per line, rewritten in place.

#include "base/result.h"
#include "system/fd.h"

#include <cstdint>
#include <string>

namespace tollgate::cli {

class DemoProvider
{
public:
    struct Answer
    {
        bool rateLimited = false;
        // When rate limited: a fixed, optimistic hint, as many real APIs send — shorter than the
        // time the window really needs, so callers that trust it come back too early.
        std::int64_t retryAfterMs = 0;
    };

    static constexpr std::int64_t RETRY_AFTER_HINT_MS = 2000;

    static Result<DemoProvider> open(const std::string& dir, std::int64_t quota, std::int64_t windowMs);

    [[nodiscard]] Result<Answer> call(std::int64_t nowMs) const;

private:
    DemoProvider(Fd lock, std::string logPath, std::int64_t quota, std::int64_t windowMs)
        : m_lock(std::move(lock))
        , m_logPath(std::move(logPath))
        , m_quota(quota)
        , m_windowMs(windowMs)
    {
    }

    Fd m_lock;
    std::string m_logPath;
    std::int64_t m_quota;
    std::int64_t m_windowMs;
};

} // namespace tollgate::cli
