#pragma once

// Autostart: the dashboard's entry in the session's autostart folder,
// $XDG_CONFIG_HOME/autostart/io.github.tollgate.Dashboard.desktop (XDG_CONFIG_HOME defaults
// to ~/.config), which desktops following the XDG Autostart spec run at login.
//
// Invariants: the entry is replaced atomically (a temp file in the same folder, fsync'd, then
// renamed over it), so a crash leaves the old entry or the new one, never half of one, plus
// at most a stray ".<id>.desktop.*" temp file. It is mode 0644 whatever the umask. A symlink,
// FIFO or anything else that is not a regular file at the entry's path is refused, never
// followed, replaced or removed: it is not ours (the autostart folder itself may be a link,
// as dotfile managers make them). Nor is a regular file without the line
// "X-Tollgate-Autostart=true" that every entry of ours carries (one the user wrote, or a
// desktop's settings tool copied there): enable() and disable() refuse to replace or remove
// it and say so, rather than overwrite someone's entry silently. Exec names the executable that created the
// entry (the installed tollgate-dashboard when run from an install; `cmake --install
// --prefix` decides the path only at install time, so no compile-time path would be right),
// quoted by the Desktop Entry rules; a path with control bytes is refused (a newline would
// add keys to the entry).

#include "base/result.h"

#include <QString>

namespace tollgate::ui {

class Autostart
{
public:
    static constexpr const char* APP_ID = "io.github.tollgate.Dashboard";

    // configHome: empty means $XDG_CONFIG_HOME, else ~/.config. execPath: empty means the
    // running program (QCoreApplication::applicationFilePath()).
    explicit Autostart(QString configHome = {}, QString execPath = {});

    [[nodiscard]] QString entryPath() const;
    [[nodiscard]] QString execPath() const { return m_execPath; }
    // True when a regular file is at entryPath().
    [[nodiscard]] bool isEnabled() const;

    [[nodiscard]] Result<void> enable() const;
    [[nodiscard]] Result<void> disable() const;
    [[nodiscard]] Result<void> setEnabled(bool on) const { return on ? enable() : disable(); }

    // The entry's text for execPath (exposed for tests); an error for a path it cannot quote.
    [[nodiscard]] Result<QByteArray> entryText() const;
    // One Exec argument quoted per the Desktop Entry spec (exposed for tests).
    [[nodiscard]] static QString quoteExecArgument(const QString& arg);

private:
    QString m_configHome;
    QString m_execPath;
};

} // namespace tollgate::ui
