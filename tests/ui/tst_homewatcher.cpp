// HomeWatcher against real files: in-place writes, rename-replace, delete and re-create, a
// home that appears later or is re-created, lock directories, and the polling fallback.
// Each step waits for the signal (no sleeps) and then checks that the *next* change to the
// same path is still seen, which is what breaks when a watch is lost.

#include "homewatcher.h"

#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <cstdio>

using tollgate::ui::HomeWatcher;

class TestHomeWatcher final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void inPlaceWrites();
    void renameReplace();
    void deleteAndRecreate();
    void homeAppearsLater();
    void homeDeletedAndRecreated();
    void lockDirectories();
    void pollingFallback();

private:
    QString m_home;
    std::unique_ptr<QTemporaryDir> m_dir;
};

namespace {

constexpr int TIMEOUT_MS = 5000;

void writeFile(const QString& path, const QByteArray& data, QIODevice::OpenMode mode = QIODevice::WriteOnly)
{
    QFile f(path);
    QVERIFY2(f.open(mode), qPrintable(path));
    QVERIFY(f.write(data) == data.size());
}

void replaceByRename(const QString& path, const QByteArray& data)
{
    const QString tmp = path + QStringLiteral(".tmp");
    writeFile(tmp, data);
    QVERIFY(std::rename(QFile::encodeName(tmp).constData(), QFile::encodeName(path).constData()) == 0);
}

} // namespace

// Waits for at least one changed() after `action`, starting from a clean count.
#define EXPECT_CHANGE(spy, action)                                                                           \
    do {                                                                                                     \
        (spy).clear();                                                                                       \
        action;                                                                                              \
        QTRY_VERIFY_WITH_TIMEOUT((spy).count() > 0, TIMEOUT_MS);                                             \
    } while (false)

void TestHomeWatcher::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->path() + QStringLiteral("/home");
}

void TestHomeWatcher::inPlaceWrites()
{
    QVERIFY(QDir().mkpath(m_home));
    writeFile(m_home + QStringLiteral("/state.bin"), "v1");
    HomeWatcher w(m_home, {});
    QVERIFY(w.watchedPaths().contains(m_home + QStringLiteral("/state.bin")));
    QSignalSpy spy(&w, &HomeWatcher::changed);
    EXPECT_CHANGE(spy, writeFile(m_home + QStringLiteral("/state.bin"), "v2", QIODevice::ReadWrite));
    EXPECT_CHANGE(spy, writeFile(m_home + QStringLiteral("/history.jsonl"), "{}\n", QIODevice::Append));
    EXPECT_CHANGE(spy, writeFile(m_home + QStringLiteral("/history.jsonl"), "{}\n", QIODevice::Append));
}

void TestHomeWatcher::renameReplace()
{
    QVERIFY(QDir().mkpath(m_home));
    const QString limits = m_home + QStringLiteral("/limits.json");
    writeFile(limits, "{}");
    HomeWatcher w(m_home, {});
    QSignalSpy spy(&w, &HomeWatcher::changed);
    EXPECT_CHANGE(spy, replaceByRename(limits, "{\"v\":2}"));
    // The watch must now be on the new file: an in-place write to it is still seen.
    EXPECT_CHANGE(spy, writeFile(limits, "{\"v\":3}", QIODevice::ReadWrite));
    EXPECT_CHANGE(spy, replaceByRename(limits, "{\"v\":4}"));
    EXPECT_CHANGE(spy, writeFile(limits, "{\"v\":5}", QIODevice::Append));
}

void TestHomeWatcher::deleteAndRecreate()
{
    QVERIFY(QDir().mkpath(m_home));
    const QString history = m_home + QStringLiteral("/history.jsonl");
    writeFile(history, "a\n");
    HomeWatcher w(m_home, {});
    QSignalSpy spy(&w, &HomeWatcher::changed);
    EXPECT_CHANGE(spy, QVERIFY(QFile::remove(history)));
    EXPECT_CHANGE(spy, writeFile(history, "b\n"));
    EXPECT_CHANGE(spy, writeFile(history, "c\n", QIODevice::Append));
    QVERIFY(w.watchedPaths().contains(history));
}

void TestHomeWatcher::homeAppearsLater()
{
    // Two levels are missing: the nearest existing ancestor is watched.
    const QString home = m_dir->path() + QStringLiteral("/later/home");
    HomeWatcher w(home, {});
    QVERIFY(w.watchedPaths().contains(m_dir->path()));
    QSignalSpy spy(&w, &HomeWatcher::changed);
    EXPECT_CHANGE(spy, QVERIFY(QDir().mkpath(home)));
    QTRY_VERIFY_WITH_TIMEOUT(w.watchedPaths().contains(home), TIMEOUT_MS);
    EXPECT_CHANGE(spy, writeFile(home + QStringLiteral("/state.bin"), "x"));
    EXPECT_CHANGE(spy, writeFile(home + QStringLiteral("/state.bin"), "y", QIODevice::ReadWrite));
}

void TestHomeWatcher::homeDeletedAndRecreated()
{
    QVERIFY(QDir().mkpath(m_home));
    writeFile(m_home + QStringLiteral("/state.bin"), "x");
    HomeWatcher w(m_home, {});
    QSignalSpy spy(&w, &HomeWatcher::changed);
    EXPECT_CHANGE(spy, QVERIFY(QDir(m_home).removeRecursively()));
    EXPECT_CHANGE(spy, QVERIFY(QDir().mkpath(m_home)));
    EXPECT_CHANGE(spy, writeFile(m_home + QStringLiteral("/state.bin"), "z"));
    EXPECT_CHANGE(spy, writeFile(m_home + QStringLiteral("/state.bin"), "zz", QIODevice::ReadWrite));
}

void TestHomeWatcher::lockDirectories()
{
    const QString locks = m_dir->path() + QStringLiteral("/locks");
    HomeWatcher w(m_home, { locks });
    QSignalSpy spy(&w, &HomeWatcher::changed);
    EXPECT_CHANGE(spy, QVERIFY(QDir().mkpath(locks)));
    EXPECT_CHANGE(spy, writeFile(locks + QStringLiteral("/deploy.lock"), "pid=1\ntimestamp=1\n"));
    EXPECT_CHANGE(spy, QVERIFY(QFile::remove(locks + QStringLiteral("/deploy.lock"))));
    const QString other = m_dir->path() + QStringLiteral("/other");
    QVERIFY(QDir().mkpath(other));
    w.setLockDirs({ other });
    EXPECT_CHANGE(spy, writeFile(other + QStringLiteral("/x.lock"), "pid=1\ntimestamp=1\n"));
}

void TestHomeWatcher::pollingFallback()
{
    QVERIFY(QDir().mkpath(m_home));
    const QString state = m_home + QStringLiteral("/state.bin");
    writeFile(state, "1");
    HomeWatcher w(m_home, {}, HomeWatcher::Mode::PollOnly);
    w.setPollInterval(50);
    QVERIFY(w.watchedPaths().isEmpty());
    QSignalSpy spy(&w, &HomeWatcher::changed);
    EXPECT_CHANGE(spy, writeFile(state, "22"));
    EXPECT_CHANGE(spy, replaceByRename(state, "333"));
    EXPECT_CHANGE(spy, QVERIFY(QFile::remove(state)));
}

QTEST_GUILESS_MAIN(TestHomeWatcher)
#include "tst_homewatcher.moc"
