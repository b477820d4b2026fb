#include "history/historyevent.h"

#include <iterator>
#include <nlohmann/json.hpp>

namespace tollgate {

namespace {

using nlohmann::json;

template <typename T> void take(const json& j, const char* key, T& out)
{
    auto it = j.find(key);
    if (it == j.end())
        return;
    if constexpr (std::is_same_v<T, std::string>) {
        if (it->is_string())
            out = it->get<std::string>();
    } else {
        if (it->is_number_integer())
            out = it->get<T>();
    }
}

// In the order of EventType.
constexpr std::string_view NAMES[] = { "admit", "429", "ok", "gave-up", "pause", "resume", "limits",
    "release", "reclaim", "backoff-reset", "reset", "lock-release", "lock-clean", "gap", "hold", "overloaded",
    "limit-mismatch", "quota-warning", "broken-off" };
static_assert(std::size(NAMES) == static_cast<std::size_t>(EventType::Other));

} // namespace

std::string_view eventTypeName(EventType type)
{
    const auto i = static_cast<std::size_t>(type);
    return i < std::size(NAMES) ? NAMES[i] : std::string_view();
}

std::optional<EventType> eventTypeFromName(std::string_view name)
{
    for (std::size_t i = 0; i < std::size(NAMES); ++i) {
        if (NAMES[i] == name)
            return static_cast<EventType>(i);
    }
    return std::nullopt;
}

const std::vector<EventType>& allEventTypes()
{
    static const std::vector<EventType> all = [] {
        std::vector<EventType> v;
        for (std::size_t i = 0; i < std::size(NAMES); ++i)
            v.push_back(static_cast<EventType>(i));
        return v;
    }();
    return all;
}

std::string HistoryEvent::toJsonLine() const
{
    json j;
    j["t"] = timeMs;
    j["type"] = std::string(typeName());
    if (!provider.empty())
        j["provider"] = provider;
    if (!caller.empty())
        j["caller"] = caller;
    if (!model.empty())
        j["model"] = model;
    if (pid)
        j["pid"] = pid;
    if (tokens)
        j["tokens"] = tokens;
    if (fence)
        j["fence"] = fence;
    if (waitedMs)
        j["waited_ms"] = waitedMs;
    if (!reason.empty())
        j["reason"] = reason;
    if (retryAfterMs)
        j["retry_after_ms"] = retryAfterMs;
    if (backoffMs)
        j["backoff_ms"] = backoffMs;
    if (lost)
        j["lost"] = lost;
    if (sinceMs)
        j["since"] = sinceMs;
    return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<HistoryEvent> HistoryEvent::fromJsonLine(std::string_view line)
{
    const json j = json::parse(line.begin(), line.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return Error::make(ErrorKind::Corrupt, "", "history line is not a JSON object");
    HistoryEvent e;
    take(j, "t", e.timeMs);
    std::string typeText;
    take(j, "type", typeText);
    if (typeText.empty() || !j.contains("t"))
        return Error::make(ErrorKind::Corrupt, "", "history line lacks \"t\" or \"type\"");
    if (auto known = eventTypeFromName(typeText))
        e.type = *known;
    else
        e.otherType = std::move(typeText);
    take(j, "provider", e.provider);
    take(j, "caller", e.caller);
    take(j, "model", e.model);
    take(j, "pid", e.pid);
    take(j, "tokens", e.tokens);
    take(j, "fence", e.fence);
    take(j, "waited_ms", e.waitedMs);
    take(j, "reason", e.reason);
    take(j, "retry_after_ms", e.retryAfterMs);
    take(j, "backoff_ms", e.backoffMs);
    take(j, "lost", e.lost);
    take(j, "since", e.sinceMs);
    return e;
}

} // namespace tollgate
