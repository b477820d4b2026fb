// Real clients nobody here wrote, through `tollgate proxy`: the official Anthropic and OpenAI
// Node SDKs (tests/sdk, pinned by its package-lock.json; scripts/test.sh runs `npm ci`), each
// with 8 concurrent clients against a mock provider whose quota (3 requests a second) is far
// below the one set in Tollgate. What must hold, for both SDKs at once:
// - no request reaches the mock while an answer it sent says nothing is left (the mock counts
//   such arrivals: `violations`), and the mock never has to refuse one;
// - every answer arrives intact, and streams arrive incrementally: each stream stops after its
//   first text until the client, having received that text, opens the gate on the mock itself
//   (a proxy that buffered would keep the gate shut: the mock counts `gateTimeouts`);
// - the token window in Tollgate holds exactly the usage the mock reported;
// - the API key reaches the provider untouched, and nothing is left held.
// Tollgate allows one call at a time here, so "the provider said nothing is left" is known
// before the next call is admitted (with more parallel calls, ones already on their way when
// the answer comes would reach the mock: they were not admitted against the provider's word).

#include "testsupport.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <memory>

namespace {

using Ran = TestSupport::Ran;
using Child = TestSupport::Child;

const QString MOCK = QStringLiteral(TOLLGATE_TEST_DATA "/../helpers/mockprovider.js");
const QString SDK_DIR = QStringLiteral(TOLLGATE_TEST_DATA "/../sdk");
constexpr int CLIENTS = 8;
constexpr int ROUNDS = 2; // each: one plain call and one stream

struct Side
{
    QString provider;
    Child mock;
    QString mockUrl;
    Child proxy;
    QString proxyUrl;
    std::unique_ptr<QProcess> clients;
    QString baseUrl; // what the SDK is given: the proxy's address, with its token if it has one
};

} // namespace

class TestSdkClients final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void officialSdksShareTheQuotaThroughTheProxy();

private:
    Ran cli(const QStringList& args) const
    {
        return TestSupport::run(
            QStringLiteral(TOLLGATE_CLI_PATH), QStringList { QStringLiteral("--home"), m_home } + args);
    }
    QJsonObject mockStats(const Side& s) const
    {
        const Ran r = TestSupport::run(
            QStringLiteral("curl"), { QStringLiteral("-sS"), s.mockUrl + QStringLiteral("/_stats") });
        return QJsonDocument::fromJson(r.out).object();
    }
    void start(Side& s);

    QTemporaryDir m_dir;
    QString m_home;
};

void TestSdkClients::initTestCase()
{
    if (QStandardPaths::findExecutable(QStringLiteral("node")).isEmpty()
        || QStandardPaths::findExecutable(QStringLiteral("curl")).isEmpty())
        QFAIL("node or curl is not installed (scripts/bootstrap.sh installs both)");
    for (const char* package : { "@anthropic-ai/sdk", "openai" }) {
        const QString at = SDK_DIR + QStringLiteral("/node_modules/") + QLatin1String(package)
            + QStringLiteral("/package.json");
        if (!QFile::exists(at))
            QFAIL(qPrintable(QStringLiteral("%1 is not installed: run `npm ci` in %2 (scripts/test.sh does)")
                                 .arg(QLatin1String(package), QDir::cleanPath(SDK_DIR))));
    }
    QVERIFY(m_dir.isValid());
    m_home = m_dir.filePath(QStringLiteral("home"));
}

void TestSdkClients::start(Side& s)
{
    // Far more than the mock allows (3 a second), one call at a time, tokens counted for
    // 10 minutes (longer than the test: nothing leaves the window while it runs).
    const Ran set = cli({ QStringLiteral("limits"), QStringLiteral("set"), s.provider,
        QStringLiteral("--requests"), QStringLiteral("1000"), QStringLiteral("--tokens"),
        QStringLiteral("1000000"), QStringLiteral("--parallel"), QStringLiteral("1"),
        QStringLiteral("--window"), QStringLiteral("600") });
    QVERIFY2(set.code == 0, set.err.constData());
    s.mock = TestSupport::startChild(QStringLiteral("node"),
        { MOCK, QStringLiteral("--limit"), QStringLiteral("3"), QStringLiteral("--window-ms"),
            QStringLiteral("1000") });
    QVERIFY(s.mock);
    const QByteArray port = TestSupport::firstLine(*s.mock);
    QVERIFY2(!port.isEmpty(), "the mock provider did not start");
    s.mockUrl = QStringLiteral("http://127.0.0.1:") + QString::fromLatin1(port);
    // The openai side's proxy asks for a shared token, which the SDK gets in its base URL: no
    // code change, and the provider never sees it (the mock counts leaks).
    QStringList args { QStringLiteral("proxy"), s.provider, QStringLiteral("--home"), m_home,
        QStringLiteral("--upstream"), s.mockUrl, QStringLiteral("--listen"), QStringLiteral("127.0.0.1:0") };
    const QString token = QStringLiteral("sdk-side-token-0123456789");
    if (s.provider == QStringLiteral("openai")) {
        QFile f(m_dir.filePath(QStringLiteral("token")));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(token.toLatin1());
        f.close();
        QVERIFY(f.setPermissions(QFile::ReadOwner | QFile::WriteOwner));
        args << QStringLiteral("--token-file") << f.fileName();
    }
    s.proxy = TestSupport::startChild(QStringLiteral(TOLLGATE_CLI_PATH), args);
    QVERIFY(s.proxy);
    const QByteArray line = TestSupport::firstLine(*s.proxy);
    QVERIFY2(line.startsWith("listening on http://127.0.0.1:"), line.constData());
    s.proxyUrl = QString::fromUtf8(line.mid(13, line.indexOf(' ', 13) - 13));
    s.baseUrl
        = s.provider == QStringLiteral("openai") ? s.proxyUrl + QStringLiteral("/t/") + token : s.proxyUrl;
}

void TestSdkClients::officialSdksShareTheQuotaThroughTheProxy()
{
    Side sides[2] = { { QStringLiteral("anthropic"), {}, {}, {}, {}, {}, {} },
        { QStringLiteral("openai"), {}, {}, {}, {}, {}, {} } };
    for (Side& s : sides) {
        start(s);
        if (QTest::currentTestFailed())
            return;
    }
    // Both SDKs at once: 16 clients, two proxies, one home.
    for (Side& s : sides) {
        s.clients = std::make_unique<QProcess>();
        s.clients->setProgram(QStringLiteral("node"));
        s.clients->setArguments({ SDK_DIR + QStringLiteral("/sdkclients.js"), s.provider, s.baseUrl,
            s.mockUrl, QString::number(CLIENTS), QString::number(ROUNDS) });
        s.clients->start();
        QVERIFY(s.clients->waitForStarted());
    }
    for (Side& s : sides) {
        // A deadline, not a timing assertion: the run needs ~ROUNDS*2*CLIENTS/3 seconds.
        QVERIFY2(s.clients->waitForFinished(240000),
            qPrintable(s.provider + QStringLiteral(" clients did not finish")));
        const QByteArray out = s.clients->readAllStandardOutput();
        const QByteArray err = s.clients->readAllStandardError();
        QVERIFY2(s.clients->exitStatus() == QProcess::NormalExit && s.clients->exitCode() == 0,
            (out + err).constData());
        const QJsonObject summary = QJsonDocument::fromJson(out).object();
        QVERIFY2(summary.value(QStringLiteral("failures")).toArray().isEmpty(), out.constData());
        QCOMPARE(summary.value(QStringLiteral("calls")).toInt(), CLIENTS * ROUNDS);
        QCOMPARE(summary.value(QStringLiteral("streams")).toInt(), CLIENTS * ROUNDS);
        qInfo("%s: %s", qPrintable(s.provider), qPrintable(summary.value(QStringLiteral("sdk")).toString()));

        const QJsonObject stats = mockStats(s);
        QCOMPARE(stats.value(QStringLiteral("violations")).toInt(), 0);
        QCOMPARE(stats.value(QStringLiteral("refused")).toInt(), 0);
        QCOMPARE(stats.value(QStringLiteral("gateTimeouts")).toInt(), 0);
        QCOMPARE(stats.value(QStringLiteral("requests")).toInt(), CLIENTS * ROUNDS * 2);
        QCOMPARE(stats.value(QStringLiteral("maxConcurrent")).toInt(), 1);
        QCOMPARE(stats.value(QStringLiteral("tokenLeaks")).toInt(), 0);
        // The usage each client read from its answers is the usage the mock reported.
        QCOMPARE(summary.value(QStringLiteral("usageTokens")).toInt(),
            stats.value(QStringLiteral("usageTokens")).toInt());
        const QJsonObject keys = stats.value(QStringLiteral("keys")).toObject();
        QCOMPARE(keys.size(), 1);
        QVERIFY2(keys.keys().first().endsWith(QStringLiteral("sk-test-tollgate-key")),
            qPrintable(keys.keys().first()));
    }
    // The window counts exactly what the mock reported (the correction lands just after each
    // answer is passed on, so it is read until it settles). No slot, no waiter left.
    auto providerStatus = [&](const QString& name) {
        const Ran r = cli({ QStringLiteral("status"), QStringLiteral("--json") });
        for (const auto v :
            QJsonDocument::fromJson(r.out).object().value(QStringLiteral("providers")).toArray()) {
            if (v.toObject().value(QStringLiteral("provider")).toString() == name)
                return v.toObject();
        }
        return QJsonObject();
    };
    for (const Side& s : sides) {
        const int reported = mockStats(s).value(QStringLiteral("usageTokens")).toInt();
        QVERIFY(reported > 0);
        QTRY_COMPARE_WITH_TIMEOUT(
            providerStatus(s.provider).value(QStringLiteral("used_tokens")).toInt(), reported, 10000);
        const QJsonObject p = providerStatus(s.provider);
        QCOMPARE(p.value(QStringLiteral("used_requests")).toInt(), CLIENTS * ROUNDS * 2);
        QVERIFY(p.value(QStringLiteral("slots")).isArray());
        QCOMPARE(p.value(QStringLiteral("slots")).toArray().size(), 0);
        QCOMPARE(p.value(QStringLiteral("waiting")).toInt(-1), 0);
    }
}

QTEST_GUILESS_MAIN(TestSdkClients)
#include "tst_sdkclients.moc"
