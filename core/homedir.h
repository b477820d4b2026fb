#pragma once

// HomeDir: where the shared-quota files live, and the checks that make it safe to trust.
// Resolution: --home DIR, else $TOLLGATE_HOME, else $XDG_STATE_HOME/tollgate, else
// ~/.local/state/tollgate. Created 0700. A home owned by another user, writable by group or
// others, or that is a symbolic link is refused: anyone who can write there can forge state.

#include "result.h"

#include <optional>
#include <string>

namespace tollgate {

class HomeDir {
public:
    [[nodiscard]] static Result<std::string> resolve(const std::optional<std::string>& explicitDir);
    // Creates the directory (and missing parents, 0700) if needed, then checks it.
    [[nodiscard]] static Result<void> ensure(const std::string& dir);
    // Checks an existing directory without creating anything (for observers).
    [[nodiscard]] static Result<void> check(const std::string& dir);
};

} // namespace tollgate
