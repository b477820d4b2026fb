#include "homewatcher.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <algorithm>
#include <sys/stat.h>
#include <utility>

namespace tollgate::ui {

namespace {

// The files whose content the dashboard shows. doorbell is left out on purpose: it changes
// through a shared mapping, which inotify never reports, and state.bin changes with it anyway.
const char* const QUOTA_FILES[] = { "state.bin", "limits.json" };
const char* const HISTORY_FILES[] = { "history.jsonl", "history.1.jsonl" };
const int PARTS[3] = { HomeWatcher::Quota, HomeWatcher::History, HomeWatcher::Locks };

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
    connect(&m_watcher, &QFileSystemWatcher::fileChanged, this,
        [this](const QString& path) { onPath(path, false); });
    connect(&m_watcher, &QFileSystemWatcher::directoryChanged, this,
        [this](const QString& path) { onPath(path, true); });
    resync();
    takeSignatures();
    m_poll.start();
}

void HomeWatcher::setLockDirs(const QStringList& lockDirs)
{
    m_lockDirs = lockDirs;
    resync();
    onEvent(Locks);
}

QStringList HomeWatcher::watchedPaths() const
{
    return m_watcher.files() + m_watcher.directories();
}

void HomeWatcher::onPath(const QString& path, bool isDir)
{
    const QString name = QFileInfo(path).fileName();
    int parts = All;
    if (!isDir) {
        parts = name.startsWith(QLatin1String("history")) ? History : Quota;
    } else if (path == m_home) {
        parts = Quota | History; // a home file created, replaced or removed
    } else if (m_lockDirs.contains(path)) {
        parts = Locks;
    }
    onEvent(parts);
}

void HomeWatcher::onEvent(int parts)
{
    m_pending |= parts;
    if (m_debounce.isActive())
        return;
    const qint64 since = m_sinceFlush.isValid() ? m_sinceFlush.elapsed() : BUSY_MS;
    m_debounce.start(static_cast<int>(std::max<qint64>(DEBOUNCE_MS, BUSY_MS - since)));
}

void HomeWatcher::flush()
{
    m_sinceFlush.start();
    resync();
    takeSignatures();
    const int parts = std::exchange(m_pending, 0);
    Q_EMIT changed(parts ? parts : All);
}

void HomeWatcher::takeSignatures()
{
    for (int i = 0; i < 3; ++i)
        m_lastSignature[i] = signature(PARTS[i]);
}

void HomeWatcher::poll()
{
    resync();
    int parts = 0;
    for (int i = 0; i < 3; ++i) {
        QByteArray now = signature(PARTS[i]);
        if (now != m_lastSignature[i]) {
            m_lastSignature[i] = std::move(now);
            parts |= PARTS[i];
        }
    }
    if (parts)
        Q_EMIT changed(parts);
}

QStringList HomeWatcher::desiredPaths() const
{
    QStringList out;
    auto addDir = [&out](const QString& dir) {
        const QString existing = nearestExisting(dir);
        if (!existing.isEmpty() && !out.contains(existing))
            out.append(existing);
    };
    if (!m_home.isEmpty()) // empty: a home that is not a directory (Redis): only lock directories
        addDir(m_home);
    if (!m_home.isEmpty() && QFileInfo(m_home).isDir()) {
        for (const auto* files : { &QUOTA_FILES, &HISTORY_FILES }) {
            for (const char* name : *files) {
                const QString file = m_home + QLatin1Char('/') + QLatin1String(name);
                if (QFileInfo::exists(file))
                    out.append(file);
            }
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

QByteArray HomeWatcher::signature(int part) const
{
    QByteArray out;
    if (m_home.isEmpty() && part != Locks)
        return out;
    if (part == Quota) {
        appendStat(out, m_home);
        for (const char* name : QUOTA_FILES)
            appendStat(out, m_home + QLatin1Char('/') + QLatin1String(name));
    } else if (part == History) {
        for (const char* name : HISTORY_FILES)
            appendStat(out, m_home + QLatin1Char('/') + QLatin1String(name));
    } else {
        // A lock directory's mtime moves whenever a lock file is created or removed in it
        // (lock files are made by link() and removed by unlink(), never written in place).
        for (const QString& dir : m_lockDirs)
            appendStat(out, dir);
    }
    return out;
}

} // namespace tollgate::ui
