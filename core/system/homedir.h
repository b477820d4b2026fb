#pragma once

// HomeDir: where the shared-quota files live, and the checks that make it safe to trust.
// Which home a command uses is HomeSpec's business (store/homespec.h). Created 0700. A home owned by another user, writable by group or
// others, or that is a symbolic link is refused: anyone who can write there can forge state.
//
// The home is opened ONCE (O_DIRECTORY|O_NOFOLLOW) and the checks are made on that
// descriptor; every file inside is then reached relative to it (openat, renameat, linkat,
// unlinkat). Checking a path and then opening files by their full path lets a user who can
// write the home's *parent* swap the home for a symbolic link in between, so that we read
// their files or create ours in their directory. A descriptor cannot be swapped.

#include "base/result.h"
#include "system/fd.h"

#include <optional>
#include <string>

namespace tollgate {

class HomeDir
{
public:
    // What open() may create when the home is missing.
    enum class Create {
        Nothing, // a missing home is ErrorKind::NotFound
        // The home alone: its parent must exist, else ErrorKind::NotFound naming the parent.
        // For a home the user typed (--home, TOLLGATE_HOME): a typo must not grow a tree.
        Home,
        WithParents, // the home and any missing parents (the default home, ~/.local/state/tollgate)
    };

    // Opens the home and verifies the descriptor: a directory (not a symbolic link), owned
    // by the effective user, not writable by group or others. What is missing is created
    // 0700 first as `create` allows; with Create::Nothing nothing is ever created.
    [[nodiscard]] static Result<Fd> open(const std::string& dir, Create create);
    // open(dir, create ? Create::WithParents : Create::Nothing).
    [[nodiscard]] static Result<Fd> open(const std::string& dir, bool create);
    // open(dir, true), discarding the descriptor.
    [[nodiscard]] static Result<void> ensure(const std::string& dir);
    // open(dir, false), discarding the descriptor: for observers; creates nothing.
    [[nodiscard]] static Result<void> check(const std::string& dir);

    // Opens a file of the home: never blocks (a FIFO or device planted there is refused, see
    // Fd::openRegularAt) and the file must be a regular file owned by the effective user and
    // not writable by group or others (checkFile). Errors name the file.
    [[nodiscard]] static Result<Fd> openFile(
        const Fd& home, const std::string& name, int flags, mode_t mode = 0600);
    // As openFile, but a missing file is nullopt instead of an error. Never creates.
    [[nodiscard]] static Result<std::optional<Fd>> openIfThere(
        const Fd& home, const std::string& name, int flags);
    [[nodiscard]] static Result<void> checkFile(const Fd& fd);
    // Checks a name in the home without opening it (fstatat, no follow): absent (false) or a
    // file openFile would accept (true); anything else is an error naming it.
    [[nodiscard]] static Result<bool> checkEntry(const Fd& home, const std::string& name);
    // fsync of the directory, so renames and creations in it survive a power loss.
    [[nodiscard]] static Result<void> sync(const Fd& home);
};

} // namespace tollgate
