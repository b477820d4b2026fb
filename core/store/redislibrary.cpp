#include "store/redislibrary.h"

#include <openssl/sha.h>

namespace tollgate {

RedisLibrary::RedisLibrary(std::string text)
    : m_text(std::move(text))
    , m_sha(shaOf(m_text))
    , m_functionName("tollgate_" + m_sha.substr(0, 16))
{
}

std::string RedisLibrary::shaOf(const std::string& text)
{
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
    static constexpr char HEX[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * SHA_DIGEST_LENGTH);
    for (unsigned char c : digest) {
        out += HEX[c >> 4];
        out += HEX[c & 15];
    }
    return out;
}

} // namespace tollgate
