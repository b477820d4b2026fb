// DirectoryEvents: the names inotify reports, and "everything" whenever they cannot be trusted.

#include "system/directoryevents.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <cstdio>

using namespace tollgate;

namespace {

void touch(const QString& path, const QByteArray& data = "x")
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    QCOMPARE(f.write(data), data.size());
}

std::set<std::string> names(std::initializer_list<const char*> list)
{
    std::set<std::string> out;
    for (const char* n : list)
        out.emplace(n);
    return out;
}

} // namespace

class TestDirectoryEvents final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void namesWhatChanged();
    void replacedOrMissingDirectoryIsEverything();
    void tooManyNamesIsEverything();
};

void TestDirectoryEvents::namesWhatChanged()
{
    QTemporaryDir dir;
    const std::string path = dir.path().toStdString();
    touch(dir.path() + QStringLiteral("/kept"));
    touch(dir.path() + QStringLiteral("/gone"));
    touch(dir.path() + QStringLiteral("/old"));
    DirectoryEvents events;
    QVERIFY(events.take(path).everything); // the first look: the caller reads it all

    auto quiet = events.take(path);
    QVERIFY(!quiet.everything);
    QVERIFY(quiet.names.empty());

    touch(dir.path() + QStringLiteral("/new"));
    QVERIFY(QFile::remove(dir.path() + QStringLiteral("/gone")));
    QVERIFY(QFile::rename(dir.path() + QStringLiteral("/old"), dir.path() + QStringLiteral("/renamed")));
    auto c = events.take(path);
    QVERIFY(!c.everything);
    QCOMPARE(c.names, names({ "new", "gone", "old", "renamed" }));

    // Written in place (the same inode), or only touched: named too.
    touch(dir.path() + QStringLiteral("/kept"), "y");
    c = events.take(path);
    QVERIFY(!c.everything);
    QCOMPARE(c.names, names({ "kept" }));
    QVERIFY(events.take(path).names.empty()); // taken once
}

void TestDirectoryEvents::replacedOrMissingDirectoryIsEverything()
{
    QTemporaryDir parent;
    const QString d = parent.path() + QStringLiteral("/locks");
    const std::string path = d.toStdString();
    DirectoryEvents events;
    QVERIFY(events.take(path).everything); // missing
    QVERIFY(QDir().mkdir(d));
    QVERIFY(events.take(path).everything); // appeared: watched from now on
    QVERIFY(!events.take(path).everything);

    // Replaced by another directory (another inode): the old watch says nothing about it.
    QVERIFY(QDir(d).removeRecursively());
    QVERIFY(QDir().mkdir(d));
    touch(d + QStringLiteral("/a"));
    QVERIFY(events.take(path).everything);
    QVERIFY(!events.take(path).everything);

    // Forgotten when no longer wanted; asked again, it starts over.
    events.keepOnly({});
    QVERIFY(events.take(path).everything);
}

void TestDirectoryEvents::tooManyNamesIsEverything()
{
    QTemporaryDir dir;
    const std::string path = dir.path().toStdString();
    DirectoryEvents events;
    QVERIFY(events.take(path).everything);
    for (std::size_t i = 0; i <= DirectoryEvents::MAX_NAMES; ++i)
        touch(dir.path() + QStringLiteral("/f%1").arg(i));
    const auto c = events.take(path);
    QVERIFY(c.everything);
    QVERIFY(c.names.empty());
    QVERIFY(!events.take(path).everything);
}

QTEST_APPLESS_MAIN(TestDirectoryEvents)
#include "tst_directoryevents.moc"
