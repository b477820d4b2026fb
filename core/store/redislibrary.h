#pragma once

// RedisLibrary: a script's text with the names Redis knows it by — its SHA1 (EVALSHA) and the
// name of its function library (FCALL, "tollgate_" and 16 hex digits of that SHA1, so versions
// side by side never clash) — computed once. Tollgate's script is ~110 KB: hashing it, or
// even comparing it with a known text, on every call cost a fifth of a client's CPU per
// acquire; the backend keeps one RedisLibrary for the life of the process instead.

#include <string>

namespace tollgate {

class RedisLibrary
{
public:
    explicit RedisLibrary(std::string text);

    [[nodiscard]] const std::string& text() const { return m_text; }
    [[nodiscard]] const std::string& sha() const { return m_sha; }
    [[nodiscard]] const std::string& functionName() const { return m_functionName; }

    // The SHA1 Redis names a script by, in lowercase hex.
    [[nodiscard]] static std::string shaOf(const std::string& text);

private:
    std::string m_text;
    std::string m_sha;
    std::string m_functionName;
};

} // namespace tollgate
