#pragma once

// TopLevelFields: the members of a request body's top-level JSON object that admission needs
// (`model`, the output bound — `max_tokens` (Anthropic, OpenAI Chat Completions),
// `max_completion_tokens` (OpenAI Chat Completions), `max_output_tokens` (OpenAI Responses),
// `generationConfig.maxOutputTokens` (Gemini, one level down) — and `stream`), read by nlohmann's SAX parser
// as the body's bytes come, so that the proxy can admit a request before the whole body has
// arrived (the SDKs write `model` and `max_tokens` first; the messages follow).
//
// A body that names one of them twice is refused (repeated()): providers' parsers keep one of
// the two, and which one is theirs to choose, so admission could be made for one value while
// the call is made with the other. For the same reason, once known() an output bound that
// comes later under the other name counts as a repeat.
// Nothing but those members is kept. nlohmann's lexer, though, keeps each token whole (and the
// raw text since the last string or number): a body read as it streams goes through JsonSkim
// first, which bounds that whatever the body.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tollgate {

class TopLevelFields final : public nlohmann::json_sax<nlohmann::json>
{
public:
    // The model and an output bound were seen: the admission cannot change any more (a
    // later repeat of either is refused, not taken).
    [[nodiscard]] bool known() const { return m_model.has_value() && m_outputBoundSeen; }
    // Non-empty: the member named twice (the parse stopped there).
    [[nodiscard]] const std::string& repeated() const { return m_repeated; }
    // The body was one whole JSON object, nothing after it (only once the parse ended).
    [[nodiscard]] bool wholeObject() const { return m_ended && !m_failed && m_topIsObject; }
    // The body's top-level value is an object (as far as it was parsed).
    [[nodiscard]] bool object() const { return m_topIsObject; }

    // The members as found (a member of another type than expected is left out).
    [[nodiscard]] const std::optional<std::string>& model() const { return m_model; }
    [[nodiscard]] std::optional<bool> stream() const { return m_stream; }
    // max_completion_tokens when both are there (as OpenAI reads them), else max_tokens, else
    // max_output_tokens (Responses), else generationConfig.maxOutputTokens (Gemini).
    [[nodiscard]] std::optional<std::int64_t> maxOutputTokens() const
    {
        return m_maxCompletionTokens ? m_maxCompletionTokens
            : m_maxTokens            ? m_maxTokens
            : m_maxOutputTokens      ? m_maxOutputTokens
                                     : m_geminiMaxOutputTokens;
    }

    bool null() override;
    bool boolean(bool value) override;
    bool number_integer(number_integer_t value) override;
    bool number_unsigned(number_unsigned_t value) override;
    bool number_float(number_float_t value, const string_t& text) override;
    bool string(string_t& value) override;
    bool binary(binary_t& value) override;
    bool start_object(std::size_t elements) override;
    bool key(string_t& name) override;
    bool end_object() override;
    bool start_array(std::size_t elements) override;
    bool end_array() override;
    bool parse_error(
        std::size_t position, const std::string& token, const nlohmann::detail::exception& e) override;

private:
    enum class Member {
        Other,
        Model,
        MaxTokens,
        MaxCompletionTokens,
        Stream,
        MaxOutputTokens,
        GenerationConfig,
        GeminiMaxOutputTokens, // generationConfig.maxOutputTokens
        Count
    };
    // A value at the top level of the object, for the member named last.
    [[nodiscard]] bool atTop() const { return m_depth == 1 && m_topIsObject; }
    // A value directly inside the top-level generationConfig object.
    [[nodiscard]] bool inGenerationConfig() const { return m_depth == 2 && m_generationConfigDepth == 2; }
    [[nodiscard]] static bool isBound(Member m)
    {
        return m == Member::MaxTokens || m == Member::MaxCompletionTokens || m == Member::MaxOutputTokens
            || m == Member::GeminiMaxOutputTokens;
    }
    void integer(std::optional<std::int64_t> value);
    void endContainer();

    int m_depth = 0;
    bool m_topIsObject = false;
    bool m_ended = false;
    bool m_failed = false;
    Member m_member = Member::Other;
    Member m_innerMember = Member::Other; // the member named last inside generationConfig
    int m_generationConfigDepth = 0; // 2 while inside the top-level generationConfig object
    bool m_seen[static_cast<int>(Member::Count)] = {};
    bool m_outputBoundSeen = false;
    std::string m_repeated;
    std::optional<std::string> m_model;
    std::optional<bool> m_stream;
    std::optional<std::int64_t> m_maxTokens;
    std::optional<std::int64_t> m_maxCompletionTokens;
    std::optional<std::int64_t> m_maxOutputTokens;
    std::optional<std::int64_t> m_geminiMaxOutputTokens;
};

// JsonSkim: a body's JSON text cut down to what TopLevelFields reads, for nlohmann's SAX parser,
// so that what its lexer holds is bounded whatever the body (it keeps each token whole, and
// every raw byte since the last string, number or literal began: a 1 GiB string took 2 GiB
// twice over, and so would 1 GiB of `[],`). Byte by byte, as the body comes:
// - the contents of every container are dropped except those of the top-level object and of
//   an object directly in it (`generationConfig`, `metadata`): `"messages":[...]` is passed on
//   as `"messages":[]`, `"generationConfig":{"maxOutputTokens":8,"x":{...}}` as
//   `"generationConfig":{"maxOutputTokens":8,"x":{}}`. What TopLevelFields reads is all at
//   those two levels, and every value there follows a key, which starts a new token;
// - a string passed on is cut after MAX_STRING bytes (never inside an escape or a UTF-8
//   sequence): a member's name or `model` that long is none TopLevelFields looks for anyway;
// - a run of whitespace is passed on as its first byte;
// - a number (or literal) longer than MAX_BARE at those levels makes it give up (gaveUp()):
//   it passes nothing more, so the parse ends there. No request needs one; cutting it would
//   change its value (an output bound), so the proxy refuses such a body (docs/PROXY.md).
// What is dropped is not checked for JSON syntax (strings and brackets are followed, escapes
// included, to find where each ends): for a valid body the parser sees the same members at the
// levels it reads; a body that is invalid only where it was dropped is one the provider
// refuses, so the proxy's reading of it cannot make the provider act on anything.
class JsonSkim final
{
public:
    static constexpr std::size_t MAX_STRING = 4096;
    static constexpr std::size_t MAX_BARE = 4096;

    // Skims the next `n` bytes of the body into `out` (room for `n`; never more is written):
    // how many bytes were written.
    std::size_t skim(const char* in, std::size_t n, char* out);
    // A number or literal longer than MAX_BARE at a level it passes on: nothing more passes.
    [[nodiscard]] bool gaveUp() const { return m_gaveUp; }

private:
    enum class In { Between, String, Escape, Unicode };
    [[nodiscard]] bool passing() const { return m_droppingFrom == 0; }
    // One byte outside any string; false: it gave up.
    bool between(char c, char*& out);
    void inString(char c, char*& out);

    std::size_t m_depth = 0; // containers open in the body
    std::size_t m_droppingFrom = 0; // 0: passing on; else the depth whose container's contents are dropped
    In m_in = In::Between;
    int m_hexLeft = 0; // of a \uXXXX escape
    std::size_t m_stringBytes = 0; // of the string being passed on
    bool m_cut = false; // the rest of this string is dropped
    std::size_t m_bare = 0; // bytes of the number or literal being passed on
    bool m_space = false; // the last byte passed on was whitespace outside strings
    bool m_gaveUp = false;
};

} // namespace tollgate
