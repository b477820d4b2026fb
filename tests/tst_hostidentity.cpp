// HostIdentity: a machine id is exactly 32 lowercase hex digits from a regular file; anything
// else (a FIFO, a directory, garbage, a huge file) is refused by name, never waited on.

#include "system/hostidentity.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <sys/stat.h>

using namespace tollgate;

class TestHostIdentity final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void wellFormedIdIsRead();
    void anythingElseIsRefused_data();
    void anythingElseIsRefused();
    void fifoIsRefusedNotWaitedOn();
    void namespacesMakeDifferentHosts();
};

static QString write(const QTemporaryDir& dir, const QByteArray& bytes)
{
    const QString path = dir.path() + QStringLiteral("/machine-id");
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        qFatal("cannot write %s", qPrintable(path));
    f.write(bytes);
    return path;
}

void TestHostIdentity::wellFormedIdIsRead()
{
    QTemporaryDir dir;
    auto id = HostIdentity::readMachineId(write(dir, "3d1219c7c4c5404aaa1f6d2a48adfda4\n").toStdString());
    QVERIFY(id.ok());
    QCOMPARE(*id, std::string("3d1219c7c4c5404aaa1f6d2a48adfda4"));
}

void TestHostIdentity::anythingElseIsRefused_data()
{
    QTest::addColumn<QByteArray>("bytes");
    QTest::newRow("empty") << QByteArray();
    QTest::newRow("short") << QByteArray("3d1219c7\n");
    QTest::newRow("upper case") << QByteArray("3D1219C7C4C5404AAA1F6D2A48ADFDA4\n");
    QTest::newRow("not hex") << QByteArray("zz1219c7c4c5404aaa1f6d2a48adfda4\n");
    QTest::newRow("two lines") << QByteArray("3d1219c7c4c5404aaa1f6d2a48adfda4\n3d1219c7c4c5404aaa1f6d2a48adfda4\n");
    QTest::newRow("control byte") << QByteArray("3d1219c7c4c5404aaa1f6d2a48adfd\x1b[");
    QTest::newRow("huge") << QByteArray(1 << 20, 'a');
}

void TestHostIdentity::anythingElseIsRefused()
{
    QFETCH(QByteArray, bytes);
    QTemporaryDir dir;
    const QString path = write(dir, bytes);
    auto id = HostIdentity::readMachineId(path.toStdString());
    QVERIFY(!id.ok());
    QVERIFY(id.error().describe().find(path.toStdString()) != std::string::npos);
}

void TestHostIdentity::fifoIsRefusedNotWaitedOn()
{
    QTemporaryDir dir;
    const QString path = dir.path() + QStringLiteral("/fifo");
    QVERIFY(::mkfifo(path.toLocal8Bit().constData(), 0644) == 0);
    auto id = HostIdentity::readMachineId(path.toStdString());
    QVERIFY(!id.ok());
    QVERIFY(!HostIdentity::readMachineId(dir.path().toStdString()).ok()); // a directory
}

void TestHostIdentity::namespacesMakeDifferentHosts()
{
    const std::string machine = "3d1219c7c4c5404aaa1f6d2a48adfda4";
    QCOMPARE(HostIdentity::make(machine, 0xeffffffc), machine + "-effffffc");
    QVERIFY(HostIdentity::make(machine, 1) != HostIdentity::make(machine, 2));
    QVERIFY(!HostIdentity::hostName().empty());
}

QTEST_APPLESS_MAIN(TestHostIdentity)
#include "tst_hostidentity.moc"
