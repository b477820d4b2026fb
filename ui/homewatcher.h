#pragma once

// HomeWatcher: notices every external change to the Tollgate home and the lock directories.
//
// Invariants:
// - It watches directories *and* the files in them: a directory watch alone misses in-place
//   writes (state.bin is rewritten in place), a file watch alone is lost when the file is
//   replaced by rename or deleted. After every event the watch list is re-synced, so a file
//   that was renamed over, deleted and re-created, or a home that appears later is watched
//   again.
// - A path that does not exist yet is covered by watching its nearest existing ancestor.
// - Events are throttled, not just debounced: the first event starts a single-shot timer that
//   later events do not restart, so a busy home still reports at least every BUSY_MS. The
//   first event after a quiet spell is reported after DEBOUNCE_MS; while events keep coming
//   (100 admissions/s) reports are spaced BUSY_MS apart, so the readers behind them run a
//   few times a second, not once per write.
// - A slow poll of (inode, size, mtime) signatures catches whatever inotify misses (a full
//   watch table, network filesystems). Nothing here reads file contents.
// - Every report says which parts moved (Quota: state.bin, limits.json; History: the history
//   files; Locks: the lock directories), so a history append never costs a lock-directory
//   scan. A change that cannot be attributed (an ancestor directory, a re-sync) reports All.

#include <QElapsedTimer>
#include <QFileSystemWatcher>
#include <QHash>
#include <QObject>
#include <QStringList>
#include <QTimer>

namespace tollgate::ui {

class HomeWatcher final : public QObject
{
    Q_OBJECT
public:
    static constexpr int DEBOUNCE_MS = 40;
    static constexpr int BUSY_MS = 250;
    static constexpr int POLL_MS = 2000;
    enum class Mode { Notify, PollOnly };
    enum Part : int { Quota = 1, History = 2, Locks = 4, All = Quota | History | Locks };

    explicit HomeWatcher(
        QString home, QStringList lockDirs, Mode mode = Mode::Notify, QObject* parent = nullptr);

    void setLockDirs(const QStringList& lockDirs);
    void setPollInterval(int ms) { m_poll.setInterval(ms); }
    [[nodiscard]] QStringList watchedPaths() const;

Q_SIGNALS:
    void changed(int parts); // a combination of Part

private:
    void onEvent(int parts);
    void onPath(const QString& path, bool isDir);
    void flush();
    void poll();
    void resync();
    [[nodiscard]] QStringList desiredPaths() const;
    [[nodiscard]] QByteArray signature(int part) const;
    void takeSignatures();

    QString m_home;
    QStringList m_lockDirs;
    Mode m_mode;
    QFileSystemWatcher m_watcher;
    QTimer m_debounce;
    QTimer m_poll;
    QByteArray m_lastSignature[3]; // Quota, History, Locks
    int m_pending = 0;
    QElapsedTimer m_sinceFlush;
    QHash<QString, quint64> m_watchedInode; // a rename-over leaves the watch on the old inode
};

} // namespace tollgate::ui
