#include "provider/toplevelfields.h"

#include <cmath>
#include <limits>

namespace tollgate {

bool TopLevelFields::null()
{
    return true;
}

bool TopLevelFields::boolean(bool value)
{
    if (atTop() && m_member == Member::Stream)
        m_stream = value;
    return true;
}

void TopLevelFields::integer(std::optional<std::int64_t> value)
{
    if (!value)
        return;
    if (inGenerationConfig()) {
        if (m_innerMember == Member::GeminiMaxOutputTokens)
            m_geminiMaxOutputTokens = value;
        return;
    }
    if (!atTop())
        return;
    if (m_member == Member::MaxTokens)
        m_maxTokens = value;
    else if (m_member == Member::MaxCompletionTokens)
        m_maxCompletionTokens = value;
    else if (m_member == Member::MaxOutputTokens)
        m_maxOutputTokens = value;
}

bool TopLevelFields::number_integer(number_integer_t value)
{
    integer(value);
    return true;
}

bool TopLevelFields::number_unsigned(number_unsigned_t value)
{
    // Past the largest int64: the largest, so an output bound beyond every count counts as the
    // largest (RequestEstimate caps it), never as none (the small default).
    integer(static_cast<std::int64_t>(
        std::min<number_unsigned_t>(value, static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max()))));
    return true;
}

bool TopLevelFields::number_float(number_float_t value, const string_t&)
{
    // 1e5 or 100000.0 for an output bound: a provider that takes it may spend that many, so it
    // counts (rounded up), not the default; 1e300 (or inf) as the largest. A negative or NaN
    // one is no bound a provider takes: none.
    if (std::isnan(value) || value < 0)
        integer(std::nullopt);
    else
        integer(value < 9.0e18 ? static_cast<std::int64_t>(std::ceil(value)) : std::numeric_limits<std::int64_t>::max());
    return true;
}

bool TopLevelFields::string(string_t& value)
{
    if (atTop() && m_member == Member::Model)
        m_model = std::move(value);
    return true;
}

bool TopLevelFields::binary(binary_t&)
{
    return true;
}

bool TopLevelFields::start_object(std::size_t)
{
    if (m_depth == 0)
        m_topIsObject = true;
    else if (atTop() && m_member == Member::GenerationConfig)
        m_generationConfigDepth = 2;
    ++m_depth;
    return true;
}

bool TopLevelFields::key(string_t& name)
{
    if (inGenerationConfig()) {
        m_innerMember = name == "maxOutputTokens" ? Member::GeminiMaxOutputTokens : Member::Other;
        if (m_innerMember == Member::Other)
            return true;
        bool& seen = m_seen[static_cast<int>(m_innerMember)];
        if (seen || known()) {
            m_repeated = "generationConfig.maxOutputTokens";
            return false;
        }
        seen = true;
        m_outputBoundSeen = true;
        return true;
    }
    if (m_depth != 1)
        return true;
    m_member = name == "model"            ? Member::Model
        : name == "max_tokens"            ? Member::MaxTokens
        : name == "max_completion_tokens" ? Member::MaxCompletionTokens
        : name == "max_output_tokens"     ? Member::MaxOutputTokens
        : name == "stream"                ? Member::Stream
        : name == "generationConfig"      ? Member::GenerationConfig
                                          : Member::Other;
    if (m_member == Member::Other)
        return true;
    const bool bound = isBound(m_member);
    bool& seen = m_seen[static_cast<int>(m_member)];
    // The other name of the output bound after admission could have been made without it.
    if (seen || (bound && known())) {
        m_repeated = name;
        return false; // stops the parse
    }
    seen = true;
    m_outputBoundSeen = m_outputBoundSeen || bound;
    return true;
}

void TopLevelFields::endContainer()
{
    if (m_depth == m_generationConfigDepth)
        m_generationConfigDepth = 0; // generationConfig's object (or a value in it) ended
    if (--m_depth == 0)
        m_ended = true;
}

bool TopLevelFields::end_object()
{
    endContainer();
    return true;
}

bool TopLevelFields::start_array(std::size_t)
{
    ++m_depth;
    return true;
}

bool TopLevelFields::end_array()
{
    endContainer();
    return true;
}

bool TopLevelFields::parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&)
{
    m_failed = true;
    return false;
}

} // namespace tollgate

namespace tollgate {

std::size_t JsonSkim::skim(const char* in, std::size_t n, char* out)
{
    char* const start = out;
    for (std::size_t i = 0; i < n && !m_gaveUp; ++i) {
        if (m_in == In::Between) {
            if (!between(in[i], out))
                break;
        } else {
            inString(in[i], out);
        }
    }
    return static_cast<std::size_t>(out - start);
}

bool JsonSkim::between(char c, char*& out)
{
    const bool pass = passing();
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        m_bare = 0;
        if (pass && !m_space)
            *out++ = c;
        m_space = pass;
        return true;
    }
    m_space = false;
    switch (c) {
    case '"':
        m_bare = 0;
        m_in = In::String;
        m_stringBytes = 0;
        m_cut = false;
        if (pass)
            *out++ = c;
        return true;
    case '{':
    case '[':
        m_bare = 0;
        ++m_depth;
        if (pass) {
            *out++ = c;
            // Kept: the top-level object (depth 1) and an object in it (2); else dropped.
            if (c != '{' || m_depth > 2)
                m_droppingFrom = m_depth;
        }
        return true;
    case '}':
    case ']':
        m_bare = 0;
        if (m_depth == m_droppingFrom)
            m_droppingFrom = 0; // its end is passed on
        if (m_depth > 0)
            --m_depth;
        if (passing())
            *out++ = c;
        return true;
    case ',':
    case ':':
        m_bare = 0;
        if (pass)
            *out++ = c;
        return true;
    default:
        if (!pass)
            return true;
        if (++m_bare > MAX_BARE) {
            m_gaveUp = true;
            return false;
        }
        *out++ = c;
        return true;
    }
}

void JsonSkim::inString(char c, char*& out)
{
    const bool pass = passing();
    switch (m_in) {
    case In::String:
        if (c == '"') {
            m_in = In::Between;
            if (pass)
                *out++ = c; // a cut string ends here too
            return;
        }
        // Cut before a byte that starts a character (not a UTF-8 continuation byte), so what
        // is passed on ends after a whole one.
        if (pass && !m_cut && m_stringBytes >= MAX_STRING && (static_cast<unsigned char>(c) & 0xC0) != 0x80)
            m_cut = true;
        if (c == '\\')
            m_in = In::Escape;
        break;
    case In::Escape:
        m_in = c == 'u' ? In::Unicode : In::String;
        m_hexLeft = 4;
        break;
    case In::Unicode:
        if (--m_hexLeft == 0)
            m_in = In::String;
        break;
    case In::Between:
        break;
    }
    if (pass && !m_cut) {
        *out++ = c;
        ++m_stringBytes;
    }
}

} // namespace tollgate
