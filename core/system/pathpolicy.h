#pragma once

// PathPolicy: what a path given on the command line may look like. A path with a ".."
// component or a NUL byte is refused outright (as the peer tools do), so a tag or config value
// smuggled into a path cannot walk out of the directory the user meant.

#include "base/result.h"

#include <string>
#include <string_view>

namespace tollgate {

class PathPolicy
{
public:
    [[nodiscard]] static Result<std::string> validate(std::string_view path);
    // Directory part of a path ("." when it has none).
    [[nodiscard]] static std::string dirName(const std::string& path);
    [[nodiscard]] static std::string baseName(const std::string& path);
};

} // namespace tollgate
