#pragma once

// One test program's functions split into shards that ctest runs side by side (SHARDS in
// tests/CMakeLists.txt): with TOLLGATE_TEST_SHARD=K/N the program runs every N-th test function
// from the K-th (1-based, in declaration order), by appending their names to its arguments;
// unset, it runs them all, as QTest::qExec would. A long suite (tst_proxy: two minutes under
// ThreadSanitizer) otherwise ran alone at the end of its phase while the other core idled.
// The functions must not depend on each other (each sets up its own home and peers in init()).

#include <QCoreApplication>
#include <QMetaMethod>
#include <QObject>
#include <QStringList>
#include <QTest>
#include <cstdio>

namespace tollgate::test {

// The test functions of shard k of n (1 <= k <= n) of `meta`'s class, in declaration order:
// by Qt Test's own rule, a private slot without parameters that is not one of the fixtures
// or a data function.
inline QStringList shardFunctions(const QMetaObject* meta, int k, int n)
{
    QStringList names;
    int index = 0;
    for (int i = meta->methodOffset(); i < meta->methodCount(); ++i) {
        const QMetaMethod m = meta->method(i);
        if (m.methodType() != QMetaMethod::Slot || m.access() != QMetaMethod::Private
            || m.parameterCount() != 0)
            continue;
        const QByteArray name = m.name();
        if (name == "initTestCase" || name == "initTestCase_data" || name == "cleanupTestCase"
            || name == "init" || name == "cleanup" || name.endsWith("_data"))
            continue;
        if (index++ % n == k - 1)
            names.append(QString::fromLatin1(name));
    }
    return names;
}

inline int execShard(QObject* test, int argc, char** argv)
{
    QStringList args;
    for (int i = 0; i < argc; ++i)
        args.append(QString::fromLocal8Bit(argv[i]));
    const QByteArray spec = qgetenv("TOLLGATE_TEST_SHARD");
    if (spec.isEmpty())
        return QTest::qExec(test, args);

    const QList<QByteArray> parts = spec.split('/');
    bool okK = false;
    bool okN = false;
    const int k = parts.size() == 2 ? parts[0].toInt(&okK) : 0;
    const int n = parts.size() == 2 ? parts[1].toInt(&okN) : 0;
    if (!okK || !okN || n < 1 || k < 1 || k > n) {
        std::fprintf(stderr, "TOLLGATE_TEST_SHARD='%s': expected K/N with 1 <= K <= N\n", spec.constData());
        return 2;
    }
    const QStringList names = shardFunctions(test->metaObject(), k, n);
    if (names.isEmpty()) {
        // No names would run every function: a shard count larger than the functions is a
        // mistake in tests/CMakeLists.txt, not a pass.
        std::fprintf(stderr, "TOLLGATE_TEST_SHARD=%s: no test function in this shard\n", spec.constData());
        return 2;
    }
    return QTest::qExec(test, args + names);
}

} // namespace tollgate::test

// QTEST_GUILESS_MAIN, with the functions of TOLLGATE_TEST_SHARD only.
#define TOLLGATE_SHARDED_GUILESS_MAIN(TestObject)                                                            \
    int main(int argc, char* argv[])                                                                         \
    {                                                                                                        \
        QCoreApplication app(argc, argv);                                                                    \
        app.setAttribute(Qt::AA_Use96Dpi, true);                                                             \
        TestObject tc;                                                                                       \
        QTEST_SET_MAIN_SOURCE_PATH                                                                           \
        return tollgate::test::execShard(&tc, argc, argv);                                                   \
    }
