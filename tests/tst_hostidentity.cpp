// HostIdentity: a machine id is exactly 32 lowercase hex digits from a regular file; anything
// else (a FIFO, a directory, garbage, a huge file) is refused by name, never waited on.

#include "helpers/redisserver.h"
#include "system/hostidentity.h"
#include "testsupport.h"

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
    void clonesSharingAMachineIdAreDifferentHosts();
    void bootIdIsReadStrictly_data();
    void bootIdIsReadStrictly();
    void thisMachineHasAStableId();
    void aCloneDoesNotReclaimTheSlotsOfItsTwin();
};

static QString write(const QTemporaryDir& dir, const QByteArray& bytes, const QString& name = QStringLiteral("machine-id"))
{
    const QString path = dir.path() + QLatin1Char('/') + name;
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
    const std::string boot = "0f4bd6a4-6d4e-4b8e-9a39-2b7e0d1c5a77";
    const std::string id = HostIdentity::make(machine, boot, 0xeffffffc);
    QCOMPARE(id.size(), std::size_t(32 + 1 + 8));
    QVERIFY(id.find(machine) == std::string::npos); // a digest, not the machine id itself
    QCOMPARE(id.substr(32), std::string("-effffffc"));
    QVERIFY(HostIdentity::make(machine, boot, 1) != HostIdentity::make(machine, boot, 2));
    QVERIFY(!HostIdentity::hostName().empty());
}

void TestHostIdentity::clonesSharingAMachineIdAreDifferentHosts()
{
    // Two virtual machines cloned from one template: one /etc/machine-id, each its own boot.
    // With the machine id alone they were one host, and each reclaimed the other's live slots
    // as "dead pids of ours" (issue 27).
    QTemporaryDir dir;
    HostIdentity::Sources cloneA;
    cloneA.machineIdFiles = { write(dir, "3d1219c7c4c5404aaa1f6d2a48adfda4\n").toStdString() };
    cloneA.bootIdFile = write(dir, "0f4bd6a4-6d4e-4b8e-9a39-2b7e0d1c5a77\n", QStringLiteral("boot-a")).toStdString();
    HostIdentity::Sources cloneB = cloneA;
    cloneB.bootIdFile = write(dir, "c1d2e3f4-0a1b-4c2d-8e3f-405162738495\n", QStringLiteral("boot-b")).toStdString();
    auto a = HostIdentity::current(0xeffffffc, cloneA);
    auto b = HostIdentity::current(0xeffffffc, cloneB);
    QVERIFY2(a.ok() && b.ok(), a.ok() ? "" : a.error().describe().c_str());
    QVERIFY(*a != *b);
    // Stable within a boot: asked again, the same.
    auto again = HostIdentity::current(0xeffffffc, cloneA);
    QVERIFY(again.ok());
    QCOMPARE(*again, *a);
    // The machine id still counts: another machine that happened to... share a boot id.
    HostIdentity::Sources other = cloneA;
    other.machineIdFiles = { write(dir, "aaaa19c7c4c5404aaa1f6d2a48adfda4\n", QStringLiteral("machine-id-2")).toStdString() };
    auto c = HostIdentity::current(0xeffffffc, other);
    QVERIFY(c.ok());
    QVERIFY(*c != *a);
    // No boot id: refused by name (never an id that clones would share).
    HostIdentity::Sources noBoot = cloneA;
    noBoot.bootIdFile = dir.path().toStdString() + "/no-boot-id";
    auto refused = HostIdentity::current(0xeffffffc, noBoot);
    QVERIFY(!refused.ok());
    QVERIFY(refused.error().describe().find("no-boot-id") != std::string::npos);
}

void TestHostIdentity::bootIdIsReadStrictly_data()
{
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<bool>("ok");
    QTest::newRow("a uuid") << QByteArray("0f4bd6a4-6d4e-4b8e-9a39-2b7e0d1c5a77\n") << true;
    QTest::newRow("empty") << QByteArray() << false;
    QTest::newRow("no dashes") << QByteArray("0f4bd6a46d4e4b8e9a392b7e0d1c5a77\n") << false;
    QTest::newRow("upper case") << QByteArray("0F4BD6A4-6D4E-4B8E-9A39-2B7E0D1C5A77\n") << false;
    QTest::newRow("dash misplaced") << QByteArray("0f4bd6a46-d4e-4b8e-9a39-2b7e0d1c5a77\n") << false;
    QTest::newRow("huge") << QByteArray(1 << 20, 'a') << false;
}

void TestHostIdentity::bootIdIsReadStrictly()
{
    QFETCH(QByteArray, bytes);
    QFETCH(bool, ok);
    QTemporaryDir dir;
    const QString path = write(dir, bytes, QStringLiteral("boot_id"));
    auto id = HostIdentity::readBootId(path.toStdString());
    QCOMPARE(id.ok(), ok);
    if (!ok)
        QVERIFY(id.error().describe().find(path.toStdString()) != std::string::npos);
}

void TestHostIdentity::thisMachineHasAStableId()
{
    // The real sources (this machine's machine id and boot id): read twice, one id.
    if (!QFile::exists(QStringLiteral("/etc/machine-id")) && !QFile::exists(QStringLiteral("/var/lib/dbus/machine-id")))
        QSKIP("this machine has no machine id");
    auto a = HostIdentity::current(42);
    QVERIFY2(a.ok(), a.ok() ? "" : a.error().describe().c_str());
    auto b = HostIdentity::current(42);
    QVERIFY(b.ok());
    QCOMPARE(*a, *b);
}

void TestHostIdentity::aCloneDoesNotReclaimTheSlotsOfItsTwin()
{
    // Two clones of one VM template share /etc/machine-id and, being separate kernels, the same
    // initial pid namespace (its inode is a constant): before issue 27 they were one host, so a
    // holder of clone A, whose pid clone B does not have, looked dead to B, which reclaimed the
    // slot while A's command ran. Simulated on one kernel with real processes: each "clone" is a
    // mount namespace where another boot id is bound over /proc/sys/kernel/random/boot_id; the
    // holder is a shell that is gone (to B, as good as a pid of another kernel).
    if (::geteuid() != 0)
        QSKIP("needs root (a mount namespace and a bind mount over /proc)");
    if (RedisServer::binary().isEmpty())
        QSKIP("redis-server is not installed (scripts/bootstrap.sh installs it)");
    RedisServer server;
    QString why;
    QVERIFY2(server.start({}, &why), qPrintable(why));
    const QString home = QString::fromStdString(server.url()) + QStringLiteral("?prefix=clones");
    QTemporaryDir dir;
    const QString bootA = write(dir, "0f4bd6a4-6d4e-4b8e-9a39-2b7e0d1c5a77\n", QStringLiteral("boot-a"));
    const QString bootB = write(dir, "c1d2e3f4-0a1b-4c2d-8e3f-405162738495\n", QStringLiteral("boot-b"));
    const QString cli = QStringLiteral(TOLLGATE_CLI_PATH);
    // `tollgate ARGS` in a clone booted with `boot`, from a shell that ends after it (the
    // holder of a slot taken with --slot is that shell).
    auto inClone = [&](const QString& boot, const QString& args) {
        const QString script = QStringLiteral("mount --bind '%1' /proc/sys/kernel/random/boot_id || exit 99; "
                                              "'%2' --home '%4' %3; code=$?; exit $code")
                                   .arg(boot, cli, args, home);
        return TestSupport::run(QStringLiteral("unshare"),
            { QStringLiteral("--mount"), QStringLiteral("--propagation"), QStringLiteral("private"),
                QStringLiteral("sh"), QStringLiteral("-c"), script });
    };
    const TestSupport::Ran set = inClone(bootA, QStringLiteral("limits set api --requests 100 --parallel 1"));
    if (set.code == 99)
        QSKIP("cannot bind a file over /proc/sys/kernel/random/boot_id here");
    QVERIFY2(set.code == 0, set.err.constData());
    const TestSupport::Ran idA = inClone(bootA, QStringLiteral("status --json"));
    const TestSupport::Ran idB = inClone(bootB, QStringLiteral("status --json"));
    QVERIFY2(idA.code == 0 && idB.code == 0, idA.err.constData());
    const QByteArray hostA = idA.out.mid(idA.out.indexOf("\"id\""), 50);
    QVERIFY2(hostA != idB.out.mid(idB.out.indexOf("\"id\""), 50), idA.out.constData());

    // Clone A takes the only slot; its holder is gone from clone B's point of view.
    const TestSupport::Ran held = inClone(bootA, QStringLiteral("acquire api --caller a --slot --timeout 5"));
    QVERIFY2(held.code == 0, held.err.constData());
    // Clone B: the holder is another host's, judged by its lease (the maximum hold: --slot has
    // no renewer), so there is no slot now.
    const TestSupport::Ran twin = inClone(bootB, QStringLiteral("acquire api --caller b --slot --timeout 0"));
    QVERIFY2(twin.code == 1, (QByteArray::number(twin.code) + " " + twin.err).constData());
    // Clone A itself still knows its dead holder as its own and takes the slot back at once.
    const TestSupport::Ran same = inClone(bootA, QStringLiteral("acquire api --caller a2 --slot --timeout 0"));
    QVERIFY2(same.code == 0, same.err.constData());
}

QTEST_APPLESS_MAIN(TestHostIdentity)
#include "tst_hostidentity.moc"
