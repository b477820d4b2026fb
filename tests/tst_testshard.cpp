// The test-sharding helper (helpers/testshard.h): a shard runs exactly its share of a program's
// test functions, the shards together run every one once, and a bad TOLLGATE_TEST_SHARD fails
// the program instead of running everything or nothing.

#include "helpers/testshard.h"

#include <QProcess>
#include <QProcessEnvironment>
#include <QTest>

// A class with every kind of slot Qt Test sees: fixtures, a data function, slots that are not
// test functions (public, with a parameter).
class Sample : public QObject
{
    Q_OBJECT
public Q_SLOTS:
    void notATest() { }

private Q_SLOTS:
    void initTestCase() { }
    void init() { }
    void first() { }
    void second_data() { }
    void second() { }
    void withArgument(int) { }
    void third() { }
    void fourth() { }
    void cleanup() { }
    void cleanupTestCase() { }
};

class TestTestShard : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void sharesAreDisjointAndInDeclarationOrder();
    void theProgramRunsOnlyItsShare();
    void badSpecsFailTheProgram();
};

void TestTestShard::sharesAreDisjointAndInDeclarationOrder()
{
    const QMetaObject* meta = &Sample::staticMetaObject;
    QCOMPARE(tollgate::test::shardFunctions(meta, 1, 1),
        QStringList({ QStringLiteral("first"), QStringLiteral("second"), QStringLiteral("third"),
            QStringLiteral("fourth") }));
    QCOMPARE(tollgate::test::shardFunctions(meta, 1, 3),
        QStringList({ QStringLiteral("first"), QStringLiteral("fourth") }));
    QCOMPARE(tollgate::test::shardFunctions(meta, 2, 3), QStringList({ QStringLiteral("second") }));
    QCOMPARE(tollgate::test::shardFunctions(meta, 3, 3), QStringList({ QStringLiteral("third") }));
    QVERIFY(tollgate::test::shardFunctions(meta, 5, 5).isEmpty());
}

namespace {

struct Run
{
    int code = -1;
    QByteArray out;
    QByteArray err;
};

// This program again, as a child with TOLLGATE_TEST_SHARD=spec (only its first function, which
// starts nothing, may run there: a shard that ran this one would recurse).
Run self(const QString& spec)
{
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("TOLLGATE_TEST_SHARD"), spec);
    p.setProcessEnvironment(env);
    p.start(QCoreApplication::applicationFilePath(), {});
    if (!p.waitForFinished(60000)) {
        p.kill();
        p.waitForFinished();
        return {};
    }
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
        p.readAllStandardError() };
}

} // namespace

void TestTestShard::theProgramRunsOnlyItsShare()
{
    if (qEnvironmentVariableIsSet("TOLLGATE_TEST_SHARD"))
        QSKIP("inside a shard of itself");
    const Run r = self(QStringLiteral("1/3"));
    QVERIFY2(r.code == 0, r.out + r.err);
    QVERIFY2(r.out.contains("PASS   : TestTestShard::sharesAreDisjointAndInDeclarationOrder()"), r.out);
    QVERIFY2(!r.out.contains("theProgramRunsOnlyItsShare"), r.out);
    QVERIFY2(!r.out.contains("badSpecsFailTheProgram"), r.out);
}

void TestTestShard::badSpecsFailTheProgram()
{
    if (qEnvironmentVariableIsSet("TOLLGATE_TEST_SHARD"))
        QSKIP("inside a shard of itself");
    for (const QString& spec :
        { QStringLiteral("x"), QStringLiteral("0/2"), QStringLiteral("3/2"), QStringLiteral("1/"),
            QStringLiteral("1/2/3"), QStringLiteral("-1/2"), QStringLiteral("1/99999999999") }) {
        const Run r = self(spec);
        QVERIFY2(r.code == 2, qPrintable(spec + QStringLiteral(": ") + QString::fromUtf8(r.out + r.err)));
        QVERIFY2(r.err.contains("expected K/N"), r.err);
        QVERIFY2(!r.out.contains("PASS"), r.out);
    }
    // More shards than functions: the empty one fails rather than running everything.
    const Run r = self(QStringLiteral("5/5"));
    QVERIFY2(r.code == 2, r.out + r.err);
    QVERIFY2(r.err.contains("no test function in this shard"), r.err);
    QVERIFY2(!r.out.contains("PASS"), r.out);
}

TOLLGATE_SHARDED_GUILESS_MAIN(TestTestShard)
#include "tst_testshard.moc"
