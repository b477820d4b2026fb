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
//
// openaiClientsWithinOpenAIsOwnRules: OpenAI SDK clients (Chat Completions and the Responses
// API, plain and streamed) through `tollgate proxy openai`, in front of a mock that enforces
// OpenAI's own rules per model (requests and tokens per window, where tokens are input + output
// with the output reserved from the request's bound and corrected at its end; requests and
// tokens per day), with Tollgate set to the same figures in the provider's terms. No request may
// reach the mock while it has no room (it counts them: noRoom), and Tollgate's per-day usage of
// each model is exactly what the mock counted.

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
    void openaiClientsWithinOpenAIsOwnRules();

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

void TestSdkClients::openaiClientsWithinOpenAIsOwnRules()
{
    // The mock's "minute" is 1 s and its day 10 minutes (longer than the test: nothing leaves
    // it). gpt-mock-chat: 4 requests and 700 tokens a window, 10 requests a day (binding);
    // gpt-mock-resp: 4 requests and 300 tokens a window, 350 tokens a day (binding).
    Child mock = TestSupport::startChild(QStringLiteral("node"),
        { MOCK, QStringLiteral("--openai-rpm"), QStringLiteral("4"), QStringLiteral("--openai-tpm"),
            QStringLiteral("700"), QStringLiteral("--openai-rpd"), QStringLiteral("10"), QStringLiteral("--openai-tpd"),
            QStringLiteral("100000"), QStringLiteral("--window-ms"), QStringLiteral("1000"), QStringLiteral("--day-ms"),
            QStringLiteral("600000"), QStringLiteral("--openai-models"),
            QStringLiteral(R"({"gpt-mock-resp":{"tpm":300,"rpd":1000,"tpd":350}})") });
    QVERIFY(mock);
    const QByteArray port = TestSupport::firstLine(*mock);
    QVERIFY2(!port.isEmpty(), "the mock provider did not start");
    const QString mockUrl = QStringLiteral("http://127.0.0.1:") + QString::fromLatin1(port);

    // The same figures per model. Tollgate's window is 1.5 s against the mock's 1 s: Tollgate
    // counts a request from its admission, the provider from its arrival a moment later, so at a
    // window's edge a request admitted as the oldest leaves Tollgate's window may arrive before
    // that one has left the provider's (a real minute has the same edge; the margin covers the
    // transit on a loaded machine). A day in Tollgate is 24 h: longer than the mock's.
    const QString home = m_dir.filePath(QStringLiteral("rules-home"));
    auto set = [&](const QString& args) {
        const Ran r = TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH),
            QStringList { QStringLiteral("--home"), home } + args.split(QLatin1Char(' ')));
        QVERIFY2(r.code == 0, r.err.constData());
    };
    set(QStringLiteral("limits set openai --parallel 8 --requests 1000"));
    set(QStringLiteral("limits set openai --model gpt-mock-chat --window 1.5 --requests 4 --tokens 700 "
                       "--requests-per-day 10 --tokens-per-day 100000"));
    set(QStringLiteral("limits set openai --model gpt-mock-resp --window 1.5 --requests 4 --tokens 300 "
                       "--requests-per-day 1000 --tokens-per-day 350"));
    if (QTest::currentTestFailed())
        return;
    Child proxy = TestSupport::startChild(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("proxy"), QStringLiteral("openai"), QStringLiteral("--home"), home,
            QStringLiteral("--upstream"), mockUrl, QStringLiteral("--listen"), QStringLiteral("127.0.0.1:0") });
    QVERIFY(proxy);
    const QByteArray line = TestSupport::firstLine(*proxy);
    QVERIFY2(line.startsWith("listening on http://127.0.0.1:"), line.constData());
    const QString proxyUrl = QString::fromUtf8(line.mid(13, line.indexOf(' ', 13) - 13));

    // 8 clients, 4 of each model, 3 rounds of a plain and a streamed call: 24 calls a model,
    // more than either day allows.
    QProcess clients;
    clients.setProgram(QStringLiteral("node"));
    clients.setArguments({ SDK_DIR + QStringLiteral("/sdkclients.js"), QStringLiteral("openai-rules"), proxyUrl,
        mockUrl, QStringLiteral("8"), QStringLiteral("3") });
    clients.start();
    QVERIFY(clients.waitForStarted());
    QVERIFY2(clients.waitForFinished(240000), "the clients did not finish"); // a deadline only
    const QByteArray out = clients.readAllStandardOutput();
    const QByteArray err = clients.readAllStandardError();
    QVERIFY2(clients.exitStatus() == QProcess::NormalExit && clients.exitCode() == 0, (out + err).constData());
    const QJsonObject summary = QJsonDocument::fromJson(out).object();
    QVERIFY2(summary.value(QStringLiteral("failures")).toArray().isEmpty(), out.constData());

    const Ran r = TestSupport::run(QStringLiteral("curl"), { QStringLiteral("-sS"), mockUrl + QStringLiteral("/_openai") });
    const QJsonObject rules = QJsonDocument::fromJson(r.out).object();
    const QByteArray both = out + "\n" + r.out;
    // Nothing reached the mock without room, nor while its last answer said nothing was left.
    QCOMPARE(rules.value(QStringLiteral("noRoom")).toInt(-1), 0);
    QCOMPARE(rules.value(QStringLiteral("violations")).toInt(-1), 0);
    QVERIFY2(rules.value(QStringLiteral("chat")).toInt() > 0 && rules.value(QStringLiteral("responses")).toInt() > 0
            && rules.value(QStringLiteral("streams")).toInt() > 0,
        both.constData());
    const QJsonObject answered = summary.value(QStringLiteral("answered")).toObject();
    const QJsonObject refused = summary.value(QStringLiteral("refusedByProxy")).toObject();
    const QJsonObject models = rules.value(QStringLiteral("models")).toObject();
    for (const QString& model : { QStringLiteral("gpt-mock-chat"), QStringLiteral("gpt-mock-resp") }) {
        // Every call was answered or refused by the proxy itself (the day spent, no room before
        // the deadline); the day was reached, so some were.
        QCOMPARE(answered.value(model).toInt() + refused.value(model).toInt(), 24);
        QVERIFY2(refused.value(model).toInt() > 0, both.constData());
        QCOMPARE(models.value(model).toObject().value(QStringLiteral("admitted")).toInt(), answered.value(model).toInt());
    }
    QCOMPARE(answered.value(QStringLiteral("gpt-mock-chat")).toInt(), 10); // the day's requests, all of them
    QCOMPARE(summary.value(QStringLiteral("usageTokens")).toInt(), rules.value(QStringLiteral("usageTokens")).toInt());

    // Tollgate's day holds, per model, exactly the tokens the mock counted (corrected from the
    // reservation to the real output just after each answer: read until it settles).
    auto dayTokens = [&](const QString& model) {
        const Ran s = TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH),
            { QStringLiteral("--home"), home, QStringLiteral("status"), QStringLiteral("--json") });
        const QJsonObject p = QJsonDocument::fromJson(s.out).object().value(QStringLiteral("providers")).toArray().first().toObject();
        for (const QJsonValue b : p.value(QStringLiteral("classes")).toObject().value(model).toObject().value(QStringLiteral("budgets")).toArray()) {
            const QJsonObject o = b.toObject();
            if (o.value(QStringLiteral("metric")).toString() == QStringLiteral("tokens")
                && o.value(QStringLiteral("per")).toString() == QStringLiteral("day"))
                return o.value(QStringLiteral("used")).toInt();
        }
        return -1;
    };
    for (const QString& model : { QStringLiteral("gpt-mock-chat"), QStringLiteral("gpt-mock-resp") }) {
        const int counted = models.value(model).toObject().value(QStringLiteral("tokens")).toInt();
        QVERIFY(counted > 0);
        QTRY_COMPARE_WITH_TIMEOUT(dayTokens(model), counted, 10000);
    }
}

QTEST_GUILESS_MAIN(TestSdkClients)
#include "tst_sdkclients.moc"
