#pragma once

// SecretFile: a password or token kept in a file rather than on the command line (where `ps`
// shows it to every user). The file must be a regular file (a FIFO is refused without
// blocking), owned by the effective user and neither readable nor writable by anyone else
// (mode 0600 or stricter): a secret others could read is no secret, and one others could
// write is theirs. Its text, less a trailing newline, must not be empty.

#include "base/result.h"

#include <cstddef>
#include <string>

namespace tollgate {

class SecretFile
{
public:
    // `what` names the secret in errors ("the Redis password file (TOLLGATE_REDIS_PASSWORD_FILE)").
    [[nodiscard]] static Result<std::string> read(
        const std::string& path, const std::string& what, std::size_t maxBytes);
};

} // namespace tollgate
