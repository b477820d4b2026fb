#include "homewatcher.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <sys/stat.h>

namespace tollgate::ui {

namespace {

// The files whose content the dashboard shows. doorbell is left out on purpose: it changes
// through a shared mapping, which inotify never reports, and state.bin changes with it anyway.
const char* const HOME_FILES[] = { "state.bin", "limits.json", "history.jsonl", "history.1.jsonl" };

QString nearestExisting(QString path)
{
    while (!path.isEmpty() && !QFileInfo(path).isDir()) {
        const QString up = QFileInfo(path).path();
        if (up == path)
            break;
        path = up;
    }
    return path;
}

quint64 inodeOf(const QString& path)
{
    struct stat st
    {
    };
    const QByteArray native = QFile::encodeName(path);
    return ::stat(native.constData(), &st) == 0 ? static_cast<quint64>(st.st_ino) : 0;
}

void appendStat(QByteArray& out, const QString& path)
{
    struct stat st
    {
    };
    const QByteArray native = QFile::encodeName(path);
    if (::lstat(native.constData(), &st) != 0) {
        out += "-;";
        return;
    }
    out += QByteArray::number(static_cast<qulonglong>(st.st_ino)) + ','
        + QByteArray::number(static_cast<qlonglong>(st.st_size)) + ','
        + QByteArray::number(static_cast<qlonglong>(st.st_mtim.tv_sec)) + '.'
        + QByteArray::number(static_cast<qlonglong>(st.st_mtim.tv_nsec)) + ';';
}

} // namespace

HomeWatcher::HomeWatcher(QString home, QStringList lockDirs, Mode mode, QObject* parent)
    : QObject(parent)
    , m_home(std::move(home))
    , m_lockDirs(std::move(lockDirs))
    , m_mode(mode)
    , m_watcher(this)
    , m_debounce(this)
    , m_poll(this)
{
    m_debounce.setSingleShot(true);
    m_debounce.setInterval(DEBOUNCE_MS);
    connect(&m_debounce, &QTimer::timeout, this, &HomeWatcher::flush);
    m_poll.setInterval(POLL_MS);
    connect(&m_poll, &QTimer::timeout, this, &HomeWatcher::poll);
    connect(&m_watcher, &QFileSystemWatcher::fileChanged, this, &HomeWatcher::onEvent);
    connect(&m_watcher, &QFileSystemWatcher::directoryChanged, this, &HomeWatcher::onEvent);
    resync();
    m_lastSignature = signature();
    m_poll.start();
}

void HomeWatcher::setLockDirs(const QStringList& lockDirs)
{
    m_lockDirs = lockDirs;
    resync();
    onEvent();
}

QStringList HomeWatcher::watchedPaths() const
{
    return m_watcher.files() + m_watcher.directories();
}

void HomeWatcher::onEvent()
{
    if (!m_debounce.isActive())
        m_debounce.start();
}

void HomeWatcher::flush()
{
    resync();
    m_lastSignature = signature();
    Q_EMIT changed();
}

void HomeWatcher::poll()
{
    resync();
    QByteArray now = signature();
    if (now != m_lastSignature) {
        m_lastSignature = std::move(now);
        Q_EMIT changed();
    }
}

QStringList HomeWatcher::desiredPaths() const
{
    QStringList out;
    auto addDir = [&out](const QString& dir) {
        const QString existing = nearestExisting(dir);
        if (!existing.isEmpty() && !out.contains(existing))
            out.append(existing);
    };
    addDir(m_home);
    if (QFileInfo(m_home).isDir()) {
        for (const char* name : HOME_FILES) {
            const QString file = m_home + QLatin1Char('/') + QLatin1String(name);
            if (QFileInfo::exists(file))
                out.append(file);
        }
    }
    for (const QString& dir : m_lockDirs)
        addDir(dir);
    return out;
}

void HomeWatcher::resync()
{
    if (m_mode == Mode::PollOnly)
        return;
    const QStringList want = desiredPaths();
    QStringList have = watchedPaths();
    QStringList stale;
    for (const QString& p : have) {
        if (!want.contains(p) || inodeOf(p) != m_watchedInode.value(p))
            stale.append(p);
    }
    if (!stale.isEmpty()) {
        m_watcher.removePaths(stale);
        for (const QString& p : stale) {
            have.removeAll(p);
            m_watchedInode.remove(p);
        }
    }
    QStringList missing;
    for (const QString& p : want) {
        if (!have.contains(p))
            missing.append(p);
    }
    if (!missing.isEmpty()) {
        for (const QString& p : missing)
            m_watchedInode.insert(p, inodeOf(p));
        m_watcher.addPaths(missing);
    }
}

QByteArray HomeWatcher::signature() const
{
    QByteArray out;
    appendStat(out, m_home);
    for (const char* name : HOME_FILES)
        appendStat(out, m_home + QLatin1Char('/') + QLatin1String(name));
    // A lock directory's mtime moves whenever a lock file is created or removed in it.
    for (const QString& dir : m_lockDirs)
        appendStat(out, dir);
    return out;
}

} // namespace tollgate::ui
