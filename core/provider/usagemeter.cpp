#include "provider/usagemeter.h"

#include "base/textsanitizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tollgate {

namespace {

using json = nlohmann::json;

std::optional<std::int64_t> count(const json& o, const char* key)
{
    auto it = o.find(key);
    if (it == o.end() || !it->is_number_integer())
        return std::nullopt;
    const std::int64_t v = it->get<std::int64_t>();
    if (v < 0 || v > (1LL << 53))
        return std::nullopt;
    return v;
}

// A cached share reported inside `input`: at most all of it (a lie cannot make the split negative).
std::int64_t cachedShare(const json& u, const char* details, std::int64_t input)
{
    auto d = u.find(details);
    if (d == u.end() || !d->is_object())
        return 0;
    return std::min(count(*d, "cached_tokens").value_or(0), input);
}

// A usage object of Anthropic or OpenAI; nullopt when it holds no count we understand.
std::optional<TokenUsage> usageOf(const json& u)
{
    if (!u.is_object())
        return std::nullopt;
    const auto input = count(u, "input_tokens");
    const auto output = count(u, "output_tokens");
    const auto prompt = count(u, "prompt_tokens");
    const auto completion = count(u, "completion_tokens");
    if (input || output) {
        TokenUsage t;
        t.output = output.value_or(0);
        if (u.contains("input_tokens_details")) {
            // OpenAI Responses: input_tokens include the cached ones.
            t.input = input.value_or(0);
            t.cacheRead = cachedShare(u, "input_tokens_details", t.input);
            t.uncachedInput = t.input - t.cacheRead;
            return t;
        }
        // Anthropic: input_tokens are the uncached part; the cache's writes and reads are apart.
        t.uncachedInput = input.value_or(0);
        t.cacheCreation = count(u, "cache_creation_input_tokens").value_or(0);
        t.cacheRead = count(u, "cache_read_input_tokens").value_or(0);
        t.input = t.uncachedInput + t.cacheCreation + t.cacheRead;
        return t;
    }
    if (prompt || completion) {
        TokenUsage t { prompt.value_or(0), completion.value_or(0) };
        t.cacheRead = cachedShare(u, "prompt_tokens_details", t.input);
        t.uncachedInput = t.input - t.cacheRead;
        return t;
    }
    return std::nullopt;
}

// Gemini's usageMetadata: promptTokenCount includes the cached content; thoughts are output.
std::optional<TokenUsage> geminiUsageOf(const json& u)
{
    if (!u.is_object())
        return std::nullopt;
    const auto prompt = count(u, "promptTokenCount");
    const auto candidates = count(u, "candidatesTokenCount");
    const auto thoughts = count(u, "thoughtsTokenCount");
    const auto toolPrompt = count(u, "toolUsePromptTokenCount");
    if (!prompt && !candidates && !thoughts && !toolPrompt)
        return std::nullopt;
    TokenUsage t;
    // Tool-use prompt tokens are input the model read (totalTokenCount adds them apart).
    t.input = prompt.value_or(0) + toolPrompt.value_or(0);
    t.output = candidates.value_or(0) + thoughts.value_or(0);
    t.cacheRead = std::min(count(u, "cachedContentTokenCount").value_or(0), t.input);
    t.uncachedInput = t.input - t.cacheRead;
    return t;
}

// A whole answer (JSON body, or one event's object): the usage it reports, in any of the forms.
std::optional<TokenUsage> answerUsage(const json& body)
{
    if (body.is_array()) {
        // Gemini's streamGenerateContent without alt=sse: an array of answers; the last usage
        // is the whole call's.
        // Items are objects (one level only: nothing recurses on a hostile nesting).
        std::optional<TokenUsage> last;
        for (const json& item : body)
            if (item.is_object())
                if (auto t = answerUsage(item))
                    last = t;
        return last;
    }
    if (!body.is_object())
        return std::nullopt;
    if (auto u = body.find("usage"); u != body.end())
        return usageOf(*u);
    if (auto g = body.find("usageMetadata"); g != body.end())
        return geminiUsageOf(*g);
    return std::nullopt;
}

} // namespace

UsageMeter::UsageMeter(std::string_view contentType)
    : m_events(TextSanitizer::asciiLower(contentType).find("text/event-stream") != std::string::npos)
{
}

void UsageMeter::feed(std::string_view chunk)
{
    if (m_gaveUp)
        return;
    if (!m_events) {
        if (m_buffer.size() + chunk.size() > MAX_JSON_BYTES) {
            m_gaveUp = true;
            m_buffer.clear();
            m_buffer.shrink_to_fit();
            return;
        }
        m_buffer.append(chunk);
        return;
    }
    // Events: lines end in \n, \r\n or \r (the SSE grammar); a blank line ends an event.
    for (char c : chunk) {
        if (c == '\n' && m_lastCr) {
            m_lastCr = false; // the \n of a \r\n: that line already ended
            continue;
        }
        m_lastCr = false;
        if (c == '\n' || c == '\r') {
            m_lastCr = c == '\r';
            eventLine(m_buffer);
            m_buffer.clear();
            continue;
        }
        if (m_buffer.size() >= MAX_EVENT_BYTES) {
            m_gaveUp = true;
            return;
        }
        m_buffer.push_back(c);
    }
}

void UsageMeter::eventLine(std::string_view line)
{
    if (line.empty()) {
        eventDone();
        return;
    }
    if (line.rfind("data:", 0) != 0)
        return; // event:, id:, retry:, comments: not needed to find the usage
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ')
        line.remove_prefix(1);
    if (m_data.size() + line.size() + 1 > MAX_EVENT_BYTES) {
        m_gaveUp = true;
        return;
    }
    if (!m_data.empty())
        m_data.push_back('\n');
    m_data.append(line);
}

void UsageMeter::eventDone()
{
    if (m_data.empty())
        return;
    // Most events of a stream are content deltas without a usage: not parsed at all (a long
    // answer is thousands of them). An event that spelled "usage" with escapes would not be
    // metered; the estimate would stand, as for a stream that reports none.
    if (m_data.find("\"usage\"") == std::string::npos
        && m_data.find("\"usageMetadata\"") == std::string::npos) {
        m_data.clear();
        return;
    }
    const json e = json::parse(m_data, nullptr, false);
    m_data.clear();
    if (!e.is_object())
        return; // "[DONE]" and anything else that is not an object
    auto typeField = e.find("type");
    const std::string type
        = typeField != e.end() && typeField->is_string() ? typeField->get<std::string>() : std::string();
    if (type == "message_start") {
        auto m = e.find("message");
        if (m != e.end() && m->is_object()) {
            if (auto u = m->find("usage"); u != m->end())
                if (auto t = usageOf(*u))
                    m_usage = t;
        }
    } else if (type == "message_delta") {
        // Cumulative output so far; the input was given by message_start (and may be repeated).
        // Nothing countable in it: ignored (a usage of 0 would under-count the window).
        if (auto u = e.find("usage"); u != e.end() && u->is_object()) {
            const auto out = count(*u, "output_tokens");
            const auto in = count(*u, "input_tokens");
            if (!out && !(in && *in > 0))
                return;
            TokenUsage t = m_usage.value_or(TokenUsage {});
            if (out)
                t.output = *out;
            if (in && *in > 0) {
                t.uncachedInput = *in;
                t.cacheCreation = count(*u, "cache_creation_input_tokens").value_or(0);
                t.cacheRead = count(*u, "cache_read_input_tokens").value_or(0);
                t.input = t.uncachedInput + t.cacheCreation + t.cacheRead;
            }
            m_usage = t;
        }
    } else if (type.rfind("response.", 0) == 0) {
        // OpenAI Responses: the response object of response.completed (or .incomplete, .failed)
        // carries the usage; the earlier ones (response.created) have it null.
        if (auto r = e.find("response"); r != e.end() && r->is_object())
            if (auto u = r->find("usage"); u != r->end() && !u->is_null())
                if (auto t = usageOf(*u))
                    m_usage = t;
    } else if (auto u = e.find("usage"); u != e.end() && !u->is_null()) {
        if (auto t = usageOf(*u))
            m_usage = t; // OpenAI's final chunk
    } else if (auto g = e.find("usageMetadata"); g != e.end()) {
        if (auto t = geminiUsageOf(*g))
            m_usage = t; // Gemini: cumulative in every chunk, the last one is the call's
    }
}

std::optional<TokenUsage> UsageMeter::finish()
{
    if (m_gaveUp)
        return std::nullopt;
    if (m_events) {
        if (!m_buffer.empty())
            eventLine(m_buffer);
        m_buffer.clear();
        eventDone(); // a stream that ended without its blank line
        return m_usage;
    }
    const json body = json::parse(m_buffer, nullptr, false);
    m_buffer.clear();
    return answerUsage(body);
}

} // namespace tollgate
