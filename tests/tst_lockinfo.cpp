// The lock file's bytes: what we write, and how we read the peers' files (golden files in
// tests/data/golden are byte-exact copies of the sema/semats format, CRLF included).

#include "base/textsanitizer.h"
#include "lock/lockinfo.h"

#include <QFile>
#include <QTest>

using tollgate::LockInfo;

class TestLockInfo final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void writesExactBytesWithoutTag();
    void writesExactBytesWithTag();
    void writtenBytesMatchPeerGolden();
    void readsGoldenFiles_data();
    void readsGoldenFiles();
    void parseErrors_data();
    void parseErrors();
    void tagInjectionGivesOnePidLine();
    void tagControlCharactersBecomeSpaces();
    void tagIsCutAtTenThousandCharacters();
    void invalidUtf8InTagIsReplaced();
    void roundTrip();
};

static QByteArray golden(const char* name)
{
    QFile f(QStringLiteral(TOLLGATE_TEST_DATA "/golden/") + QString::fromLatin1(name));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("missing golden file %s", name);
    return f.readAll();
}

void TestLockInfo::writesExactBytesWithoutTag()
{
    LockInfo info { 12345, 1735420800, {} };
    QCOMPARE(QByteArray::fromStdString(info.serialize()), QByteArray("pid=12345\ntimestamp=1735420800\n"));
}

void TestLockInfo::writesExactBytesWithTag()
{
    LockInfo info { 12345, 1735420800, "npm build" };
    QCOMPARE(QByteArray::fromStdString(info.serialize()),
        QByteArray("pid=12345\ntimestamp=1735420800\ntag=npm build\n"));
}

void TestLockInfo::writtenBytesMatchPeerGolden()
{
    QCOMPARE(
        QByteArray::fromStdString(LockInfo { 12345, 1735420800, {} }.serialize()), golden("sema_notag.lock"));
    QCOMPARE(QByteArray::fromStdString(LockInfo { 12345, 1735420800, "npm build" }.serialize()),
        golden("semats_tag.lock"));
}

void TestLockInfo::readsGoldenFiles_data()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<qint64>("pid");
    QTest::addColumn<qint64>("timestamp");
    QTest::addColumn<QString>("tag");
    QTest::newRow("sema, no tag") << "sema_notag.lock" << qint64(12345) << qint64(1735420800) << QString();
    QTest::newRow("semats, tag") << "semats_tag.lock" << qint64(12345) << qint64(1735420800) << "npm build";
    QTest::newRow("CRLF") << "crlf.lock" << qint64(4242) << qint64(1735420801) << "windows build";
    QTest::newRow("unknown keys ignored")
        << "unknown_keys.lock" << qint64(777) << qint64(1735420802) << "with unknown keys";
    QTest::newRow("last duplicate wins")
        << "duplicates.lock" << qint64(31337) << qint64(1735420803) << "last wins";
    QTest::newRow("blank lines, padding, lines without =")
        << "whitespace.lock" << qint64(99) << qint64(1735420804) << "padded tag";
    QTest::newRow("unicode tag") << "unicode.lock" << qint64(555) << qint64(1735420805)
                                 << QStringLiteral("b\u00fcild \u2713 \u65e5\u672c");
    QTest::newRow("tag split on first =")
        << "tag_with_equals.lock" << qint64(556) << qint64(1735420806) << "x=y=z";
    QTest::newRow("no final newline")
        << "no_final_newline.lock" << qint64(557) << qint64(1735420807) << QString();
}

void TestLockInfo::readsGoldenFiles()
{
    QFETCH(QString, file);
    QFETCH(qint64, pid);
    QFETCH(qint64, timestamp);
    QFETCH(QString, tag);
    auto parsed = LockInfo::parse(golden(file.toLatin1().constData()).toStdString());
    QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.error().message.c_str());
    QCOMPARE(parsed->pid, pid);
    QCOMPARE(parsed->timestamp, timestamp);
    QCOMPARE(QString::fromStdString(parsed->tag), tag);
}

void TestLockInfo::parseErrors_data()
{
    QTest::addColumn<QByteArray>("content");
    QTest::addColumn<QString>("expected");
    QTest::newRow("empty") << QByteArray() << "empty lock file";
    QTest::newRow("whitespace only") << QByteArray(" \n\t\r\n  ") << "only whitespace";
    QTest::newRow("NUL byte") << QByteArray("pid=1\0\ntimestamp=2\n", 19) << "binary content (byte 0x00";
    QTest::newRow("escape byte") << QByteArray("pid=1\ntimestamp=2\x1b\n") << "binary content (byte 0x1B";
    QTest::newRow("invalid UTF-8") << QByteArray("pid=1\ntimestamp=2\ntag=\xff\xfe\n") << "invalid UTF-8";
    QTest::newRow("missing pid") << QByteArray("timestamp=2\n") << "no pid= line";
    QTest::newRow("missing timestamp") << QByteArray("pid=1\n") << "no timestamp= line";
    QTest::newRow("no = at all") << QByteArray("hello world\n") << "no pid= line";
    QTest::newRow("non-numeric pid") << QByteArray("pid=abc\ntimestamp=2\n") << "pid is not a process id";
    QTest::newRow("empty pid") << QByteArray("pid=\ntimestamp=2\n") << "pid is not a process id";
    QTest::newRow("pid zero") << QByteArray("pid=0\ntimestamp=2\n") << "pid is not a process id";
    QTest::newRow("negative pid") << QByteArray("pid=-5\ntimestamp=2\n") << "pid is not a process id";
    QTest::newRow("pid with trailing junk")
        << QByteArray("pid=12x\ntimestamp=2\n") << "pid is not a process id";
    QTest::newRow("pid overflow") << QByteArray("pid=99999999999\ntimestamp=2\n")
                                  << "pid is not a process id";
    QTest::newRow("non-numeric timestamp") << QByteArray("pid=1\ntimestamp=soon\n") << "timestamp is not";
    QTest::newRow("fractional timestamp") << QByteArray("pid=1\ntimestamp=1.5\n") << "timestamp is not";
    QTest::newRow("negative timestamp") << QByteArray("pid=1\ntimestamp=-1\n") << "timestamp is not";
    QTest::newRow("last duplicate is bad")
        << QByteArray("pid=1\ntimestamp=2\npid=x\n") << "pid is not a process id";
}

void TestLockInfo::parseErrors()
{
    QFETCH(QByteArray, content);
    QFETCH(QString, expected);
    auto parsed
        = LockInfo::parse(std::string_view(content.constData(), static_cast<std::size_t>(content.size())));
    QVERIFY(!parsed.ok());
    QCOMPARE(parsed.error().kind, tollgate::ErrorKind::Corrupt);
    const QString message = QString::fromStdString(parsed.error().message);
    QVERIFY2(message.contains(expected), qPrintable(message));
}

void TestLockInfo::tagInjectionGivesOnePidLine()
{
    LockInfo info { 42, 1000, "x\npid=999" };
    const std::string bytes = info.serialize();
    QCOMPARE(QByteArray::fromStdString(bytes), QByteArray("pid=42\ntimestamp=1000\ntag=x pid=999\n"));
    auto back = LockInfo::parse(bytes);
    QVERIFY(back.ok());
    QCOMPARE(back->pid, 42);
}

void TestLockInfo::tagControlCharactersBecomeSpaces()
{
    QCOMPARE(LockInfo::sanitizeTag("a\tb\rc\x1b[31md\x7f"
                                   "e\xc2\x85"
                                   "f"),
        std::string("a b c [31md e f"));
}

void TestLockInfo::tagIsCutAtTenThousandCharacters()
{
    QCOMPARE(LockInfo::sanitizeTag(std::string(20000, 'a')).size(), std::size_t(10000));
    // Characters, not bytes: a 3-byte character counts once and is never split.
    std::string wide;
    for (int i = 0; i < 10005; ++i)
        wide += "\xe2\x9c\x93";
    QCOMPARE(LockInfo::sanitizeTag(wide).size(), std::size_t(30000));
}

void TestLockInfo::invalidUtf8InTagIsReplaced()
{
    QCOMPARE(LockInfo::sanitizeTag("a\xff"
                                   "b"),
        std::string("a\xef\xbf\xbd"
                    "b"));
    QCOMPARE(tollgate::TextSanitizer::invalidUtf8Offset("ok\xc3"), std::size_t(2));
}

void TestLockInfo::roundTrip()
{
    LockInfo info { 2147483647, 9223372036854775807LL, "edge \xe6\x97\xa5" };
    auto back = LockInfo::parse(info.serialize());
    QVERIFY(back.ok());
    QCOMPARE(*back, info);
}

QTEST_APPLESS_MAIN(TestLockInfo)
#include "tst_lockinfo.moc"
