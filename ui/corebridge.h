#pragma once

// Small bridges between core's types and Qt's, shared by the dashboard's models and its
// observer and actions: core's strings are UTF-8 std::string, Qt's are QString; a lock or state
// file's identity is its inode as lstat gives it (a symlink's own, never its target's), so a
// file replaced under the same name is told apart.

#include <QFile>
#include <QString>
#include <string>
#include <sys/stat.h>

namespace tollgate::ui {

inline QString qs(const std::string& s)
{
    return QString::fromStdString(s);
}

inline std::string ss(const QString& s)
{
    return s.toStdString();
}

// 0 when the path names nothing (or cannot be looked at).
inline quint64 inodeOf(const QString& path)
{
    struct stat st
    {
    };
    const QByteArray native = QFile::encodeName(path);
    return ::lstat(native.constData(), &st) == 0 ? static_cast<quint64>(st.st_ino) : 0;
}

} // namespace tollgate::ui
