#include "autostart.h"

#include "system/fd.h"

#include <QCoreApplication>
#include <QDir>
#include <cerrno>
#include <fcntl.h>
#include <string_view>
#include <unistd.h>

namespace tollgate::ui {

namespace {

constexpr int TEMP_ATTEMPTS = 16;

QString fileName()
{
    return QString::fromLatin1(Autostart::APP_ID) + QStringLiteral(".desktop");
}

bool hasControlBytes(const QString& s)
{
    for (const QChar c : s) {
        if (c.unicode() < 0x20 || c.unicode() == 0x7f)
            return true;
    }
    return false;
}

// The line that marks an entry as written by Tollgate: only such an entry is replaced or
// removed. One the user (or a desktop tool) put there is theirs.
constexpr std::string_view OWNER_LINE = "X-Tollgate-Autostart=true";
// Larger than any entry of ours; a bigger file is someone else's and is not read whole.
constexpr std::size_t MAX_ENTRY_BYTES = 64 * 1024;

// Whether the regular file `name` in `dir` is an entry Tollgate wrote (has OWNER_LINE as a
// line of its own). Opened without following links or blocking on a FIFO.
Result<bool> writtenByTollgate(const Fd& dir, const std::string& name)
{
    auto fd = Fd::openRegularAt(dir, name, O_RDONLY);
    if (!fd)
        return fd.error();
    auto text = fd->readAll(MAX_ENTRY_BYTES);
    if (!text)
        return text.error().kind == ErrorKind::Corrupt ? Result<bool>(false) : Result<bool>(text.error());
    const std::string lines = "\n" + *text;
    const std::string needle = "\n" + std::string(OWNER_LINE);
    for (std::size_t at = lines.find(needle); at != std::string::npos; at = lines.find(needle, at + 1)) {
        const std::size_t end = at + needle.size();
        if (end == lines.size() || lines[end] == '\n' || lines[end] == '\r')
            return true;
    }
    return false;
}

Error notOurs(const std::string& target)
{
    return Error::make(ErrorKind::Permission, target,
        "was not written by Tollgate (it has no " + std::string(OWNER_LINE)
            + " line); leaving it alone: remove it yourself to let Tollgate manage the entry");
}

// A "string" value of a desktop entry: only the backslash needs escaping once control bytes
// are refused.
QString escapeString(QString s)
{
    return s.replace(QLatin1Char('\\'), QStringLiteral("\\\\"));
}

} // namespace

Autostart::Autostart(QString configHome, QString execPath)
    : m_configHome(std::move(configHome))
    , m_execPath(std::move(execPath))
{
    if (m_configHome.isEmpty())
        m_configHome = qEnvironmentVariable("XDG_CONFIG_HOME");
    // The spec: a relative XDG_CONFIG_HOME is invalid and must be ignored.
    if (m_configHome.isEmpty() || QDir::isRelativePath(m_configHome))
        m_configHome = QDir::homePath() + QStringLiteral("/.config");
    if (m_execPath.isEmpty())
        m_execPath = QCoreApplication::applicationFilePath();
}

QString Autostart::entryPath() const
{
    return m_configHome + QStringLiteral("/autostart/") + fileName();
}

bool Autostart::isEnabled() const
{
    struct stat st
    {
    };
    return ::lstat(QFile::encodeName(entryPath()).constData(), &st) == 0 && S_ISREG(st.st_mode);
}

QString Autostart::quoteExecArgument(const QString& arg)
{
    static const QString RESERVED = QStringLiteral(" \t\n\"'\\><~|&;$*?#()`");
    QString out;
    bool quote = arg.isEmpty();
    for (const QChar c : arg) {
        if (RESERVED.contains(c))
            quote = true;
        if (c == QLatin1Char('"') || c == QLatin1Char('`') || c == QLatin1Char('$') || c == QLatin1Char('\\'))
            out += QLatin1Char('\\');
        if (c == QLatin1Char('%'))
            out += QLatin1Char('%'); // a literal percent sign is "%%" (field codes use %)
        out += c;
    }
    // The Exec value is itself a string value, whose own escaping doubles each backslash.
    out = escapeString(out);
    return quote ? QLatin1Char('"') + out + QLatin1Char('"') : out;
}

Result<QByteArray> Autostart::entryText() const
{
    if (m_execPath.isEmpty() || QDir::isRelativePath(m_execPath) || hasControlBytes(m_execPath))
        return Error::make(ErrorKind::Usage, m_execPath.toStdString(),
            "cannot name this program in an autostart entry (not an absolute path without control bytes)");
    QString text;
    text += QStringLiteral("[Desktop Entry]\n");
    text += QStringLiteral("Type=Application\n");
    text += QStringLiteral("Name=Tollgate Dashboard\n");
    text += QStringLiteral("Comment=Watch and steer the API quota your processes share\n");
    text += QStringLiteral("Exec=") + quoteExecArgument(m_execPath) + QLatin1Char('\n');
    // Once the program is gone (uninstalled), the session skips the entry quietly.
    text += QStringLiteral("TryExec=") + escapeString(m_execPath) + QLatin1Char('\n');
    text += QStringLiteral("Icon=") + QString::fromLatin1(APP_ID) + QLatin1Char('\n');
    text += QStringLiteral("Terminal=false\n");
    text += QStringLiteral("X-GNOME-Autostart-enabled=true\n");
    text += QString::fromLatin1(OWNER_LINE.data(), static_cast<qsizetype>(OWNER_LINE.size()))
        + QLatin1Char('\n');
    return text.toUtf8();
}

Result<void> Autostart::enable() const
{
    auto text = entryText();
    if (!text)
        return text.error();
    const QString dirPath = m_configHome + QStringLiteral("/autostart");
    if (!QDir().mkpath(dirPath))
        return Error::make(ErrorKind::Io, dirPath.toStdString(), "cannot create the autostart folder");
    auto dir = Fd::open(QFile::encodeName(dirPath).toStdString(), O_RDONLY | O_DIRECTORY);
    if (!dir)
        return dir.error();
    const std::string name = QFile::encodeName(fileName()).toStdString();
    const std::string target = dir->path() + "/" + name;

    struct stat st
    {
    };
    if (::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISREG(st.st_mode))
            return Error::make(ErrorKind::Permission, target,
                std::string("is ") + Fd::fileTypeName(st.st_mode) + ", not a regular file; leaving it alone");
        auto ours = writtenByTollgate(*dir, name);
        if (!ours)
            return ours.error();
        if (!*ours)
            return notOurs(target);
    }

    std::string tempName;
    Result<Fd> temp = Error::make(ErrorKind::Io, target, "no temp file");
    for (int i = 0; i < TEMP_ATTEMPTS; ++i) {
        tempName = "." + name + "." + std::to_string(::getpid()) + "." + std::to_string(i);
        temp = Fd::openAt(*dir, tempName, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (temp || temp.error().sysErrno != EEXIST)
            break;
    }
    if (!temp)
        return temp.error();
    auto cleanup = [&] { (void)::unlinkat(dir->get(), tempName.c_str(), 0); };
    if (::fchmod(temp->get(), 0644) != 0) {
        const int err = errno;
        cleanup();
        return Error::fromErrno(err, temp->path(), "cannot set the mode of");
    }
    if (auto w = temp->writeAll(std::string_view(text->constData(), static_cast<size_t>(text->size()))); !w) {
        cleanup();
        return w.error();
    }
    if (auto s = temp->syncData(); !s) {
        cleanup();
        return s.error();
    }
    temp->reset();
    // Checked again just before the rename: rename() would replace a symlink or FIFO planted
    // meanwhile (harmlessly, never following it), but that is still not ours to replace.
    if (::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
        cleanup();
        return Error::make(ErrorKind::Permission, target,
            std::string("is ") + Fd::fileTypeName(st.st_mode) + ", not a regular file; leaving it alone");
    }
    if (::renameat(dir->get(), tempName.c_str(), dir->get(), name.c_str()) != 0) {
        const int err = errno;
        cleanup();
        return Error::fromErrno(err, target, "cannot replace");
    }
    (void)::fsync(dir->get()); // the rename itself survives a crash
    return {};
}

Result<void> Autostart::disable() const
{
    const QString dirPath = m_configHome + QStringLiteral("/autostart");
    auto dir = Fd::open(QFile::encodeName(dirPath).toStdString(), O_RDONLY | O_DIRECTORY);
    if (!dir)
        return dir.error().sysErrno == ENOENT ? Result<void>() : Result<void>(dir.error());
    const std::string name = QFile::encodeName(fileName()).toStdString();
    const std::string target = dir->path() + "/" + name;
    struct stat st
    {
    };
    if (::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? Result<void>()
                               : Result<void>(Error::fromErrno(errno, target, "cannot inspect"));
    if (!S_ISREG(st.st_mode))
        return Error::make(ErrorKind::Permission, target,
            std::string("is ") + Fd::fileTypeName(st.st_mode) + ", not a regular file; leaving it alone");
    auto ours = writtenByTollgate(*dir, name);
    if (!ours)
        return ours.error();
    if (!*ours)
        return notOurs(target);
    if (::unlinkat(dir->get(), name.c_str(), 0) != 0 && errno != ENOENT)
        return Error::fromErrno(errno, target, "cannot remove");
    return {};
}

} // namespace tollgate::ui
