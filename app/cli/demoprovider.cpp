#include "demoprovider.h"

#include "system/flockguard.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <fcntl.h>

namespace tollgate::cli {

Result<DemoProvider> DemoProvider::open(const std::string& dir, std::int64_t quota, std::int64_t windowMs)
{
    auto lock = Fd::open(dir + "/provider.lock", O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
    if (!lock)
        return lock.error();
    return DemoProvider(std::move(lock).value(), dir + "/provider.log", quota, windowMs);
}

Result<DemoProvider::Answer> DemoProvider::call(std::int64_t nowMs) const
{
    auto guard = FlockGuard::lock(m_lock, true, std::chrono::steady_clock::now() + std::chrono::seconds(5));
    if (!guard)
        return guard.error();
    auto log = Fd::open(m_logPath, O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
    if (!log)
        return log.error();
    auto text = log->readAll(1 << 20);
    if (!text)
        return text.error();
    std::deque<std::int64_t> times;
    const char* p = text->c_str();
    while (*p) {
        char* end = nullptr;
        const long long t = std::strtoll(p, &end, 10);
        if (end == p)
            break;
        if (t > nowMs - m_windowMs)
            times.push_back(t);
        p = *end ? end + 1 : end;
    }
    std::sort(times.begin(), times.end());
    Answer answer;
    if (static_cast<std::int64_t>(times.size()) >= m_quota) {
        answer.rateLimited = true;
        answer.retryAfterMs = RETRY_AFTER_HINT_MS;
    } else {
        times.push_back(nowMs);
    }
    std::string out;
    for (std::int64_t t : times)
        out += std::to_string(t) + '\n';
    if (auto r = log->truncate(0); !r)
        return r.error();
    if (auto r = log->pwriteAll(out, 0); !r)
        return r.error();
    return answer;
}

} // namespace tollgate::cli
