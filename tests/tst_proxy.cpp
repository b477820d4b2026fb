// `tollgate proxy` end to end, with real processes only: the CLI's proxy, a mock provider
// (tests/helpers/mockprovider.js, Node's http module) that enforces its own quota and answers
// like Anthropic or OpenAI, and curl as the client. What must hold: answers (JSON and
// server-sent events) pass through intact and as they arrive; the shared quota admits each
// request first (slots held for the whole exchange); a provider's 429 backs everyone off and
// a spend cap pauses the provider; the proxy's own 429 carries a correct Retry-After; a
// client that hangs up while queued leaves the queue; bad input gets a clear answer or a
// clean close, and nothing is left held.

#include "helpers/redisserver.h"
#include "helpers/testcerts.h"
#include "helpers/testshard.h"
#include "testsupport.h"

#include <QCryptographicHash>
#include <QDateTime>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>
#include <arpa/inet.h>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>
#include <variant>

namespace {

using Ran = TestSupport::Ran;

const QString MOCK = QStringLiteral(TOLLGATE_TEST_DATA "/../helpers/mockprovider.js");

using Child = TestSupport::Child;

} // namespace

class TestProxy final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void init();
    void cleanup();
    void answersPassThroughIntact();
    void streamsArriveAsTheyAreSent();
    void theTokenWindowFollowsTheRealUsage();
    void aProvider429BacksEveryoneOff();
    void aQueuedRequestDoesNotSlipIntoA429sBackoff();
    void nothingGoesWhileTheProviderSaysNothingIsLeft();
    void spendCapPausesTheProvider();
    void roomPastTheQueueTimeoutIsRefusedAtOnceWithItsTime();
    void slotsAreHeldForTheWholeExchange();
    void aClientThatHangsUpWhileQueuedLeavesTheQueue();
    void badInputGetsAClearAnswerOrAClose();
    void anUpstreamThatBreaksOffMidStream();
    void aStalledExchangeIsEnded();
    void aClientThatLeavesMidStreamStopsTheUpstream();
    void headRequestsAndHugeTimeouts();
    void keptAliveAnswersEndExactlyWhereTheyEnd();
    void upstreamConnectionsAreKeptAndRetriedWhenClosed();
    void listensOnLoopbackOnly();
    void elsewhereOnlyWithASharedToken();
    void aTlsUpstreamIsAlwaysVerified();
    void aClientWithoutANameIsNamedByItsProcess();
    void bufferedBodiesAreBoundedTogether();
    void streamedBodiesGoUpstreamAsTheyCome();
    void uploadsThatAreNotJsonStreamToo();
    void abusiveBodiesAreReadInBoundedMemory();
    void stoppingEndsIdleConnectionsAndFinishesAnswers();
    void idleConnectionsMakeRoomForNewOnes();
    void aRefusalWhenEveryConnectionIsBusyIsHeard();
    void theUpstreamsStatusLineAndTheTargetAsTheyShouldBe();
    void anOutputBoundPastTheLargestCountWaits();
    void aHoldIsNotedOncePerHold();
    void neverMoreThanTheProviderSaysRemain();
    void aHeldBodyIsNotCutOffByTheStallWatch();
    void aStoreLockHeldElsewhereStallsNoStream();
    void aHomeThatVanishesOrIsSwappedGetsClearAnswers();
    void aSlotNotGivenBackInAnOutageIsGivenBackAfter();
    void aClientThatLeavesBeforeTheAnswerEndsTheExchange();
    void aClientThatHangsUpInASilentStretchEndsTheExchange_data();
    void aClientThatHangsUpInASilentStretchEndsTheExchange();
    void headersGoOutBeforeTheBody();
    void aTruncatedDoorbellKillsNothing();
    void theProvidersOwnTermsAreCounted();
    void anAgentRequestOverTheTokenLimitWaitsForRoom_data();
    void anAgentRequestOverTheTokenLimitWaitsForRoom();
    void aSubscriptionRejectionHoldsUntilItsResetWithoutPausing();

private:
    Ran cli(const QStringList& args) const
    {
        QStringList all = args;
        const qsizetype at
            = std::min<qsizetype>(args.first() == QStringLiteral("limits") ? 2 : 1, all.size());
        all.insert(at, QStringLiteral("--home"));
        all.insert(at + 1, m_home);
        return TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH), all, 60000);
    }
    void setLimits(const QStringList& extra)
    {
        const Ran r
            = cli(QStringList { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("anthropic") }
                + extra);
        QVERIFY2(r.code == 0, r.err.constData());
    }
    void startProxy(const QStringList& extra = {}) { startProxyAt(QStringLiteral("127.0.0.1:0"), extra); }
    void startProxyAt(const QString& listen, const QStringList& extra)
    {
        m_proxy = TestSupport::startChild(QStringLiteral(TOLLGATE_CLI_PATH),
            QStringList { QStringLiteral("proxy"), QStringLiteral("anthropic"), QStringLiteral("--home"),
                m_home, QStringLiteral("--upstream"), m_mockUrl, QStringLiteral("--listen"), listen }
                + extra);
        QVERIFY(m_proxy);
        const QByteArray line = TestSupport::firstLine(*m_proxy);
        QVERIFY2(
            line.startsWith("listening on http://" + listen.section(QLatin1Char(':'), 0, 0).toUtf8() + ':'),
            line.constData());
        m_proxyUrl = QString::fromUtf8(line.mid(13, line.indexOf(' ', 13) - 13));
        m_proxyPort = static_cast<quint16>(m_proxyUrl.section(QLatin1Char(':'), -1).toInt());
    }
    // curl's output with -i, less the interim "100 Continue" it asks for before a body past
    // 1 MiB (rawCurl keeps it).
    Ran curl(const QStringList& args, int limitMs = 60000) const
    {
        Ran r = rawCurl(args, limitMs);
        static const QByteArray CONTINUE = "HTTP/1.1 100 Continue\r\n\r\n";
        if (r.out.startsWith(CONTINUE))
            r.out.remove(0, CONTINUE.size());
        return r;
    }
    Ran rawCurl(const QStringList& args, int limitMs = 60000) const
    {
        return TestSupport::run(
            QStringLiteral("curl"), QStringList { QStringLiteral("-sS") } + args, limitMs);
    }
    // POST to the proxy's /v1/messages with `body`; `mock`: the mock's behaviour header.
    QStringList post(const QString& body, const QString& mock = {},
        const QString& path = QStringLiteral("/v1/messages")) const
    {
        QStringList a { QStringLiteral("-i"), m_proxyUrl + path, QStringLiteral("-H"),
            QStringLiteral("content-type: application/json"), QStringLiteral("-d"), body };
        if (!mock.isEmpty())
            a << QStringLiteral("-H") << QStringLiteral("x-mock: ") + mock;
        return a;
    }
    // A streamed request the mock answers slowly (an event every 150 ms), on a raw socket.
    bool postSlowStream(QTcpSocket& s, const QByteArray& body) const
    {
        s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
        if (!s.waitForConnected(10000))
            return false;
        s.write(rawMockPost(body, "slow"));
        return true;
    }
    // `count` connections to the proxy that have sent nothing yet (fewer: one did not connect).
    std::vector<std::unique_ptr<QTcpSocket>> connectIdle(int count) const
    {
        std::vector<std::unique_ptr<QTcpSocket>> sockets;
        for (int i = 0; i < count; ++i) {
            auto s = std::make_unique<QTcpSocket>();
            s->connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
            if (!s->waitForConnected(10000))
                break;
            sockets.push_back(std::move(s));
        }
        return sockets;
    }
    // A POST /v1/messages with a JSON `body` the mock answers as `mock` says (with an x-mock-id
    // `id`, for /_release), as bytes for a raw socket.
    static QByteArray rawMockPost(const QByteArray& body, const QByteArray& mock, const QByteArray& id = {})
    {
        return "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nx-mock: " + mock
            + (id.isEmpty() ? QByteArray() : "\r\nx-mock-id: " + id)
            + "\r\nContent-Length: " + QByteArray::number(body.size()) + "\r\n\r\n" + body;
    }
    // A POST /v1/messages with a JSON `body`, as bytes for a raw socket.
    static QByteArray rawPost(const QByteArray& body)
    {
        return "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
            + QByteArray::number(body.size()) + "\r\n\r\n" + body;
    }
    // Reads into `got` until it holds `marker` (or 20 s since `t` started).
    static void readUntil(QTcpSocket& s, QByteArray& got, const char* marker, const QElapsedTimer& t)
    {
        while (!got.contains(marker) && !t.hasExpired(20000)) {
            s.waitForReadyRead(200);
            got += s.readAll();
        }
    }
    QJsonObject mockStats() const
    {
        QStringList args { m_mockUrl + QStringLiteral("/_stats") };
        if (!m_mockCa.isEmpty())
            args << QStringLiteral("--cacert") << m_mockCa;
        const Ran r = curl(args);
        return QJsonDocument::fromJson(r.out).object();
    }
    // What the provider's window holds of one budget (status --json: "input_tokens",
    // "output_tokens"); -1: no such budget.
    int usedOf(const char* metric) const
    {
        const QJsonArray providers = status().value(QStringLiteral("providers")).toArray();
        if (providers.isEmpty())
            return -1;
        for (const QJsonValue b : providers[0].toObject().value(QStringLiteral("budgets")).toArray()) {
            const QJsonObject o = b.toObject();
            if (o.value(QStringLiteral("metric")).toString() == QLatin1String(metric)
                && o.value(QStringLiteral("per")).toString() == QStringLiteral("window"))
                return o.value(QStringLiteral("used")).toInt();
        }
        return -1;
    }
    QJsonObject status() const
    {
        const Ran r = cli({ QStringLiteral("status"), QStringLiteral("--json") });
        return QJsonDocument::fromJson(r.out).object();
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
    Child m_mock;
    QString m_mockUrl;
    QString m_mockCa; // the CA of a mock over TLS (its /_stats asked with it)
    Child m_proxy;
    QString m_proxyUrl;
    quint16 m_proxyPort = 0;
};

void TestProxy::initTestCase()
{
    if (QStandardPaths::findExecutable(QStringLiteral("node")).isEmpty()
        || QStandardPaths::findExecutable(QStringLiteral("curl")).isEmpty())
        QFAIL("node or curl is not installed (scripts/bootstrap.sh installs both)");
    QVERIFY2(QFile::exists(MOCK), qPrintable(MOCK));
}

void TestProxy::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->filePath(QStringLiteral("home"));
    m_mock = TestSupport::startChild(QStringLiteral("node"), { MOCK });
    QVERIFY(m_mock);
    const QByteArray port = TestSupport::firstLine(*m_mock);
    QVERIFY2(!port.isEmpty(), "the mock provider did not start");
    m_mockUrl = QStringLiteral("http://127.0.0.1:") + QString::fromLatin1(port);
    m_mockCa.clear();
}

void TestProxy::cleanup()
{
    m_proxy.reset();
    m_mock.reset();
}

void TestProxy::answersPassThroughIntact()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("4") });
    startProxy();
    const QString body = QStringLiteral(R"({"model":"claude-x","max_tokens":100,"messages":[]})");
    const Ran direct = curl({ m_mockUrl + QStringLiteral("/v1/messages"), QStringLiteral("-d"), body });
    Ran r = curl(post(body) << QStringLiteral("-H") << QStringLiteral("X-Tollgate-Caller: nightly\tjob"));
    QVERIFY2(r.code == 0, r.err.constData());
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    QVERIFY(r.out.contains("anthropic-ratelimit-requests-remaining:"));
    QVERIFY2(r.out.endsWith(direct.out), r.out.constData()); // the body, byte for byte
    // OpenAI's path and format too.
    r = curl(post(QStringLiteral(R"({"model":"gpt-x","max_completion_tokens":10})"), {},
        QStringLiteral("/v1/chat/completions")));
    QVERIFY(r.out.contains("\"total_tokens\":16"));
    // Admitted through the shared quota, as the caller the header named (sanitised), and the
    // header itself never reached the provider.
    const Ran history = cli({ QStringLiteral("history"), QStringLiteral("--json") });
    QVERIFY2(history.out.contains("\"caller\":\"nightly job\""), history.out.constData());
    QVERIFY(history.out.contains("\"model\":\"claude-x\""));
    QCOMPARE(mockStats().value(QStringLiteral("callers")).toObject().size(), 0);
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 3);
}

void TestProxy::streamsArriveAsTheyAreSent()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy();
    // The mock sends an event every 150 ms: each must reach the client before the next is
    // sent (read with a raw socket: the first event arrives while the stream is still open).
    QTcpSocket s;
    const QByteArray body = R"({"model":"claude-x","max_tokens":10,"stream":true})";
    QVERIFY(postSlowStream(s, body));
    QByteArray got;
    QElapsedTimer t;
    t.start();
    readUntil(s, got, "content_block_delta", t);
    QVERIFY2(got.contains("content_block_delta"), got.constData());
    QVERIFY2(!got.contains("message_stop"), "the whole stream arrived at once: it was buffered");
    readUntil(s, got, "message_stop", t);
    QVERIFY(got.contains("message_stop"));
    // And through curl, intact: the same events as straight from the mock.
    const Ran direct = curl({ QStringLiteral("-N"), m_mockUrl + QStringLiteral("/v1/messages"),
        QStringLiteral("-d"), QString::fromUtf8(body) });
    const Ran proxied = curl({ QStringLiteral("-N"), m_proxyUrl + QStringLiteral("/v1/messages"),
        QStringLiteral("-d"), QString::fromUtf8(body) });
    QCOMPARE(proxied.out, direct.out);
}

void TestProxy::theTokenWindowFollowsTheRealUsage()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--tokens"),
        QStringLiteral("100000") });
    startProxy();
    auto usedTokens = [&] {
        const QJsonArray providers = status().value(QStringLiteral("providers")).toArray();
        return providers.isEmpty() ? -1
                                   : providers[0].toObject().value(QStringLiteral("used_tokens")).toInt();
    };
    // Estimated at admission (body/4 + max_tokens 2000); the mock reports 11 in + 5 out.
    QVERIFY(curl(post(QStringLiteral(R"({"model":"claude-x","max_tokens":2000})")))
                .out.startsWith("HTTP/1.1 200"));
    QTRY_COMPARE_WITH_TIMEOUT(usedTokens(), 16, 10000); // recorded just after the answer
    // A stream: the usage comes from message_start and message_delta.
    const Ran r = curl({ QStringLiteral("-N"), m_proxyUrl + QStringLiteral("/v1/messages"),
        QStringLiteral("-d"), QStringLiteral(R"({"model":"claude-x","max_tokens":2000,"stream":true})") });
    QVERIFY(r.out.contains("message_stop"));
    QTRY_COMPARE_WITH_TIMEOUT(usedTokens(), 32, 10000); // recorded just after the answer
    // OpenAI's final chunk too.
    curl({ QStringLiteral("-N"), m_proxyUrl + QStringLiteral("/v1/chat/completions"), QStringLiteral("-d"),
        QStringLiteral(R"({"model":"gpt-x","max_tokens":2000,"stream":true})") });
    QTRY_COMPARE_WITH_TIMEOUT(usedTokens(), 48, 10000); // recorded just after the answer
    // An answer that reports no usage keeps its estimate (the conservative side).
    curl(post(QStringLiteral("{}"), QStringLiteral("529")));
    QVERIFY(usedTokens() > 48);
    // 529 (overloaded) is recorded, and is not a quota event: no 429 counted, no backoff.
    QTRY_VERIFY_WITH_TIMEOUT(
        cli({ QStringLiteral("history"), QStringLiteral("--json") }).out.contains("\"type\":\"overloaded\""),
        10000);
    const QJsonObject p = status().value(QStringLiteral("providers")).toArray()[0].toObject();
    QCOMPARE(p.value(QStringLiteral("consecutive_429s")).toInt(), 0);
    QCOMPARE(p.value(QStringLiteral("backoff_remaining_ms")).toInt(), 0);
    QVERIFY(curl(post(QStringLiteral("{}"))).out.startsWith("HTTP/1.1 200"));
}

void TestProxy::aProvider429BacksEveryoneOff()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("0.5") });
    Ran r = curl(post(QStringLiteral("{}"), QStringLiteral("429")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 429"), r.out.constData());
    QVERIFY(r.out.contains("retry-after: 7")); // passed to the client unchanged
    const int seen = mockStats().value(QStringLiteral("requests")).toInt();
    // Everyone backs off now: the next request never reaches the provider; the proxy answers
    // 429 itself, in the provider's format, with a Retry-After the SDK's retry logic can use.
    r = curl(post(QStringLiteral("{}")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 429"), r.out.constData());
    QVERIFY(r.out.contains("Server: tollgate-proxy"));
    QVERIFY(r.out.contains("\"type\":\"rate_limit_error\""));
    const int at = r.out.indexOf("Retry-After: ");
    QVERIFY(at > 0);
    const int retryAfter = r.out.mid(at + 13, r.out.indexOf('\r', at) - at - 13).toInt();
    QVERIFY2(retryAfter >= 7 && retryAfter <= 24 * 3600, r.out.constData());
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), seen);
    // The CLI sees the same backoff.
    r = cli({ QStringLiteral("acquire"), QStringLiteral("anthropic"), QStringLiteral("--caller"),
        QStringLiteral("c"), QStringLiteral("--timeout"), QStringLiteral("0") });
    QCOMPARE(r.code, 1);
}

// --parallel 1: one request holds the slot, another waits for it; the first's answer is a
// 429. The backoff is in place before the slot is given back, so the waiter is not handed the
// slot and sent upstream in between (the slot went back first, the 429 was reported after).
void TestProxy::aQueuedRequestDoesNotSlipIntoA429sBackoff()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("1") });
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("60") });
    QTcpSocket first;
    first.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(first.waitForConnected(10000));
    first.write(rawMockPost("{}", "late-429", "first"));
    QElapsedTimer t;
    t.start();
    while (mockStats().value(QStringLiteral("gated")).toArray().size() != 1 && !t.hasExpired(20000))
        QTest::qWait(20);
    QCOMPARE(mockStats().value(QStringLiteral("gated")).toArray().size(), qsizetype(1));
    QTcpSocket second;
    second.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(second.waitForConnected(10000));
    second.write(rawPost("{}"));
    // How many entries the provider's `list` ("queue", "slots") has in `status --json`.
    auto count = [&](const char* list) {
        for (const auto& p : status().value(QStringLiteral("providers")).toArray()) {
            if (p.toObject().value(QStringLiteral("provider")).toString() == QStringLiteral("anthropic"))
                return p.toObject().value(QLatin1String(list)).toArray().size();
        }
        return qsizetype(-1);
    };
    while (count("queue") != 1 && !t.hasExpired(20000))
        QTest::qWait(20);
    QCOMPARE(count("queue"), qsizetype(1));
    curl({ QStringLiteral("-X"), QStringLiteral("POST"), m_mockUrl + QStringLiteral("/_release?id=first") });
    QByteArray got;
    readUntil(first, got, "rate_limit_error", t);
    QVERIFY2(got.startsWith("HTTP/1.1 429"), got.constData());
    // The first exchange is settled once its slot is free again (the waiter still waits).
    while (count("slots") != 0 && !t.hasExpired(20000))
        QTest::qWait(20);
    QCOMPARE(count("slots"), qsizetype(0));
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 1); // the waiter never went
    const Ran history = cli({ QStringLiteral("history"), QStringLiteral("--json") });
    QCOMPARE(history.out.count("\"type\":\"admit\""), 1);
    // The backoff came first: the race that let the waiter in needs luck to show, the order not.
    const QJsonArray events = QJsonDocument::fromJson(history.out).array();
    qsizetype backoffAt = -1, releaseAt = -1;
    for (qsizetype i = 0; i < events.size(); ++i) {
        const QString type = events[i].toObject().value(QStringLiteral("type")).toString();
        if (type == QStringLiteral("429") && backoffAt < 0)
            backoffAt = i;
        if (type == QStringLiteral("release") && releaseAt < 0)
            releaseAt = i;
    }
    QVERIFY2(backoffAt >= 0 && releaseAt > backoffAt, history.out.constData());
}

void TestProxy::nothingGoesWhileTheProviderSaysNothingIsLeft()
{
    // The provider allows 2 requests a minute; Tollgate is set to 100 (someone guessed wrong).
    // Its headers say so after the second answer: nobody is sent until its reset.
    m_mock.reset();
    m_mock = TestSupport::startChild(QStringLiteral("node"),
        { MOCK, QStringLiteral("--limit"), QStringLiteral("2"), QStringLiteral("--token-limit"),
            QStringLiteral("40000") });
    QVERIFY(m_mock);
    m_mockUrl = QStringLiteral("http://127.0.0.1:") + QString::fromLatin1(TestSupport::firstLine(*m_mock));
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("0.5") });
    for (int i = 0; i < 2; ++i)
        QVERIFY(curl(post(QStringLiteral("{}"))).out.startsWith("HTTP/1.1 200"));
    for (int i = 0; i < 3; ++i) {
        const Ran r = curl(post(QStringLiteral("{}")));
        QVERIFY2(r.out.startsWith("HTTP/1.1 429"), r.out.constData());
        QVERIFY(r.out.contains("Server: tollgate-proxy")); // the proxy's answer, not the provider's
    }
    const QJsonObject stats = mockStats();
    QCOMPARE(stats.value(QStringLiteral("requests")).toInt(), 2);
    QCOMPARE(stats.value(QStringLiteral("refused")).toInt(), 0); // the provider never had to refuse
    const Ran history = cli({ QStringLiteral("history"), QStringLiteral("--json") });
    QVERIFY2(history.out.contains("\"type\":\"hold\""), history.out.constData());
    QVERIFY(!history.out.contains("\"type\":\"429\""));

    // The provider's own limits differ from Tollgate's: said once in the history (not per
    // answer), and by status (JSON and text) for as long as they differ.
    QCOMPARE(history.out.count("\"type\":\"limit-mismatch\""), 2);
    QVERIFY2(history.out.contains("provider reports 2 requests/min; Tollgate is set to 100"),
        history.out.constData());
    QVERIFY(history.out.contains("provider reports 40000 tokens/min; Tollgate sets no token limit"));
    const Ran status = cli({ QStringLiteral("status"), QStringLiteral("--json") });
    const QJsonObject p = QJsonDocument::fromJson(status.out)
                              .object()
                              .value(QStringLiteral("providers"))
                              .toArray()
                              .first()
                              .toObject();
    const QJsonObject reported = p.value(QStringLiteral("provider_reported")).toObject();
    QCOMPARE(reported.value(QStringLiteral("requests_per_minute")).toInt(), 2);
    QCOMPARE(reported.value(QStringLiteral("tokens_per_minute")).toInt(), 40000);
    QCOMPARE(p.value(QStringLiteral("limit_notices")).toArray().size(), 2);
    const Ran text = cli({ QStringLiteral("status") });
    QVERIFY2(text.out.contains("NOTE provider reports 2 requests/min; Tollgate is set to 100"),
        text.out.constData());
    // Set to match the provider: the notice goes at once, with no new answer needed.
    setLimits({ QStringLiteral("--requests"), QStringLiteral("2"), QStringLiteral("--tokens"),
        QStringLiteral("40000") });
    const Ran after = cli({ QStringLiteral("status"), QStringLiteral("--json") });
    QVERIFY2(after.out.contains("\"limit_notices\":[]"), after.out.constData());
}

void TestProxy::spendCapPausesTheProvider()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("0.5") });
    const Ran r = curl(post(QStringLiteral("{}"), QStringLiteral("spendcap")));
    QVERIFY(r.out.startsWith("HTTP/1.1 429"));
    QVERIFY(r.out.contains("insufficient_quota"));
    const Ran s = cli({ QStringLiteral("status") });
    QVERIFY2(s.out.contains("PAUSED") || s.out.contains("paused"), s.out.constData());
    QVERIFY2(s.out.contains("spending cap"), s.out.constData());
    // Paused, not backed off: nothing goes until someone resumes. No time ends a pause: the
    // proxy's 429 carries no Retry-After (the client's own backoff applies) and says why.
    const int seen = mockStats().value(QStringLiteral("requests")).toInt();
    const Ran paused = curl(post(QStringLiteral("{}")));
    QVERIFY2(paused.out.startsWith("HTTP/1.1 429"), paused.out.constData());
    QVERIFY(paused.out.contains("Server: tollgate-proxy"));
    QVERIFY2(!paused.out.toLower().contains("retry-after"), paused.out.constData());
    QVERIFY2(paused.out.contains("is paused: the provider reports a spending cap"), paused.out.constData());
    QVERIFY2(paused.out.contains("no known end"), paused.out.constData());
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), seen);
}

// Issue 25 item 6: the window is full for a minute and --queue-timeout is 5 s. The client hears
// at once when to come back (Retry-After: the true seconds, rounded up), and can fall back to
// another model or provider meanwhile; the provider sees nothing.
void TestProxy::roomPastTheQueueTimeoutIsRefusedAtOnceWithItsTime()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("1"), QStringLiteral("--window"),
        QStringLiteral("60") });
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("5") });
    QVERIFY(curl(post(QStringLiteral("{}"))).out.startsWith("HTTP/1.1 200"));
    const int seen = mockStats().value(QStringLiteral("requests")).toInt();
    const Ran r = curl(post(QStringLiteral("{}")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 429"), r.out.constData());
    QVERIFY(r.out.contains("Server: tollgate-proxy"));
    const int at = r.out.indexOf("Retry-After: ");
    QVERIFY2(at > 0, r.out.constData());
    const int retryAfter = r.out.mid(at + 13, r.out.indexOf('\r', at) - at - 13).toInt();
    QVERIFY2(retryAfter >= 50 && retryAfter <= 66, r.out.constData());
    QVERIFY2(r.out.contains("has no room before") && r.out.contains("past this call's deadline"),
        r.out.constData());
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), seen);
    const Ran history = cli({ QStringLiteral("history"), QStringLiteral("--json") });
    QVERIFY2(history.out.contains("no room before the deadline"), history.out.constData());
}

void TestProxy::slotsAreHeldForTheWholeExchange()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("1") });
    startProxy();
    std::vector<Child> clients;
    for (int i = 0; i < 3; ++i) {
        clients.push_back(TestSupport::startChild(QStringLiteral("curl"),
            { QStringLiteral("-sS"), QStringLiteral("-N"), m_proxyUrl + QStringLiteral("/v1/messages"),
                QStringLiteral("-H"), QStringLiteral("x-mock: slow"), QStringLiteral("-d"),
                QStringLiteral(R"({"stream":true})") }));
        QVERIFY(clients.back());
    }
    for (auto& c : clients) {
        QVERIFY(c->waitForFinished(60000));
        QCOMPARE(c->exitCode(), 0);
        QVERIFY(c->readAllStandardOutput().contains("message_stop"));
    }
    const QJsonObject stats = mockStats();
    QCOMPARE(stats.value(QStringLiteral("requests")).toInt(), 3);
    QCOMPARE(stats.value(QStringLiteral("maxConcurrent")).toInt(), 1); // never two at once upstream
}

void TestProxy::aClientThatHangsUpWhileQueuedLeavesTheQueue()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("1") });
    startProxy();
    // One slow stream holds the only slot; a second client queues, then hangs up.
    Child holder = TestSupport::startChild(QStringLiteral("curl"),
        { QStringLiteral("-sS"), QStringLiteral("-N"), m_proxyUrl + QStringLiteral("/v1/messages"),
            QStringLiteral("-H"), QStringLiteral("x-mock: slow"), QStringLiteral("-d"),
            QStringLiteral(R"({"stream":true})") });
    QVERIFY(holder);
    QElapsedTimer t;
    t.start();
    while (mockStats().value(QStringLiteral("concurrent")).toInt() != 1 && !t.hasExpired(20000))
        QTest::qWait(20);
    QTcpSocket queued;
    queued.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(queued.waitForConnected(10000));
    queued.write("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
    QVERIFY(queued.waitForBytesWritten(10000));
    auto waiters = [&] {
        const QJsonArray providers = status().value(QStringLiteral("providers")).toArray();
        for (const auto& p : providers) {
            const QJsonObject o = p.toObject();
            if (o.value(QStringLiteral("provider")).toString() == QStringLiteral("anthropic"))
                return o.value(QStringLiteral("queue")).toArray().size();
        }
        return qsizetype(-1);
    };
    while (waiters() != 1 && !t.hasExpired(20000))
        QTest::qWait(20);
    QCOMPARE(waiters(), qsizetype(1));
    queued.abort(); // hangs up while queued
    while (waiters() != 0 && !t.hasExpired(20000))
        QTest::qWait(20);
    QCOMPARE(waiters(), qsizetype(0));
    QVERIFY(holder->waitForFinished(60000));
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 1); // the queued one never went
}

void TestProxy::badInputGetsAClearAnswerOrAClose()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy({ QStringLiteral("--header-timeout"), QStringLiteral("1") });
    // What the proxy answered, and whether it closed the connection (rather than the test
    // giving up after 30 s).
    bool closed = false;
    auto exchange = [&](const QByteArray& bytes) {
        closed = false;
        QTcpSocket s;
        s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
        if (!s.waitForConnected(10000))
            return QByteArray("no connection");
        s.write(bytes);
        QByteArray got;
        QElapsedTimer t;
        t.start();
        while (s.state() == QAbstractSocket::ConnectedState && !t.hasExpired(30000)) {
            s.waitForReadyRead(200);
            got += s.readAll();
        }
        closed = s.state() != QAbstractSocket::ConnectedState;
        return got + s.readAll();
    };
    QByteArray got = exchange("GARBAGE\r\n\r\n");
    QVERIFY2(got.startsWith("HTTP/1.1 400"), got.constData());
    QVERIFY(closed);
    got = exchange("GET / HTTP/1.1\r\nX-Big: " + QByteArray(70 * 1024, 'a') + "\r\n\r\n");
    QVERIFY2(got.startsWith("HTTP/1.1 431"), got.left(200).constData());
    got = exchange("POST /v1/messages HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n{}");
    QVERIFY2(got.startsWith("HTTP/1.1 413"), got.left(200).constData());
    // Chunk trailers that never end (Beast bounds neither trailers nor chunk lines): refused
    // at 64 KiB, not read into memory until the body deadline.
    got = exchange("POST /v1/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Trailer: "
        + QByteArray(200 * 1024, 'a'));
    QVERIFY2(got.startsWith("HTTP/1.1 400"), got.left(200).constData());
    QVERIFY(closed);
    // Slowloris: headers that never end, or trickle in a byte at a time, are cut off at the
    // header deadline (here 1 s), not held.
    got = exchange("POST /v1/messages HTTP/1.1\r\nHost: x\r\n");
    QVERIFY2(got.startsWith("HTTP/1.1 408"), got.constData());
    QVERIFY(closed);
    {
        QTcpSocket s;
        s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
        QVERIFY(s.waitForConnected(10000));
        s.write("POST /v1/messages HTTP/1.1\r\n");
        QByteArray answer;
        QElapsedTimer t;
        t.start();
        while (s.state() == QAbstractSocket::ConnectedState && !t.hasExpired(30000)) {
            s.write("X"); // one byte every 100 ms: each read succeeds, the header never ends
            s.waitForBytesWritten(1000);
            s.waitForReadyRead(100);
            answer += s.readAll();
        }
        QVERIFY2(
            s.state() != QAbstractSocket::ConnectedState, "a trickling client held its connection for 30 s");
        QVERIFY2((answer + s.readAll()).startsWith("HTTP/1.1 408"), answer.constData());
    }
    // A Transfer-Encoding Beast would read as "no body": its bytes would be the next request,
    // forwarded unadmitted (smuggled). Refused and closed; nothing reaches the provider.
    const int before = mockStats().value(QStringLiteral("requests")).toInt();
    for (const QByteArray& coding : { QByteArray("identity"), QByteArray("gzip"),
             QByteArray("chunked, chunked"), QByteArray("chunked, gzip"), QByteArray("") }) {
        got = exchange("POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + coding
            + "\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n");
        QVERIFY2(got.startsWith("HTTP/1.1 400") && got.contains("Transfer-Encoding"),
            (coding + ": " + got).constData());
        QCOMPARE(got.count("HTTP/1.1"), 1);
        QVERIFY(closed);
    }
    // A coding on top of chunked is not decoded by the proxy: 501, not forwarded without it.
    got = exchange("POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, "
                   "chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n");
    QVERIFY2(got.startsWith("HTTP/1.1 501"), got.constData());
    // Targets that would leave the upstream's base path: absolute-form, "*", dot-segments
    // (plain or percent-encoded), no leading slash.
    for (const QByteArray& target : { QByteArray("http://evil.example/v1/x"), QByteArray("*"),
             QByteArray("/v1/../../etc/passwd"), QByteArray("/v1/%2E%2e/x"), QByteArray("/./v1/messages"),
             QByteArray("v1/messages"), QByteArray("/v1/..?q=1"), QByteArray("/v1/..%2f..%2fx"),
             QByteArray("/v1/..\\x"), QByteArray("/v1/..;/x"), QByteArray("/v1/%2E;p=1/x") }) {
        got = exchange("GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n");
        QVERIFY2(got.startsWith("HTTP/1.1 400") && got.contains("request target"),
            (target + ": " + got).constData());
    }
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), before);
    for (const QJsonValue& path : mockStats().value(QStringLiteral("paths")).toArray())
        QVERIFY2(!path.toString().contains(QStringLiteral("smuggled"))
                && !path.toString().contains(QStringLiteral("..")),
            qPrintable(path.toString()));
    // An HTTP/1.0 client knows no chunked coding: an answer without a length (the mock gives
    // none) comes as it is and ends with the connection, even one the client asked to keep.
    got = exchange(
        "POST /v1/messages HTTP/1.0\r\nConnection: keep-alive\r\nContent-Type: application/json\r\n"
        "Content-Length: 2\r\n\r\n{}");
    QVERIFY2(
        got.startsWith("HTTP/1.1 200") && !got.contains("chunked") && got.endsWith("}"), got.constData());
    QVERIFY(closed);
    // A dot inside a segment is a name like any other.
    got = exchange("GET /v1/models/claude-3.5..x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    QVERIFY2(!got.contains("request target"), got.constData());
    // A body that is not JSON still goes (the provider answers it), and nothing is held.
    const Ran r = curl(post(QStringLiteral("not json")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 400"), r.out.constData());
    QVERIFY(r.out.contains("body is not JSON"));
    const QJsonArray providers = status().value(QStringLiteral("providers")).toArray();
    QCOMPARE(providers.size(), 1);
    QCOMPARE(providers[0].toObject().value(QStringLiteral("slots")).toArray().size(), 0);
}

void TestProxy::anUpstreamThatBreaksOffMidStream()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("1") });
    startProxy();
    Ran r = curl({ QStringLiteral("-N"), m_proxyUrl + QStringLiteral("/v1/messages"), QStringLiteral("-H"),
        QStringLiteral("x-mock: cut"), QStringLiteral("-d"), QStringLiteral(R"({"stream":true})") });
    QVERIFY2(r.code != 0, "a stream cut off upstream was passed on as complete");
    QVERIFY(!r.out.contains("message_stop"));
    // Recorded as what it is (issue 26 item 7), not as a success: no `ok`, a `broken-off` event.
    auto history = [&] { return cli({ QStringLiteral("history"), QStringLiteral("--json") }).out; };
    QTRY_VERIFY_WITH_TIMEOUT(history().contains("\"type\":\"broken-off\""), 10000);
    QVERIFY2(!history().contains("\"type\":\"ok\""), history().constData());
    QVERIFY2(history().contains("broke off its 200 answer"), history().constData());
    // The slot came back: the next request goes at once (and that one is a success).
    r = curl(post(QStringLiteral("{}")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    QTRY_VERIFY_WITH_TIMEOUT(history().contains("\"type\":\"ok\""), 10000);
}

void TestProxy::aStalledExchangeIsEnded()
{
    // An upstream that sends its first event and then nothing, its connection open: past
    // --stall-timeout the exchange ends (both connections shut), its slot comes back, and the
    // proxy serves the next request.
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("1") });
    startProxy({ QStringLiteral("--stall-timeout"), QStringLiteral("1") });
    const Ran hung = curl({ QStringLiteral("-N"), m_proxyUrl + QStringLiteral("/v1/messages"),
        QStringLiteral("-H"), QStringLiteral("x-mock: hang"), QStringLiteral("-d"),
        QStringLiteral(R"({"model":"m","stream":true})") });
    QVERIFY2(hung.code != 0, hung.out.constData()); // not a proper end: the client knows it is cut short
    QVERIFY(hung.out.contains("message_start"));
    QTRY_COMPARE_WITH_TIMEOUT(mockStats().value(QStringLiteral("aborted")).toInt(), 1, 10000);
    const QJsonArray providers = status().value(QStringLiteral("providers")).toArray();
    QVERIFY(!providers.isEmpty());
    QCOMPARE(providers[0].toObject().value(QStringLiteral("slots")).toArray().size(), 0);
    QVERIFY(curl(post(QStringLiteral(R"({"model":"m"})"))).out.startsWith("HTTP/1.1 200"));
    // An upstream that sends nothing at all: the client is told (504), not cut off wordless.
    Ran r = curl(post(QStringLiteral(R"({"model":"m"})"), QStringLiteral("late")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 504") && r.out.contains("--stall-timeout"), r.out.constData());
    // Interim answers without end, then silence: refused as the answer, not relayed as one.
    r = curl(post(QStringLiteral(R"({"model":"m"})"), QStringLiteral("continue-flood")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 502") && r.out.contains("interim"), r.out.constData());
    r = curl(post(QStringLiteral(R"({"model":"m"})")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
}

void TestProxy::aClientThatLeavesMidStreamStopsTheUpstream()
{
    // Closing the connection is how SDKs cancel a generation: the proxy must close its
    // upstream too, so the provider stops generating (and billing), and give the slot back.
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("1") });
    startProxy();
    {
        QTcpSocket s;
        QVERIFY(postSlowStream(s, R"({"stream":true})"));
        QByteArray got;
        QElapsedTimer t;
        t.start();
        readUntil(s, got, "content_block_delta", t);
        QVERIFY(got.contains("content_block_delta"));
        s.abort();
    }
    QElapsedTimer t;
    t.start();
    while (mockStats().value(QStringLiteral("aborted")).toInt() != 1 && !t.hasExpired(20000))
        QTest::qWait(20);
    QCOMPARE(mockStats().value(QStringLiteral("aborted")).toInt(), 1);
    QVERIFY(curl(post(QStringLiteral("{}"))).out.startsWith("HTTP/1.1 200")); // the slot came back
    // Bodies are asked for uncompressed (the proxy reads usage and errors on the way).
    const QJsonArray encodings = mockStats().value(QStringLiteral("acceptEncoding")).toArray();
    for (const auto& e : encodings)
        QCOMPARE(e.toString(), QStringLiteral("identity"));
}

void TestProxy::headRequestsAndHugeTimeouts()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    // Timeouts far beyond a day are bounded, not overflowed into "already past".
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("1e12"),
        QStringLiteral("--header-timeout"), QStringLiteral("1e12") });
    QVERIFY(curl(post(QStringLiteral("{}"))).out.startsWith("HTTP/1.1 200"));
    // The answer to a HEAD has no body: the exchange ends at its headers.
    const Ran head = curl({ QStringLiteral("-I"), QStringLiteral("--max-time"), QStringLiteral("30"),
        m_proxyUrl + QStringLiteral("/v1/messages") });
    QVERIFY2(head.code == 0, head.err.constData());
    QVERIFY(head.out.startsWith("HTTP/1.1 200"));
    // A HEAD's answer that says chunked, then another request on the same connection: the
    // next answer follows the headers at once (no chunked end marker between).
    {
        QTcpSocket s;
        s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
        QVERIFY(s.waitForConnected(10000));
        s.write(QByteArray("HEAD /v1/messages HTTP/1.1\r\nHost: x\r\nx-mock: head-chunked\r\n\r\n")
            + rawPost(R"({"model":"m"})"));
        QElapsedTimer t;
        t.start();
        QByteArray got;
        readUntil(s, got, "\"stop_reason\"", t);
        const qsizetype end = got.indexOf("\r\n\r\n");
        QVERIFY2(got.startsWith("HTTP/1.1 200") && got.contains("chunked") && end > 0, got.constData());
        QVERIFY2(got.mid(end + 4).startsWith("HTTP/1.1 200"), got.constData());
    }
    // And 0 is refused where it would end every request at once (the queue may be 0: no wait).
    for (const QString& option : { QStringLiteral("--header-timeout"), QStringLiteral("--body-timeout"),
             QStringLiteral("--stall-timeout") }) {
        const Ran zero = TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH),
            { QStringLiteral("proxy"), QStringLiteral("anthropic"), QStringLiteral("--home"), m_home,
                QStringLiteral("--upstream"), m_mockUrl, QStringLiteral("--listen"),
                QStringLiteral("127.0.0.1:0"), option, QStringLiteral("0") },
            30000);
        QCOMPARE(zero.code, 2);
        QVERIFY2(zero.err.contains(option.toUtf8() + " must be more than 0"), zero.err.constData());
    }
}

void TestProxy::keptAliveAnswersEndExactlyWhereTheyEnd()
{
    // Three requests on one kept-alive connection, a JSON answer, a stream, a JSON answer:
    // each answer (chunked: the mock gives no length) ends with exactly one end marker and
    // the next answer's status line follows at once. A stray byte between them is what a
    // strict client (Node's http) reads as a broken next answer.
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy();
    QTcpSocket s;
    s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(s.waitForConnected(10000));
    auto request = [](const QByteArray& body) {
        return "POST /v1/messages HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nContent-Type: "
               "application/json\r\n"
               "Content-Length: "
            + QByteArray::number(body.size()) + "\r\n\r\n" + body;
    };
    const QByteArray json = R"({"model":"m","max_tokens":8})";
    const QByteArray stream = R"({"model":"m","max_tokens":8,"stream":true})";
    s.write(request(json) + request(stream) + request(json)); // pipelined: answered in turn
    QByteArray got;
    QElapsedTimer t;
    t.start();
    auto answers = [&] { return got.count("HTTP/1.1 200 OK\r\n"); };
    while ((answers() < 3 || !got.endsWith("\r\n0\r\n\r\n")) && !t.hasExpired(20000)) {
        s.waitForReadyRead(200);
        got += s.readAll();
    }
    QCOMPARE(answers(), 3);
    QVERIFY2(got.startsWith("HTTP/1.1 200 OK\r\n"), got.left(200).constData());
    const QList<QByteArray> parts = got.split('\n');
    int ends = 0;
    for (qsizetype i = 0; i + 1 < parts.size(); ++i) {
        if (parts[i] == "0\r" && parts[i + 1] == "\r") {
            ++ends;
            // after an end marker: the next answer, or nothing (the last one)
            QVERIFY2(
                i + 2 == parts.size() - 1 ? parts[i + 2].isEmpty() : parts[i + 2].startsWith("HTTP/1.1 200"),
                got.constData());
        }
    }
    QCOMPARE(ends, 3);
    QVERIFY(got.contains("message_stop"));
}

void TestProxy::upstreamConnectionsAreKeptAndRetriedWhenClosed()
{
    // Requests one after another, each from a new curl: one upstream connection serves them
    // all. When the upstream drops a kept connection as a request arrives (its idle timeout),
    // a request that may be repeated (here: it has an Idempotency-Key) goes once more on a new
    // connection: the client sees an ordinary answer. A plain POST is never sent twice (the
    // provider may have worked on it): the client gets a 502 and its SDK retries.
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy();
    const int before = mockStats().value(QStringLiteral("connections")).toInt(); // _stats' own
    for (int i = 0; i < 5; ++i)
        QVERIFY(curl(post(QStringLiteral(R"({"model":"m"})"))).out.startsWith("HTTP/1.1 200"));
    QJsonObject stats = mockStats();
    QCOMPARE(stats.value(QStringLiteral("connections")).toInt() - before,
        1 + 1); // the proxy's one, and this _stats
    QCOMPARE(stats.value(QStringLiteral("requests")).toInt(), 5);
    QVERIFY(
        curl({ QStringLiteral("-X"), QStringLiteral("POST"), m_mockUrl + QStringLiteral("/_dropnext") }).code
        == 0);
    Ran r = curl(post(QStringLiteral(R"({"model":"m"})"))
        << QStringLiteral("-H") << QStringLiteral("Idempotency-Key: k1"));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    stats = mockStats();
    QCOMPARE(stats.value(QStringLiteral("dropped")).toInt(), 1);
    QCOMPARE(stats.value(QStringLiteral("requests")).toInt(), 6);
    QVERIFY(
        curl({ QStringLiteral("-X"), QStringLiteral("POST"), m_mockUrl + QStringLiteral("/_dropnext") }).code
        == 0);
    r = curl(post(QStringLiteral(R"({"model":"m"})")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 502"), r.out.constData());
    stats = mockStats();
    QCOMPARE(stats.value(QStringLiteral("dropped")).toInt(), 2);
    QCOMPARE(stats.value(QStringLiteral("requests")).toInt(), 6); // not sent again
    QVERIFY(curl(post(QStringLiteral(R"({"model":"m"})"))).out.startsWith("HTTP/1.1 200")); // and on it goes
    // An interim answer (103 Early Hints) before the final one: the client gets the final
    // answer, and the kept connection stays in step (the next request gets its own answer).
    r = curl(post(QStringLiteral(R"({"model":"hinted"})"), QStringLiteral("early-hints")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200") && r.out.contains("\"model\":\"hinted\""), r.out.constData());
    r = curl(post(QStringLiteral(R"({"model":"after"})")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200") && r.out.contains("\"model\":\"after\""), r.out.constData());
}

void TestProxy::listensOnLoopbackOnly()
{
    const Ran r = TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("proxy"), QStringLiteral("anthropic"), QStringLiteral("--home"), m_home,
            QStringLiteral("--upstream"), m_mockUrl, QStringLiteral("--listen"),
            QStringLiteral("0.0.0.0:0") });
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("loopback"), r.err.constData());
    const Ran bad = TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("proxy"), QStringLiteral("anthropic"), QStringLiteral("--home"), m_home,
            QStringLiteral("--upstream"), QStringLiteral("ftp://x") });
    QCOMPARE(bad.code, 2);
    QVERIFY(bad.err.contains("http://"));
}

// An address others can reach only with a shared token (--token-file, a 0600 file): then
// every request must carry it, in its base URL's path (/t/TOKEN: an SDK takes it with no
// code change) or an X-Tollgate-Token header, and the provider never sees it.
void TestProxy::elsewhereOnlyWithASharedToken()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    const QString tokenFile = m_dir->filePath(QStringLiteral("token"));
    const QByteArray token = "k3y-0f-the-b0x-Az9._~x";
    auto writeToken = [&](const QByteArray& text, QFile::Permissions mode) {
        QFile f(tokenFile);
        if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
            return false;
        f.write(text);
        f.close();
        return f.setPermissions(mode);
    };
    auto proxyAt = [&](const QString& listen, bool withToken) {
        QStringList args { QStringLiteral("proxy"), QStringLiteral("anthropic"), QStringLiteral("--home"),
            m_home, QStringLiteral("--upstream"), m_mockUrl, QStringLiteral("--listen"), listen };
        if (withToken)
            args << QStringLiteral("--token-file") << tokenFile;
        return TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH), args, 10000);
    };
    const auto owner = QFile::ReadOwner | QFile::WriteOwner;
    QVERIFY(writeToken(token + "\n", owner | QFile::ReadOther));
    Ran r = proxyAt(QStringLiteral("0.0.0.0:0"), true);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("read or written by others") && r.err.contains("chmod 600"), r.err.constData());
    QVERIFY(writeToken("short\n", owner));
    r = proxyAt(QStringLiteral("0.0.0.0:0"), true);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("16 to 256"), r.err.constData());
    QVERIFY(!r.err.contains("short")); // the token itself is never printed
    QVERIFY(writeToken("a token with spaces in it\n", owner));
    QCOMPARE(proxyAt(QStringLiteral("0.0.0.0:0"), true).code, 2);

    QVERIFY(writeToken(token + "\n", owner));
    startProxy({ QStringLiteral("--token-file"), tokenFile });
    const QString root = m_proxyUrl;
    const QString body = QStringLiteral(R"({"model":"m","max_tokens":1})");
    const int before = mockStats().value(QStringLiteral("requests")).toInt();
    r = curl(post(body));
    QVERIFY2(r.out.startsWith("HTTP/1.1 401"), r.out.constData());
    QVERIFY(r.out.contains("authentication_error"));
    QVERIFY(r.out.contains("/t/TOKEN"));
    m_proxyUrl = root + QStringLiteral("/t/wrong-token-of-sixteen");
    QVERIFY(curl(post(body)).out.startsWith("HTTP/1.1 401"));
    m_proxyUrl = root + QStringLiteral("/t/") + QString::fromLatin1(token).left(10);
    QVERIFY(curl(post(body)).out.startsWith("HTTP/1.1 401")); // a prefix is not the token
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), before);

    m_proxyUrl = root + QStringLiteral("/t/") + QString::fromLatin1(token);
    r = curl(post(body));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    QVERIFY(r.out.contains("\"type\":\"message\"")); // as /v1/messages: the token is off the path
    m_proxyUrl = root;
    r = curl(post(body) << QStringLiteral("-H")
                        << QStringLiteral("X-Tollgate-Token: ") + QString::fromLatin1(token));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    r = curl(post(body) << QStringLiteral("-H") << QStringLiteral("X-Tollgate-Token: nope-nope-nope-nope"));
    QVERIFY2(r.out.startsWith("HTTP/1.1 401"), r.out.constData());
    const QJsonObject stats = mockStats();
    QCOMPARE(stats.value(QStringLiteral("requests")).toInt(), before + 2);
    QCOMPARE(stats.value(QStringLiteral("tokenLeaks")).toInt(), 0);
    const QJsonArray paths = stats.value(QStringLiteral("paths")).toArray();
    QCOMPARE(paths.last().toString(), QStringLiteral("/v1/messages"));
    QCOMPARE(paths[paths.size() - 2].toString(), QStringLiteral("/v1/messages"));

    // With the token, an address others reach is allowed.
    m_proxy.reset();
    startProxyAt(QStringLiteral("0.0.0.0:0"), { QStringLiteral("--token-file"), tokenFile });
    m_proxyUrl = QStringLiteral("http://127.0.0.1:%1/t/").arg(m_proxyPort) + QString::fromLatin1(token);
    r = curl(post(body));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    m_proxyUrl = QStringLiteral("http://127.0.0.1:%1").arg(m_proxyPort);
    QVERIFY(curl(post(body)).out.startsWith("HTTP/1.1 401"));
}

// Bodies wait whole for admission, so together they are bounded (--max-buffered): past the
// bound a request is answered 503 with Retry-After, before its body is read when its
// Content-Length says so, as soon as a chunked body passes it otherwise; room comes back
// when a request is done.
void TestProxy::bufferedBodiesAreBoundedTogether()
{
    // (Requests enough for the retries below on a slow machine: the bound on bodies is tested.)
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100000") });
    startProxy({ QStringLiteral("--max-buffered"), QStringLiteral("1") }); // 1 MiB
    // The members admission needs come last, so each body is held whole until it has all
    // arrived (one with them first is forwarded as it comes: streamedBodiesGoUpstreamAsTheyCome).
    auto bodyOf = [](int bytes) {
        const QByteArray tail = R"(","model":"m","max_tokens":1})";
        QByteArray b = R"({"pad":")";
        b += QByteArray(bytes - b.size() - tail.size(), 'x');
        b += tail;
        return b;
    };
    auto writeBody = [&](const QString& name, int bytes) {
        const QString file = m_dir->filePath(name);
        QFile f(file);
        if (!f.open(QIODevice::WriteOnly))
            return QString();
        f.write(bodyOf(bytes));
        return file;
    };
    const QString small = writeBody(QStringLiteral("small.json"), 300000);
    const QString big = writeBody(QStringLiteral("big.json"), 1500000);
    QVERIFY(!small.isEmpty() && !big.isEmpty());
    auto postFile = [&](const QString& file, bool chunked = false) {
        QStringList a { QStringLiteral("-i"), m_proxyUrl + QStringLiteral("/v1/messages"),
            QStringLiteral("-H"), QStringLiteral("content-type: application/json"),
            QStringLiteral("--data-binary"), QLatin1Char('@') + file };
        if (chunked)
            a << QStringLiteral("-H") << QStringLiteral("Transfer-Encoding: chunked");
        return curl(a);
    };

    // A holds 900,000 bytes (its Content-Length) while its body trickles.
    const QByteArray aBody = bodyOf(900000);
    QTcpSocket a;
    auto startA = [&] {
        a.abort();
        a.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
        if (!a.waitForConnected(10000))
            return false;
        a.write("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
            + QByteArray::number(aBody.size()) + "\r\n\r\n" + aBody.left(1000));
        return a.waitForBytesWritten(10000);
    };
    // On a loaded machine A's headers may be read while a B holds its share: then A is the one
    // refused (503), and is sent again.
    auto aWasRefused = [&] {
        a.waitForReadyRead(0);
        return a.bytesAvailable() > 0 || a.state() != QAbstractSocket::ConnectedState;
    };
    QVERIFY(startA());
    // B (300,000) does not fit beside it: 503, Retry-After, and the provider saw nothing. The
    // proxy cannot know when A has been counted, so B asks until it is refused (the deadline
    // is the test's; a first 200 would mean A was not counted yet).
    Ran r;
    QElapsedTimer t;
    t.start();
    do {
        if (aWasRefused())
            QVERIFY(startA());
        r = postFile(small);
    } while (r.out.startsWith("HTTP/1.1 200") && !t.hasExpired(20000));
    QVERIFY2(r.out.startsWith("HTTP/1.1 503"), r.out.constData());
    QVERIFY(r.out.contains("Retry-After: 1"));
    QVERIFY(r.out.contains("--max-buffered"));
    const int seen = mockStats().value(QStringLiteral("requests")).toInt();

    // A finishes: answered; its share comes back, and B fits.
    a.write(aBody.mid(1000));
    QByteArray got;
    t.restart();
    readUntil(a, got, "\"usage\"", t);
    QVERIFY2(got.startsWith("HTTP/1.1 200"), got.left(200).constData());
    a.disconnectFromHost();
    // (A's share comes back when its connection's thread is done with the request.)
    t.restart();
    do {
        r = postFile(small);
    } while (!r.out.startsWith("HTTP/1.1 200") && !t.hasExpired(20000));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), seen + 2);

    // Larger than the whole bound: 413 (waiting cannot help), by its Content-Length, or
    // chunked as it grows.
    r = postFile(big);
    QVERIFY2(r.out.startsWith("HTTP/1.1 413"), r.out.constData());
    QVERIFY(r.out.contains("--max-buffered 1 MiB"));
    r = postFile(big, true);
    QVERIFY2(r.out.startsWith("HTTP/1.1 413"), r.out.constData());
    // A client that sends its whole body at once (no Expect: 100-continue) still reads the
    // refusal: the proxy drains what it sends instead of resetting the connection.
    auto rawRefusal = [&](const QByteArray& body) {
        // A plain blocking socket, as most HTTP clients write: the whole request, then read.
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in to {};
        to.sin_family = AF_INET;
        to.sin_port = htons(m_proxyPort);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        timeval limit { 20, 0 };
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
            ::close(fd);
            return QByteArray("no connection");
        }
        const QByteArray request
            = "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              "Content-Length: "
            + QByteArray::number(body.size()) + "\r\n\r\n" + body;
        for (qsizetype at = 0; at < request.size();) {
            const ssize_t n = ::send(
                fd, request.constData() + at, static_cast<std::size_t>(request.size() - at), MSG_NOSIGNAL);
            if (n <= 0) { // reset: most clients stop at a failed write and never read the answer
                ::close(fd);
                return QByteArray("the request could not be sent whole: ") + std::strerror(errno);
            }
            at += n;
        }
        QByteArray got;
        char buf[4096];
        while (!got.contains("\r\n\r\n")) {
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0)
                break;
            got.append(buf, n);
        }
        ::close(fd);
        return got;
    };
    QByteArray raw = rawRefusal(bodyOf(8000000)); // more than the socket buffers take at once
    QVERIFY2(raw.startsWith("HTTP/1.1 413"), raw.left(300).constData());
    QVERIFY(startA()); // holds 900,000 again
    t.restart();
    int wentBeforeA = 0; // answered before A was counted: they reached the provider
    for (;;) {
        if (aWasRefused())
            QVERIFY(startA());
        raw = rawRefusal(bodyOf(300000));
        if (!raw.startsWith("HTTP/1.1 200") || t.hasExpired(20000))
            break;
        ++wentBeforeA;
    }
    QVERIFY2(raw.startsWith("HTTP/1.1 503"), raw.left(300).constData());
    QVERIFY(raw.contains("Retry-After: 1"));
    a.abort(); // its share comes back when its connection ends
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), seen + 2 + wentBeforeA);
    // And nothing stays counted: a request that fits still goes.
    QVERIFY(postFile(small).out.startsWith("HTTP/1.1 200"));
}

// A request that does not name its caller (X-Tollgate-Caller) is counted under the process
// that sent it: over loopback TCP found through the kernel's socket table and /proc, over a
// unix socket from the peer's credentials.
void TestProxy::aClientWithoutANameIsNamedByItsProcess()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy();
    auto admittedCallers = [&] {
        QStringList out;
        const Ran h = cli({ QStringLiteral("history"), QStringLiteral("--json") });
        for (const QJsonValue& v : QJsonDocument::fromJson(h.out).array()) {
            const QJsonObject e = v.toObject();
            if (e.value(QStringLiteral("type")).toString() == QStringLiteral("admit"))
                out << e.value(QStringLiteral("caller")).toString();
        }
        return out;
    };
    const QRegularExpression curlProcess(QStringLiteral("^curl\\[[0-9]+\\]$"));
    Ran r = curl(post(QStringLiteral("{}")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    QStringList callers = admittedCallers();
    QCOMPARE(callers.size(), 1);
    QVERIFY2(curlProcess.match(callers[0]).hasMatch(), qPrintable(callers[0]));
    // A name given wins.
    r = curl(
        post(QStringLiteral("{}")) << QStringLiteral("-H") << QStringLiteral("X-Tollgate-Caller: nightly"));
    QVERIFY(r.out.startsWith("HTTP/1.1 200"));
    QCOMPARE(admittedCallers().value(1), QStringLiteral("nightly"));
    m_proxy.reset();
    // --caller names every request that names none, without looking the process up.
    startProxy({ QStringLiteral("--caller"), QStringLiteral("batch") });
    QVERIFY(curl(post(QStringLiteral("{}"))).out.startsWith("HTTP/1.1 200"));
    QCOMPARE(admittedCallers().value(2), QStringLiteral("batch"));
    m_proxy.reset();

    const QString socket = m_dir->filePath(QStringLiteral("proxy.sock"));
    m_proxy = TestSupport::startChild(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("proxy"), QStringLiteral("anthropic"), QStringLiteral("--home"), m_home,
            QStringLiteral("--upstream"), m_mockUrl, QStringLiteral("--listen"),
            QStringLiteral("unix:") + socket });
    QVERIFY(m_proxy);
    const QByteArray line = TestSupport::firstLine(*m_proxy);
    QVERIFY2(line.startsWith("listening on unix:"), line.constData());
    struct stat st
    {
    };
    QVERIFY(::lstat(socket.toLocal8Bit().constData(), &st) == 0);
    QCOMPARE(st.st_mode & 0777, mode_t(0600)); // whoever can connect spends the quota
    r = curl({ QStringLiteral("-i"), QStringLiteral("--unix-socket"), socket,
        QStringLiteral("http://x/v1/messages"), QStringLiteral("-H"),
        QStringLiteral("content-type: application/json"), QStringLiteral("-d"), QStringLiteral("{}") });
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    callers = admittedCallers();
    QCOMPARE(callers.size(), 4);
    QVERIFY2(curlProcess.match(callers[3]).hasMatch(), qPrintable(callers[3]));
    // Its socket removed and the path bound by another proxy since: stopping this one leaves
    // the other's socket alone; the other, stopped, removes its own.
    QVERIFY(QFile::remove(socket));
    Child other = TestSupport::startChild(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("proxy"), QStringLiteral("anthropic"), QStringLiteral("--home"), m_home,
            QStringLiteral("--upstream"), m_mockUrl, QStringLiteral("--listen"),
            QStringLiteral("unix:") + socket });
    QVERIFY(other);
    QVERIFY(TestSupport::firstLine(*other).startsWith("listening on unix:"));
    ::kill(static_cast<pid_t>(m_proxy->processId()), SIGTERM);
    QVERIFY(m_proxy->waitForFinished(40000));
    QCOMPARE(m_proxy->exitStatus(), QProcess::NormalExit);
    r = curl({ QStringLiteral("-i"), QStringLiteral("--unix-socket"), socket,
        QStringLiteral("http://x/v1/messages"), QStringLiteral("-H"),
        QStringLiteral("content-type: application/json"), QStringLiteral("-d"), QStringLiteral("{}") });
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    ::kill(static_cast<pid_t>(other->processId()), SIGTERM);
    QVERIFY(other->waitForFinished(40000));
    QVERIFY(!QFileInfo::exists(socket));
}

// An https upstream: the certificate is verified (chain and name) against the system's CAs
// plus --upstream-ca, and a request goes nowhere when it fails — the client gets a 502 that
// says why, and the provider never sees the request (nor the API key in it).
void TestProxy::aTlsUpstreamIsAlwaysVerified()
{
    if (QStandardPaths::findExecutable(QStringLiteral("openssl")).isEmpty())
        QFAIL("openssl is not installed (scripts/bootstrap.sh installs it)");
    const QString dir = m_dir->path();
    auto path = [&](const QString& name) { return dir + QLatin1Char('/') + name; };
    QVERIFY(TestCerts::authority(dir, QStringLiteral("ca")));
    QVERIFY(TestCerts::authority(dir, QStringLiteral("otherca")));
    QVERIFY(TestCerts::server(dir, QStringLiteral("server"), QStringLiteral("IP:127.0.0.1")));
    QVERIFY(TestCerts::server(dir, QStringLiteral("wrongname"), QStringLiteral("DNS:other.example")));
    auto tlsMock = [&](const QString& stem, QString& url) {
        Child c = TestSupport::startChild(QStringLiteral("node"),
            { MOCK, QStringLiteral("--tls-cert"), path(stem + QStringLiteral(".crt")),
                QStringLiteral("--tls-key"), path(stem + QStringLiteral(".key")) });
        if (c)
            url = QStringLiteral("https://127.0.0.1:") + QString::fromLatin1(TestSupport::firstLine(*c));
        return c;
    };
    // The mock's count, asked over TLS verified for the name its certificate carries.
    auto requestsSeen = [&](const QString& url, const QString& name = QStringLiteral("127.0.0.1")) {
        const QString port = url.section(QLatin1Char(':'), -1);
        const Ran r = curl(
            { QStringLiteral("--cacert"), path(QStringLiteral("ca.crt")), QStringLiteral("--connect-to"),
                name + QLatin1Char(':') + port + QStringLiteral(":127.0.0.1:") + port,
                QStringLiteral("https://") + name + QLatin1Char(':') + port + QStringLiteral("/_stats") });
        return QJsonDocument::fromJson(r.out).object().value(QStringLiteral("requests")).toInt(-1);
    };
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    const QString body = QStringLiteral(R"({"model":"claude-x","max_tokens":10,"messages":[]})");

    m_mock.reset();
    m_mock = tlsMock(QStringLiteral("server"), m_mockUrl);
    QVERIFY(m_mock);
    // Trusted through --upstream-ca: the answer passes, over TLS.
    startProxy({ QStringLiteral("--upstream-ca"), path(QStringLiteral("ca.crt")) });
    Ran r = curl(post(body) << QStringLiteral("-H") << QStringLiteral("x-api-key: sk-secret"));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    QVERIFY(r.out.contains("\"usage\""));
    QCOMPARE(requestsSeen(m_mockUrl), 1);

    // Not trusted (the system's CAs only, or another CA): 502, and nothing reached the provider.
    const QList<QStringList> untrusted { {},
        { QStringLiteral("--upstream-ca"), path(QStringLiteral("otherca.crt")) } };
    for (const QStringList& extra : untrusted) {
        m_proxy.reset();
        startProxy(extra);
        r = curl(post(body) << QStringLiteral("-H") << QStringLiteral("x-api-key: sk-secret"));
        QVERIFY2(r.out.startsWith("HTTP/1.1 502"), r.out.constData());
        QVERIFY2(r.out.contains("TLS with the upstream"), r.out.constData());
        QVERIFY2(r.out.contains("certificate verify failed"), r.out.constData());
        QCOMPARE(requestsSeen(m_mockUrl), 1);
    }

    // A certificate from the trusted CA, but for another name: refused too.
    QString wrongUrl;
    Child wrong = tlsMock(QStringLiteral("wrongname"), wrongUrl);
    QVERIFY(wrong);
    m_proxy.reset();
    m_mockUrl = wrongUrl;
    startProxy({ QStringLiteral("--upstream-ca"), path(QStringLiteral("ca.crt")) });
    r = curl(post(body));
    QVERIFY2(r.out.startsWith("HTTP/1.1 502"), r.out.constData());
    QVERIFY2(r.out.contains("TLS with the upstream"), r.out.constData());
    QCOMPARE(requestsSeen(wrongUrl, QStringLiteral("other.example")), 0);
    m_proxy.reset();

    // A CA file that is a FIFO, missing, or not PEM, or one given for a plain-http upstream:
    // a clear refusal naming the file, at once (the FIFO must not block the start).
    const QString fifo = path(QStringLiteral("ca.fifo"));
    QVERIFY(::mkfifo(fifo.toLocal8Bit().constData(), 0600) == 0);
    auto proxyWith = [&](const QString& upstream, const QString& ca) {
        return TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH),
            { QStringLiteral("proxy"), QStringLiteral("anthropic"), QStringLiteral("--home"), m_home,
                QStringLiteral("--upstream"), upstream, QStringLiteral("--listen"),
                QStringLiteral("127.0.0.1:0"), QStringLiteral("--upstream-ca"), ca },
            20000);
    };
    for (const QString& ca :
        { fifo, path(QStringLiteral("missing.crt")), path(QStringLiteral("server.ext")) }) {
        r = proxyWith(wrongUrl, ca);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QFileInfo(ca).fileName().toUtf8()), r.err.constData());
    }
    r = proxyWith(QStringLiteral("http://127.0.0.1:9"), path(QStringLiteral("ca.crt")));
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("plain http"), r.err.constData());
}

// A body (past 64 KiB, with a Content-Length) whose model and max_tokens come first is
// admitted as soon as they were read and forwarded as it arrives: the provider has most of
// what the client sent before the client sends the rest. A member named twice later in a body
// cuts the upstream off mid-body (the provider never gets a whole request) and the client gets
// a 400; a short body naming one twice gets the 400 before anything goes. A body whose members
// come last is held whole and then forwarded.
void TestProxy::streamedBodiesGoUpstreamAsTheyCome()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("1") });
    startProxy();
    const QByteArray head = R"({"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":")";
    const QByteArray body = head + QByteArray(2000000, 'a') + R"("}]})";
    QTcpSocket s;
    s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(s.waitForConnected(10000));
    QElapsedTimer t;
    t.start();
    auto flush = [&] {
        while (s.bytesToWrite() > 0 && !t.hasExpired(20000))
            s.waitForBytesWritten(100);
    };
    s.write("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
        + QByteArray::number(body.size()) + "\r\n\r\n" + body.left(1000000));
    flush();
    auto upstreamBytes = [this] { return mockStats().value(QStringLiteral("bodyBytes")).toDouble(); };
    while (upstreamBytes() < 900000 && !t.hasExpired(20000))
        QTest::qWait(20);
    QVERIFY2(upstreamBytes() >= 900000, "the body was not forwarded before it was complete");
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 0); // not whole yet
    s.write(body.mid(1000000));
    flush();
    QByteArray got;
    t.restart();
    readUntil(s, got, "\"usage\"", t);
    QVERIFY2(got.startsWith("HTTP/1.1 200"), got.left(300).constData());
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 1);
    QCOMPARE(upstreamBytes(), double(body.size())); // every byte, once
    s.disconnectFromHost();

    auto postFile = [&](const QByteArray& content) {
        const QString file = m_dir->filePath(QStringLiteral("body.json"));
        QFile f(file);
        if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
            return Ran {};
        f.write(content);
        f.close();
        return curl({ QStringLiteral("-i"), m_proxyUrl + QStringLiteral("/v1/messages"), QStringLiteral("-H"),
            QStringLiteral("content-type: application/json"), QStringLiteral("--data-binary"),
            QLatin1Char('@') + file });
    };
    // Named twice, the second far into the body: admitted and forwarded up to there, then cut.
    Ran r = postFile(head + QByteArray(300000, 'a') + R"("}],"max_tokens":100000})");
    QVERIFY2(r.out.startsWith("HTTP/1.1 400"), r.out.left(300).constData());
    QVERIFY(r.out.contains("'max_tokens' twice"));
    t.restart();
    while (mockStats().value(QStringLiteral("incompleteBodies")).toInt() < 1 && !t.hasExpired(20000))
        QTest::qWait(20);
    QCOMPARE(mockStats().value(QStringLiteral("incompleteBodies")).toInt(), 1);
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 1); // it never got a whole request
    // The other name of the output bound after admission is a repeat too.
    r = postFile(head + QByteArray(300000, 'a') + R"("}],"max_completion_tokens":100000})");
    QVERIFY2(r.out.startsWith("HTTP/1.1 400"), r.out.left(300).constData());
    // A short body naming the model twice: refused before anything goes.
    const double before = upstreamBytes();
    r = curl(post(QStringLiteral(R"({"model":"m","max_tokens":1,"model":"n"})")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 400"), r.out.constData());
    QVERIFY(r.out.contains("'model' twice"));
    QCOMPARE(upstreamBytes(), before);
    // A client that stops mid-body once it streams: the upstream connection is dropped (the
    // provider never acts on half a request) and the only slot comes back for the next one.
    {
        QTcpSocket gone;
        gone.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
        QVERIFY(gone.waitForConnected(10000));
        const double sentBefore = upstreamBytes();
        gone.write(
            "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
            + QByteArray::number(body.size()) + "\r\n\r\n" + body.left(300000));
        t.restart();
        while (gone.bytesToWrite() > 0 && !t.hasExpired(20000))
            gone.waitForBytesWritten(100);
        while (upstreamBytes() < sentBefore + 200000 && !t.hasExpired(20000))
            QTest::qWait(20);
        QVERIFY(upstreamBytes() >= sentBefore + 200000);
        gone.abort();
        while (mockStats().value(QStringLiteral("incompleteBodies")).toInt() < 3 && !t.hasExpired(20000))
            QTest::qWait(20);
        QCOMPARE(mockStats().value(QStringLiteral("incompleteBodies")).toInt(), 3);
    }
    // Members last: held whole, then forwarded.
    r = postFile(R"({"messages":[{"role":"user","content":")" + QByteArray(300000, 'b')
        + R"("}],"model":"claude-x","max_tokens":16})");
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.left(300).constData());
    // Not a JSON object (it breaks off at its end): forwarded by its size, and the provider's
    // answer passes through.
    r = postFile(QByteArray(200000, '['));
    QVERIFY2(r.out.startsWith("HTTP/1.1 400"), r.out.left(300).constData());
    QVERIFY(r.out.contains("body is not JSON"));
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 3);
}

// Abusive bodies (issue 26): what the proxy keeps of a body is bounded by its options, whatever
// the body. A body far larger than any the proxy holds, its members first and then one long
// string in the messages and another at the top level, streams byte-exact and is estimated by
// its members; bodies whose members come last are held whole and estimated by their members
// (without a second parse); a JSON object with a number too long to read is refused, and the
// provider never gets it whole. The mock's /v1/files answers with the sha256 of what it got,
// and no usage, so the estimates stay in the window. Without a sanitizer (whose allocator
// keeps freed memory) the proxy's peak resident memory stays far below the bodies (it was
// about 2.8 times a streamed body's string before), and comes back down after.
void TestProxy::abusiveBodiesAreReadInBoundedMemory()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--input-tokens"),
        QStringLiteral("1000000000"), QStringLiteral("--output-tokens"), QStringLiteral("1000000000") });
    startProxy();
    auto kib = [this](const QByteArray& field) {
        QFile f(QStringLiteral("/proc/%1/status").arg(m_proxy->processId()));
        if (!f.open(QIODevice::ReadOnly))
            return qint64(-1);
        for (const QByteArray& line : f.readAll().split('\n')) {
            if (line.startsWith(field + ':'))
                return line.mid(field.size() + 1).trimmed().split(' ').first().toLongLong();
        }
        return qint64(-1);
    };
    QVERIFY(curl(post(QStringLiteral(R"({"model":"m","max_tokens":1})"), {}, QStringLiteral("/v1/files")))
                .out.startsWith("HTTP/1.1 200"));
    QTRY_COMPARE_WITH_TIMEOUT(usedOf("output_tokens"), 1, 10000);
    const qint64 base = kib("VmHWM");
    QVERIFY(base > 0);
    // A body file of `parts`: text as it is, or {bytes, byte}: that many of it.
    struct Fill
    {
        qint64 bytes;
        char byte;
    };
    auto writeBody = [this](const QString& name, const std::vector<std::variant<QByteArray, Fill>>& parts) {
        QCryptographicHash hash(QCryptographicHash::Sha256);
        qint64 size = 0;
        QFile f(m_dir->filePath(name));
        if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
            return std::tuple(QString(), qint64(0), QByteArray());
        for (const auto& part : parts) {
            if (const auto* text = std::get_if<QByteArray>(&part)) {
                f.write(*text);
                hash.addData(*text);
                size += text->size();
                continue;
            }
            const Fill fill = std::get<Fill>(part);
            const QByteArray block(1 << 20, fill.byte);
            for (qint64 left = fill.bytes; left > 0; left -= block.size()) {
                const QByteArray piece = block.left(std::min<qint64>(left, block.size()));
                f.write(piece);
                hash.addData(piece);
                size += piece.size();
            }
        }
        return std::tuple(f.fileName(), size, hash.result().toHex());
    };
    auto postFile = [this](const QString& file) {
        return QStringList { QStringLiteral("-i"), QStringLiteral("-X"), QStringLiteral("POST"),
            m_proxyUrl + QStringLiteral("/v1/files"), QStringLiteral("-H"),
            QStringLiteral("content-type: application/json"), QStringLiteral("-T"), file };
    };

    // 100 MiB in one string of the messages, then 8 MiB in a top-level one: it streams whole.
    const auto [big, bigSize, bigHash] = writeBody(QStringLiteral("big.json"),
        { QByteArray(R"({"model":"claude-x","max_tokens":777,"messages":[{"role":"user","content":")"),
            Fill { 100 << 20, 'a' }, QByteArray(R"("}],"system":")"), Fill { 8 << 20, 'b' },
            QByteArray(R"("})") });
    Ran r = curl(postFile(big), 120000);
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out.left(300) + r.err).constData());
    QVERIFY2(r.out.contains(bigHash), r.out.constData()); // every byte, once, in order
    QTRY_COMPARE_WITH_TIMEOUT(usedOf("output_tokens"), 1 + 777, 10000);
    const int smallInput = usedOf("input_tokens") - int((bigSize + 3) / 4);
#ifndef TOLLGATE_TEST_SANITIZED
    QVERIFY2(kib("VmHWM") - base < 64 * 1024, QByteArray::number(kib("VmHWM") - base).constData());
#endif

    // Four bodies of 20 MiB at once, their members last: held whole, estimated by them.
    const auto [late, lateSize, lateHash] = writeBody(QStringLiteral("late.json"),
        { QByteArray(R"({"messages":[{"role":"user","content":")"), Fill { 20 << 20, 'c' },
            QByteArray(R"("}],"max_tokens":333,"model":"claude-x"})") });
    std::vector<std::unique_ptr<QProcess>> clients;
    for (int i = 0; i < 4; ++i) {
        clients.push_back(std::make_unique<QProcess>());
        clients.back()->start(QStringLiteral("curl"), QStringList { QStringLiteral("-sS") } + postFile(late));
    }
    for (auto& client : clients) {
        QVERIFY(client->waitForFinished(120000));
        const QByteArray out = client->readAllStandardOutput();
        QVERIFY2(out.contains("HTTP/1.1 200") && out.contains(lateHash), out.left(300).constData());
    }
    QTRY_COMPARE_WITH_TIMEOUT(usedOf("output_tokens"), 1 + 777 + 4 * 333, 10000);
    QCOMPARE(usedOf("input_tokens"), smallInput + int((bigSize + 3) / 4) + 4 * int((lateSize + 3) / 4));
#ifndef TOLLGATE_TEST_SANITIZED
    QVERIFY2(kib("VmHWM") - base < (4 * 20 + 64) * 1024, QByteArray::number(kib("VmHWM") - base).constData());
    // What the held bodies took goes back to the system once they are answered.
    QTRY_VERIFY_WITH_TIMEOUT(kib("VmRSS") - base < 32 * 1024, 10000);
#endif

    // A number too long to read after the members and 100 KB of messages: admitted and
    // forwarded up to there, then cut off (its members after it cannot be checked).
    const int requestsBefore = mockStats().value(QStringLiteral("requests")).toInt();
    const int incompleteBefore = mockStats().value(QStringLiteral("incompleteBodies")).toInt();
    const auto [number, numberSize, numberHash] = writeBody(QStringLiteral("number.json"),
        { QByteArray(R"({"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":")"),
            Fill { 100000, 'd' }, QByteArray(R"("}],"temperature":)"), Fill { 5000, '1' },
            QByteArray(R"(,"max_tokens":100000,"system":")"), Fill { 100000, 'e' }, QByteArray(R"("})") });
    r = curl(postFile(number));
    QVERIFY2(r.out.startsWith("HTTP/1.1 400"), r.out.left(300).constData());
    QVERIFY2(r.out.contains("number longer than 4096 bytes"), r.out.constData());
    QTRY_COMPARE_WITH_TIMEOUT(
        mockStats().value(QStringLiteral("incompleteBodies")).toInt(), incompleteBefore + 1, 20000);
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), requestsBefore);
    Q_UNUSED(numberSize);
    Q_UNUSED(numberHash);
}

// A body that is not a JSON object (an upload: OpenAI's files endpoint takes multipart) has
// no members to wait for: it is admitted by its size and forwarded as it arrives, so nothing
// of it is held, and it may be longer than a body the proxy would have to hold (32 MiB). A
// JSON object whose members come late is still held, and refused past that bound.
void TestProxy::uploadsThatAreNotJsonStreamToo()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("1") });
    startProxy({ QStringLiteral("--body-timeout"), QStringLiteral("5") });
    auto multipart = [](int bytes) {
        const QByteArray head
            = "--tgboundary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.jsonl\"\r\n"
              "Content-Type: application/octet-stream\r\n\r\n";
        const QByteArray tail = "\r\n--tgboundary--\r\n";
        QByteArray b = head;
        for (int i = 0; b.size() < bytes - tail.size(); ++i)
            b += QByteArray::number(i) + '\n';
        b.truncate(bytes - tail.size());
        return b + tail;
    };
    auto sha256 = [](const QByteArray& b) {
        return QString::fromLatin1(QCryptographicHash::hash(b, QCryptographicHash::Sha256).toHex());
    };
    auto upstreamBytes = [this] { return mockStats().value(QStringLiteral("bodyBytes")).toDouble(); };
    const QByteArray contentType = "multipart/form-data; boundary=tgboundary";

    // Half of it sent: the provider has most of that half before the client sends the rest.
    const QByteArray upload = multipart(3000000);
    QTcpSocket s;
    s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(s.waitForConnected(10000));
    QElapsedTimer t;
    t.start();
    auto flush = [&] {
        while (s.bytesToWrite() > 0 && !t.hasExpired(20000))
            s.waitForBytesWritten(100);
    };
    s.write("POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Type: " + contentType
        + "\r\nContent-Length: " + QByteArray::number(upload.size()) + "\r\n\r\n" + upload.left(1500000));
    flush();
    while (upstreamBytes() < 1000000 && !t.hasExpired(20000))
        QTest::qWait(20);
    QVERIFY2(upstreamBytes() >= 1000000, "an upload was held instead of forwarded as it came");
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 0);
    // While it streams it holds the only slot: it was admitted like any request.
    QCOMPARE(status()
                 .value(QStringLiteral("providers"))
                 .toArray()[0]
                 .toObject()
                 .value(QStringLiteral("slots"))
                 .toArray()
                 .size(),
        1);
    s.write(upload.mid(1500000));
    flush();
    QByteArray got;
    t.restart();
    readUntil(s, got, "sha256", t);
    readUntil(s, got, "}", t);
    QVERIFY2(got.startsWith("HTTP/1.1 200"), got.left(300).constData());
    QVERIFY2(got.contains(sha256(upload).toLatin1()), got.constData()); // every byte, once, in order
    s.disconnectFromHost();

    // Longer than any body the proxy holds (32 MiB): it streams, so it goes.
    const QByteArray large = multipart(40 << 20);
    const QString file = m_dir->filePath(QStringLiteral("upload.bin"));
    {
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(large);
    }
    // (curl asks for a 100 Continue before a body this long, and gets it at once.)
    Ran r = rawCurl({ QStringLiteral("-i"), QStringLiteral("--expect100-timeout"), QStringLiteral("60"),
        m_proxyUrl + QStringLiteral("/v1/files"), QStringLiteral("-H"),
        QStringLiteral("content-type: ") + QString::fromLatin1(contentType), QStringLiteral("--data-binary"),
        QLatin1Char('@') + file });
    QVERIFY2(r.out.startsWith("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200"), r.out.left(300).constData());
    QVERIFY2(r.out.contains(sha256(large).toLatin1()), r.out.right(300).constData());
    QJsonArray uploads = mockStats().value(QStringLiteral("uploads")).toArray();
    QCOMPARE(uploads.size(), 2);
    QCOMPARE(uploads[1].toObject().value(QStringLiteral("bytes")).toDouble(), double(large.size()));
    QCOMPARE(uploads[1].toObject().value(QStringLiteral("chunked")).toBool(), false);
    // Both were counted as requests, and their slots came back.
    const QJsonObject provider = status().value(QStringLiteral("providers")).toArray()[0].toObject();
    QCOMPARE(provider.value(QStringLiteral("slots")).toArray().size(), 0);

    // Chunked, the same: forwarded as it comes (chunked again: its length is not known), and a
    // request sent right behind it on the same connection is answered too.
    auto chunks = [](const QByteArray& bytes, int size) {
        QByteArray framed;
        for (qsizetype at = 0; at < bytes.size(); at += size) {
            const QByteArray piece = bytes.mid(at, size);
            framed += QByteArray::number(piece.size(), 16) + ";ext=1\r\n" + piece + "\r\n";
        }
        return framed;
    };
    {
        const double before = upstreamBytes();
        QTcpSocket c;
        c.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
        QVERIFY(c.waitForConnected(10000));
        t.restart();
        c.write("POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Type: " + contentType
            + "\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks(upload.left(1500000), 70000));
        while (c.bytesToWrite() > 0 && !t.hasExpired(20000))
            c.waitForBytesWritten(100);
        while (upstreamBytes() < before + 1000000 && !t.hasExpired(20000))
            QTest::qWait(20);
        QVERIFY2(
            upstreamBytes() >= before + 1000000, "a chunked upload was held instead of forwarded as it came");
        QCOMPARE(mockStats().value(QStringLiteral("uploads")).toArray().size(), 2);
        c.write(chunks(upload.mid(1500000), 33333) + "0\r\nX-Trailer: t\r\n\r\n"
            + "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
        QByteArray both;
        t.restart();
        while (both.count("HTTP/1.1 ") < 2 && !t.hasExpired(20000)) {
            c.waitForReadyRead(200);
            both += c.readAll();
        }
        readUntil(c, both, "usage", t);
        QVERIFY2(both.startsWith("HTTP/1.1 200"), both.left(300).constData());
        QVERIFY2(both.contains(sha256(upload).toLatin1()), both.constData());
        QCOMPARE(both.count("HTTP/1.1 200"), 2);
        uploads = mockStats().value(QStringLiteral("uploads")).toArray();
        QCOMPARE(uploads.size(), 3);
        QCOMPARE(uploads[2].toObject().value(QStringLiteral("chunked")).toBool(), true);
        QCOMPARE(uploads[2].toObject().value(QStringLiteral("bytes")).toDouble(), double(upload.size()));
    }
    // A chunked JSON object is held whole (its size is the input estimate) and then forwarded.
    {
        QTcpSocket c;
        c.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
        QVERIFY(c.waitForConnected(10000));
        const QByteArray json
            = R"({"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":")"
            + QByteArray(200000, 'd') + R"("}]})";
        c.write("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: "
                "application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunks(json, 50000) + "0\r\n\r\n");
        QByteArray got;
        t.restart();
        readUntil(c, got, "usage", t);
        QVERIFY2(got.startsWith("HTTP/1.1 200"), got.left(300).constData());
    }

    // A JSON object as long, with its members last, would have to be held whole: refused.
    {
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(R"({"messages":[{"role":"user","content":")" + QByteArray(40 << 20, 'c')
            + R"("}],"model":"claude-x","max_tokens":16})");
    }
    r = curl({ QStringLiteral("-i"), m_proxyUrl + QStringLiteral("/v1/messages"), QStringLiteral("-H"),
        QStringLiteral("content-type: application/json"), QStringLiteral("--data-binary"),
        QLatin1Char('@') + file });
    QVERIFY2(r.out.startsWith("HTTP/1.1 413"), r.out.left(300).constData());
    QVERIFY2(r.out.contains("32 MiB"), r.out.constData());
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 5);

    // A client that trickles its upload (a byte every 50 ms, for a Content-Length of 1 GiB)
    // does not keep its slot for the hour that length would allow: past --body-timeout (5 s)
    // its bytes must come at 256 KiB/s. It is cut off (408), the provider's half a request
    // dropped, and the slot comes back.
    const int incomplete = mockStats().value(QStringLiteral("incompleteBodies")).toInt();
    QTcpSocket slow;
    slow.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(slow.waitForConnected(10000));
    slow.write("POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Type: " + contentType
        + "\r\nContent-Length: 1073741824\r\n\r\n" + upload.left(20000));
    QByteArray answer;
    t.restart();
    while (slow.state() == QAbstractSocket::ConnectedState && !t.hasExpired(60000)) {
        slow.write("x");
        slow.waitForBytesWritten(1000);
        slow.waitForReadyRead(50);
        answer += slow.readAll();
    }
    QVERIFY2(
        slow.state() != QAbstractSocket::ConnectedState, "a trickling upload held its connection for 60 s");
    answer += slow.readAll();
    QVERIFY2(answer.startsWith("HTTP/1.1 408"), answer.constData());
    t.restart();
    while (
        mockStats().value(QStringLiteral("incompleteBodies")).toInt() <= incomplete && !t.hasExpired(20000))
        QTest::qWait(20);
    QCOMPARE(mockStats().value(QStringLiteral("incompleteBodies")).toInt(), incomplete + 1);
    QCOMPARE(status()
                 .value(QStringLiteral("providers"))
                 .toArray()[0]
                 .toObject()
                 .value(QStringLiteral("slots"))
                 .toArray()
                 .size(),
        0);
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 5);
}

// SIGTERM: the proxy stops accepting, closes its idle keep-alive connections at once (one
// event loop serves them all: none may hold the exit up for CLIENT_IDLE), lets an answer that
// is streaming finish whole, then exits 0.
void TestProxy::stoppingEndsIdleConnectionsAndFinishesAnswers()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy();
    // Idle connections: two that never sent a byte, one kept alive after an answer.
    std::vector<std::unique_ptr<QTcpSocket>> idle = connectIdle(3);
    QCOMPARE(idle.size(), std::size_t(3));
    idle.back()->write(rawPost(R"({"model":"claude-x","max_tokens":10})"));
    QByteArray answer;
    QElapsedTimer t;
    t.start();
    readUntil(*idle.back(), answer, "\"stop_reason\"", t);
    QVERIFY2(answer.startsWith("HTTP/1.1 200"), answer.constData());
    // A stream in flight (an event every 150 ms).
    QTcpSocket stream;
    QVERIFY(postSlowStream(stream, R"({"model":"claude-x","max_tokens":10,"stream":true})"));
    QByteArray got;
    readUntil(stream, got, "content_block_delta", t);
    QVERIFY2(got.contains("content_block_delta"), got.constData());
    m_proxy->terminate();
    // The stream still ends properly: its last event, then the chunked end.
    readUntil(stream, got, "\r\n0\r\n\r\n", t);
    QVERIFY2(got.contains("message_stop") && got.endsWith("\r\n0\r\n\r\n"), got.constData());
    // The idle connections were closed by the proxy, well before their 30 s of idleness.
    for (auto& s : idle) {
        QElapsedTimer w;
        w.start();
        while (s->state() == QAbstractSocket::ConnectedState && !w.hasExpired(10000))
            s->waitForDisconnected(200);
        QCOMPARE(s->state(), QAbstractSocket::UnconnectedState);
    }
    QVERIFY(m_proxy->waitForFinished(10000));
    QCOMPARE(m_proxy->exitStatus(), QProcess::NormalExit);
    QCOMPARE(m_proxy->exitCode(), 0);
}

// At most ProxyServer::MAX_CONNECTIONS (256) connections are served. Idle ones (kept alive, or
// new and silent) do not keep a client with a request out (issue 26 item 6): the next
// connection takes the place of the oldest idle one, which the proxy closes.
void TestProxy::idleConnectionsMakeRoomForNewOnes()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("1000") });
    startProxy();
    std::vector<std::unique_ptr<QTcpSocket>> held = connectIdle(256);
    QCOMPARE(held.size(), std::size_t(256));
    // The 256 are served (one of them answers, and stays: kept alive, idle again), so the proxy
    // has taken them all in.
    const QByteArray body = R"({"model":"claude-x","max_tokens":10})";
    held.back()->write(rawPost(body));
    QByteArray answer;
    QElapsedTimer t;
    t.start();
    readUntil(*held.back(), answer, "\r\n0\r\n\r\n", t); // the whole chunked answer
    QVERIFY2(answer.startsWith("HTTP/1.1 200"), answer.constData());
    // A new client is served: the oldest idle connection made room, and was closed.
    Ran r = curl(post(QString::fromUtf8(body)));
    QVERIFY2(r.code == 0 && r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
    auto closedByProxy = [](QTcpSocket& s) {
        QElapsedTimer w;
        w.start();
        while (s.state() == QAbstractSocket::ConnectedState && !w.hasExpired(10000))
            s.waitForDisconnected(200);
        return s.state() == QAbstractSocket::UnconnectedState;
    };
    QVERIFY(closedByProxy(*held.front()));
    QCOMPARE(held[1]->state(), QAbstractSocket::ConnectedState); // only the oldest
    // New clients that stay (kept alive): at most one finds the place curl left, the others
    // take the places of the next oldest idle connections.
    std::vector<std::unique_ptr<QTcpSocket>> fresh = connectIdle(3);
    QCOMPARE(fresh.size(), std::size_t(3));
    for (auto& s : fresh) {
        s->write(rawPost(body));
        QByteArray got;
        t.restart();
        readUntil(*s, got, "\r\n0\r\n\r\n", t);
        QVERIFY2(got.startsWith("HTTP/1.1 200"), got.constData());
    }
    QVERIFY(closedByProxy(*held[1]));
    // The kept-alive one that answered became idle last (after the silent ones): still served.
    answer.clear();
    held.back()->write(rawPost(body));
    t.restart();
    readUntil(*held.back(), answer, "\r\n0\r\n\r\n", t); // the whole chunked answer
    QVERIFY2(answer.startsWith("HTTP/1.1 200"), answer.constData());
}

// When every one of the 256 connections is busy with a request, the next is refused — and the
// client hears it (issue 26 item 6): its request is read first, so the answer is not lost to a
// reset (curl used to see a broken pipe), a 503 with Retry-After in the provider's error format
// (Anthropic's overloaded_error; OpenAI's SDK reads error.message and error.type of the same
// body), then the close. Once a busy one is done (idle again), the next client takes its place.
void TestProxy::aRefusalWhenEveryConnectionIsBusyIsHeard()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("1000") });
    startProxy({ QStringLiteral("--header-timeout"), QStringLiteral("120") });
    std::vector<std::unique_ptr<QTcpSocket>> busy = connectIdle(256);
    QCOMPARE(busy.size(), std::size_t(256));
    // Busy: each has begun a request (its head is on its way), none is waiting for a first byte.
    for (auto& s : busy) {
        s->write("POST /v1/messages HTTP/1.1\r\nHost: x\r\n");
        QVERIFY(s->waitForBytesWritten(10000));
    }
    // A connection whose bytes the proxy has not read yet is still idle, and would make room:
    // then the new client is served, and a new busy connection takes the place it leaves.
    const QString body = QStringLiteral(
        R"({"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"%1"}]})")
                             .arg(QString(20000, QLatin1Char('x')));
    Ran r;
    QElapsedTimer t;
    t.start();
    for (;;) {
        r = curl(post(body));
        if (!r.out.startsWith("HTTP/1.1 200") || t.hasExpired(20000))
            break;
        std::vector<std::unique_ptr<QTcpSocket>> more = connectIdle(1);
        QCOMPARE(more.size(), std::size_t(1));
        more.front()->write("POST /v1/messages HTTP/1.1\r\nHost: x\r\n");
        QVERIFY(more.front()->waitForBytesWritten(10000));
        busy.push_back(std::move(more.front()));
    }
    QVERIFY2(r.code == 0, r.err.constData()); // heard: no broken pipe, no reset
    QVERIFY2(r.out.startsWith("HTTP/1.1 503"), r.out.constData());
    QVERIFY(r.out.contains("Retry-After: 1"));
    QVERIFY(r.out.contains("Connection: close"));
    const QJsonObject error = QJsonDocument::fromJson(r.out.mid(r.out.indexOf("\r\n\r\n") + 4)).object();
    QCOMPARE(error.value(QStringLiteral("type")).toString(), QStringLiteral("error"));
    const QJsonObject inner = error.value(QStringLiteral("error")).toObject();
    QCOMPARE(inner.value(QStringLiteral("type")).toString(), QStringLiteral("overloaded_error"));
    QVERIFY2(inner.value(QStringLiteral("message")).toString().contains(QStringLiteral("busy")),
        r.out.constData());
    const int seen = mockStats().value(QStringLiteral("requests")).toInt();
    // The same through OpenAI's path.
    r = curl(post(
        QStringLiteral(R"({"model":"gpt-x","max_tokens":10})"), {}, QStringLiteral("/v1/chat/completions")));
    QVERIFY2(r.code == 0 && r.out.startsWith("HTTP/1.1 503"), (r.out + r.err).constData());
    QVERIFY(r.out.contains("\"message\":\"tollgate proxy: all 256 connections"));
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), seen);
    // One busy connection (the newest: busy when the refusals came) finishes its request and is
    // answered: idle now, its place is taken by the next client.
    busy.back()->write("Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
    QByteArray answer;
    t.restart();
    readUntil(*busy.back(), answer, "\"stop_reason\"", t);
    QVERIFY2(answer.startsWith("HTTP/1.1 200"), answer.constData());
    r = curl(post(QStringLiteral("{}")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
}

// Issue 26 item 7. An upstream's status line passes as it came: a 529's own reason phrase, not
// Beast's "<unknown-status>"; one the upstream left empty (a gateway before an HTTP/2 origin
// writes "529 ") is named, never "<unknown-status>". And a `#fragment` in the target is the
// client's own: it never goes upstream. The upstream here is a few lines of Node's net module,
// so that the status line is exactly as written; it answers every request with its request line.
void TestProxy::theUpstreamsStatusLineAndTheTargetAsTheyShouldBe()
{
    static const char RAW_UPSTREAM[] = R"JS(
const s = require('net').createServer((c) => {
    let got = '';
    c.on('data', (d) => {
        got += d;
        const end = got.indexOf('\r\n\r\n');
        if (end < 0) return;
        const line = got.slice(0, got.indexOf('\r\n'));
        const named = /\r\nx-reason: ?([^\r]*)/i.exec(got.slice(0, end));
        const body = JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: line } });
        c.end('HTTP/1.1 529 ' + (named ? named[1] : '') + '\r\ncontent-type: application/json\r\n'
            + 'content-length: ' + Buffer.byteLength(body) + '\r\nconnection: close\r\n\r\n' + body);
        got = '';
    });
});
s.listen(0, '127.0.0.1', () => console.log(s.address().port));
)JS";
    m_mock.reset();
    m_mock = TestSupport::startChild(
        QStringLiteral("node"), { QStringLiteral("-e"), QString::fromLatin1(RAW_UPSTREAM) });
    QVERIFY(m_mock);
    m_mockUrl = QStringLiteral("http://127.0.0.1:") + QString::fromLatin1(TestSupport::firstLine(*m_mock));
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy();
    Ran r = curl(
        post(QStringLiteral("{}")) << QStringLiteral("-H") << QStringLiteral("x-reason: Site Overloaded"));
    QVERIFY2(r.out.startsWith("HTTP/1.1 529 Site Overloaded\r\n"), r.out.constData());
    r = curl(post(QStringLiteral("{}")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 529 Overloaded\r\n"), r.out.constData());
    QVERIFY(!r.out.contains("unknown-status"));
    QVERIFY2(r.out.contains("\"message\":\"POST /v1/messages HTTP/1.1\""), r.out.constData());
    // curl drops a fragment itself: a raw client sends one.
    QTcpSocket s;
    s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(s.waitForConnected(10000));
    s.write("POST /v1/messages?beta=true#part-2 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 2\r\n\r\n{}");
    QByteArray got;
    QElapsedTimer t;
    t.start();
    readUntil(s, got, "HTTP/1.1\"", t);
    QVERIFY2(got.contains("\"message\":\"POST /v1/messages?beta=true HTTP/1.1\""), got.constData());
}

// Issue 26 item 7: an output bound past the largest count (2^40) used to be estimated as the
// 4,096 default, so a request that may spend a trillion tokens went beside others. Now it counts
// as 2^40: never refused as too large, it waits for room — for an empty window, as any request
// larger than the token limit (QuotaExchange::askFor) — here past the queue timeout, so the
// proxy's own 429, and the provider sees nothing.
void TestProxy::anOutputBoundPastTheLargestCountWaits()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--tokens"),
        QStringLiteral("100000") });
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("0.5") });
    // A few tokens in the window (the answer's real usage).
    QVERIFY(curl(post(QStringLiteral(R"({"model":"claude-x","max_tokens":2000})")))
                .out.startsWith("HTTP/1.1 200"));
    const int seen = mockStats().value(QStringLiteral("requests")).toInt();
    const Ran r = curl(post(QStringLiteral(R"({"model":"claude-x","max_tokens":2199023255552})")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 429"), r.out.constData());
    QVERIFY(r.out.contains("Server: tollgate-proxy"));
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), seen);
    // A bound within the limit goes as before.
    QVERIFY(curl(post(QStringLiteral(R"({"model":"claude-x","max_tokens":2000})")))
                .out.startsWith("HTTP/1.1 200"));
}

// Issue 26 item 7: every answer in flight when a hold begins repeats what started it — a
// relative reset ("6s") a little later each time. One `hold` history line per hold, not one per
// answer (8 answers used to write 8 in 0.3 s).
void TestProxy::aHoldIsNotedOncePerHold()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("8") });
    startProxy();
    const QString spent = QStringLiteral(
        R"(x-mock-answer-headers: {"x-ratelimit-remaining-requests":"0","x-ratelimit-reset-requests":"6s"})");
    std::vector<Child> clients;
    for (int i = 0; i < 8; ++i) {
        clients.push_back(TestSupport::startChild(QStringLiteral("curl"),
            QStringList { QStringLiteral("-sS") }
                    + post(QStringLiteral(R"({"model":"claude-x","max_tokens":10})"), QStringLiteral("late"))
                << QStringLiteral("-H") << spent << QStringLiteral("-H")
                << QStringLiteral("x-mock-id: h%1").arg(i)));
        QVERIFY(clients.back());
    }
    // All eight are upstream before any answer says anything.
    QTRY_COMPARE_WITH_TIMEOUT(mockStats().value(QStringLiteral("concurrent")).toInt(), 8, 20000);
    for (int i = 0; i < 8; ++i)
        curl({ QStringLiteral("-X"), QStringLiteral("POST"),
            m_mockUrl + QStringLiteral("/_release?id=h%1").arg(i) });
    for (auto& c : clients) {
        QVERIFY(c->waitForFinished(30000));
        QVERIFY(c->readAllStandardOutput().startsWith("HTTP/1.1 200"));
    }
    const Ran history = cli({ QStringLiteral("history"), QStringLiteral("--json") });
    QCOMPARE(history.out.count("\"type\":\"hold\""), 1);
}

// Issue 26 item 2: never more than the provider said remains. Tollgate allows 100 and 8 at once;
// the provider's answers say 2 requests remain, then 3, until a reset a minute ahead. Of six
// callers, two reach it while four wait; once those two answer (3 remain), three more go and the
// last waits for the next answer. Before, all six went at once (and four met certain 429s).
void TestProxy::neverMoreThanTheProviderSaysRemain()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("8") });
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("600") }); // a loaded machine is slow
    auto says = [](int left) {
        return QStringLiteral(R"(x-mock-answer-headers: {"x-ratelimit-remaining-requests":"%1",)"
                              R"("x-ratelimit-reset-requests":"60s"})")
            .arg(left);
    };
    Ran first = curl(post(QStringLiteral(R"({"model":"claude-x","max_tokens":10})")) << QStringLiteral("-H")
        << says(2));
    QVERIFY2(first.out.startsWith("HTTP/1.1 200"), first.out.constData());
    std::vector<Child> clients;
    for (int i = 0; i < 6; ++i) {
        clients.push_back(TestSupport::startChild(QStringLiteral("curl"),
            QStringList { QStringLiteral("-sS") }
                    + post(QStringLiteral(R"({"model":"claude-x","max_tokens":10})"), QStringLiteral("late"))
                << QStringLiteral("-H") << says(3) << QStringLiteral("-H") << QStringLiteral("x-mock-id: r%1").arg(i)));
        QVERIFY(clients.back());
    }
    auto waiting = [&] {
        const Ran status = cli({ QStringLiteral("status"), QStringLiteral("--json") });
        return QJsonDocument::fromJson(status.out)
            .object()
            .value(QStringLiteral("providers"))
            .toArray()
            .first()
            .toObject()
            .value(QStringLiteral("waiting"))
            .toInt();
    };
    // Two upstream, four waiting: the provider's word, not Tollgate's limits, holds them.
    QTRY_COMPARE_WITH_TIMEOUT(waiting(), 4, 30000);
    QTRY_COMPARE_WITH_TIMEOUT(mockStats().value(QStringLiteral("gated")).toArray().size(), 2, 30000);
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 3);
    QCOMPARE(waiting(), 4);
    // status says why: the provider's word, in JSON and in words.
    const QJsonObject said = QJsonDocument::fromJson(cli({ QStringLiteral("status"), QStringLiteral("--json") }).out)
                                 .object()
                                 .value(QStringLiteral("providers"))
                                 .toArray()
                                 .first()
                                 .toObject()
                                 .value(QStringLiteral("provider_remaining"))
                                 .toObject();
    QCOMPARE(said.value(QStringLiteral("requests")).toInt(-1), 0);
    QVERIFY(said.value(QStringLiteral("reset_in_ms")).toInteger() > 0);
    const Ran words = cli({ QStringLiteral("status") });
    QVERIFY2(words.out.contains("PROVIDER: 0 request(s) left until its reset in"), words.out.constData());
    // Which callers went is the proxy's choice: the ones the mock holds now are released (not
    // the ones those releases let in, which arrive meanwhile).
    auto release = [&](int upstream) {
        const QJsonArray gated = mockStats().value(QStringLiteral("gated")).toArray();
        for (const auto& id : gated)
            curl({ QStringLiteral("-X"), QStringLiteral("POST"), m_mockUrl + QStringLiteral("/_release?id=") + id.toString() });
        return gated.size() == upstream;
    };
    // What the proxy and the mock saw, for a failure's message.
    auto seen = [&] {
        return QString::fromUtf8(cli({ QStringLiteral("status") }).out + cli({ QStringLiteral("history") }).out
            + QJsonDocument(mockStats()).toJson(QJsonDocument::Compact));
    };
    QVERIFY2(release(2), qPrintable(seen()));
    QTRY_COMPARE_WITH_TIMEOUT(mockStats().value(QStringLiteral("requests")).toInt(), 6, 30000);
    QTRY_COMPARE_WITH_TIMEOUT(mockStats().value(QStringLiteral("gated")).toArray().size(), 3, 30000);
    QTRY_COMPARE_WITH_TIMEOUT(waiting(), 1, 30000);
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 6);
    QTRY_COMPARE_WITH_TIMEOUT(mockStats().value(QStringLiteral("gated")).toArray().size(), 3, 30000);
    QVERIFY2(release(3), qPrintable(seen()));
    QTRY_COMPARE_WITH_TIMEOUT(mockStats().value(QStringLiteral("gated")).toArray().size(), 1, 30000);
    QVERIFY2(release(1), qPrintable(seen()));
    for (auto& c : clients) {
        QVERIFY2(c->waitForFinished(120000), qPrintable(seen()));
        const QByteArray out = c->readAllStandardOutput();
        QVERIFY2(out.startsWith("HTTP/1.1 200"), out.constData());
    }
    QVERIFY2(mockStats().value(QStringLiteral("requests")).toInt() == 7, qPrintable(seen()));
    QCOMPARE(mockStats().value(QStringLiteral("gateTimeouts")).toInt(), 0);
    QCOMPARE(mockStats().value(QStringLiteral("refused")).toInt(), 0);
}

// A chunked JSON body is held whole, then handled as a short one. The stall watch of the body's
// own phase used to stay armed on the client through the whole answer, never touched: with
// --stall-timeout 0.5 s it shut the client down in the middle of a slow stream (an event every
// 150 ms) that was moving all along.
void TestProxy::aHeldBodyIsNotCutOffByTheStallWatch()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy({ QStringLiteral("--stall-timeout"), QStringLiteral("0.5") });
    QTcpSocket s;
    s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(s.waitForConnected(10000));
    const QByteArray body = R"({"model":"claude-x","max_tokens":10,"stream":true})";
    s.write("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nx-mock: slow\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        + QByteArray::number(body.size(), 16) + "\r\n" + body + "\r\n0\r\n\r\n");
    QByteArray got;
    QElapsedTimer t;
    t.start();
    readUntil(s, got, "\r\n0\r\n\r\n", t);
    QVERIFY2(got.startsWith("HTTP/1.1 200"), got.constData());
    QVERIFY2(got.contains("message_stop") && got.endsWith("\r\n0\r\n\r\n"), got.constData());
}

// One event loop relays every stream; what waits for the store runs on other threads. While
// another process holds the home's lock (a CLI caught mid-transaction, stopped), a stream in
// flight keeps arriving to its end, and a new request waits for its admission without
// holding anybody up; once the lock is free, it is answered.
void TestProxy::aStoreLockHeldElsewhereStallsNoStream()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy();
    QTcpSocket stream;
    QVERIFY(postSlowStream(stream, R"({"model":"claude-x","max_tokens":10,"stream":true})"));
    QByteArray got;
    QElapsedTimer t;
    t.start();
    readUntil(stream, got, "message_start", t);
    QVERIFY2(got.contains("message_start"), got.constData());
    // This test process takes the home's lock, as any other process may.
    const QByteArray lockPath = QFile::encodeName(m_home + QStringLiteral("/state.lock"));
    const int lock = ::open(lockPath.constData(), O_RDWR | O_CLOEXEC);
    QVERIFY2(lock >= 0, lockPath.constData());
    QVERIFY(::flock(lock, LOCK_EX) == 0);
    QTcpSocket waiting;
    waiting.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(waiting.waitForConnected(10000));
    waiting.write(rawPost(R"({"model":"claude-x","max_tokens":10})"));
    QVERIFY(waiting.waitForBytesWritten(10000));
    readUntil(stream, got, "\r\n0\r\n\r\n", t);
    const bool whole = got.contains("message_stop") && got.endsWith("\r\n0\r\n\r\n");
    // The stream's end now waits for the lock too (its slot is given back), and still the loop
    // answers what needs no store: a malformed request gets its 400 while the lock is held —
    // within 5 s, half the store's own 10 s lock timeout, which a loop stuck on the store
    // would wait out first.
    const auto garbage = connectIdle(1);
    QCOMPARE(garbage.size(), std::size_t(1));
    garbage.front()->write("GARBAGE\r\n\r\n");
    QByteArray refused;
    QElapsedTimer g;
    g.start();
    while (!refused.contains("\r\n\r\n") && !g.hasExpired(5000)) {
        garbage.front()->waitForReadyRead(100);
        refused += garbage.front()->readAll();
    }
    // The new request is still waiting for the lock (its admission needs it).
    const QByteArray early = waiting.readAll();
    ::flock(lock, LOCK_UN);
    ::close(lock);
    QVERIFY2(whole, got.constData());
    QVERIFY2(refused.startsWith("HTTP/1.1 400"), refused.constData());
    QVERIFY2(early.isEmpty(), early.constData());
    QByteArray answer;
    readUntil(waiting, answer, "\"stop_reason\"", t);
    QVERIFY2(answer.startsWith("HTTP/1.1 200"), answer.constData());
}

// The home removed under a running proxy, then replaced by a symbolic link: every request gets
// an answer that names the problem (never a hang, never a crash), nothing is admitted through
// the link, and the proxy goes on serving.
void TestProxy::aHomeThatVanishesOrIsSwappedGetsClearAnswers()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy();
    const QByteArray json = R"({"model":"claude-x","max_tokens":10})";
    const QString body = QString::fromUtf8(json);
    // Requests on one kept-alive connection go one after another: each starts only once the
    // one before is done, its store work included (the answer's usage is settled after its
    // last byte is sent, so a removal right after an answer would race that write).
    QTcpSocket kept;
    kept.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(kept.waitForConnected(10000));
    kept.write(rawPost(json));
    QElapsedTimer t;
    t.start();
    QByteArray got;
    readUntil(kept, got, "\"stop_reason\"", t);
    QVERIFY2(got.startsWith("HTTP/1.1 200"), got.constData());
    // One that needs no store (a member named twice) is answered once the first is settled.
    kept.write(rawPost(R"({"model":"claude-x","model":"claude-y","max_tokens":10})"));
    readUntil(kept, got, "twice", t);
    QVERIFY2(got.contains("HTTP/1.1 400"), got.constData());
    QVERIFY(QDir(m_home).removeRecursively());
    // The store connection the proxy kept fails (its files are gone) and is dropped.
    got.clear();
    kept.write(rawPost(json));
    readUntil(kept, got, "state.bin", t);
    QVERIFY2(got.contains("HTTP/1.1 502"), got.constData());
    // A new one opens the home afresh, as the CLI does: created empty (0700), so no provider's
    // limits are known and the request is refused by name, never admitted without them.
    Ran r = curl(post(body));
    QVERIFY2(r.out.startsWith("HTTP/1.1 400") && r.out.contains("unknown provider 'anthropic'"),
        r.out.constData());
    struct stat st
    {
    };
    QVERIFY(::stat(QFile::encodeName(m_home).constData(), &st) == 0);
    QCOMPARE(st.st_mode & 07777, mode_t(0700));
    // Then a symbolic link where the home was: refused by name, however long the proxy's kept
    // connections take to be opened afresh.
    QDir(m_home).removeRecursively();
    QVERIFY(QFile::link(m_dir->path(), m_home));
    QElapsedTimer w;
    w.start();
    do {
        r = curl(post(body));
    } while (!r.out.contains("symbolic link") && !w.hasExpired(30000));
    QVERIFY2(r.out.startsWith("HTTP/1.1 502") && r.out.contains("symbolic link"), r.out.constData());
    QCOMPARE(m_proxy->state(), QProcess::Running);
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 1);
}

// A Redis home that goes away while a stream holds the only slot: the stream still ends intact
// (it was admitted), the slot cannot be given back then, and requests meanwhile get a clear
// 502. The proxy lives on, so to everyone else its slot looks held by a live process: unless
// the proxy gives it back once Redis is back, nobody is admitted again until the proxy exits.
void TestProxy::aSlotNotGivenBackInAnOutageIsGivenBackAfter()
{
    if (RedisServer::binary().isEmpty())
        QSKIP("redis-server is not installed (scripts/bootstrap.sh installs it)");
    RedisServer redis;
    QString why;
    // Persistent: the slot taken before the outage is still recorded after it.
    QVERIFY2(redis.start({ QStringLiteral("--appendonly"), QStringLiteral("yes"),
                             QStringLiteral("--appendfsync"), QStringLiteral("always") },
                 &why),
        qPrintable(why));
    const QString url = QString::fromStdString(redis.url());
    m_home = url + QStringLiteral("?prefix=proxy");
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("1") });
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("0.5") });
    QTcpSocket s;
    s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(s.waitForConnected(10000));
    const QByteArray body = R"({"model":"claude-x","max_tokens":10,"stream":true})";
    s.write(rawMockPost(body, "gated", "outage"));
    QElapsedTimer t;
    t.start();
    QByteArray got;
    readUntil(s, got, "content_block_delta", t);
    QVERIFY2(got.contains("content_block_delta"), got.constData());
    redis.stop();
    QVERIFY(curl({ QStringLiteral("-X"), QStringLiteral("POST"),
                     m_mockUrl + QStringLiteral("/_release?id=outage") })
                .code
        == 0);
    readUntil(s, got, "\r\n0\r\n\r\n", t);
    QVERIFY2(got.contains("message_stop") && got.endsWith("\r\n0\r\n\r\n"), got.constData());
    // While Redis is down: a clear answer naming it, nothing forwarded.
    Ran r = curl(post(QStringLiteral("{}")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 502") && r.out.contains(redis.url().c_str()), r.out.constData());
    QVERIFY(redis.restart(&why));
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 1);
    // Back: the slot is given back and the next requests go through (polled: the proxy tries
    // again on its own time; its queue timeout answers 429 meanwhile).
    QElapsedTimer w;
    w.start();
    do {
        r = curl(post(QStringLiteral("{}")));
    } while (!r.out.startsWith("HTTP/1.1 200") && !w.hasExpired(30000));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    const QJsonArray providers = status().value(QStringLiteral("providers")).toArray();
    QCOMPARE(providers.size(), 1);
    QCOMPARE(providers[0].toObject().value(QStringLiteral("slots")).toArray().size(), 0);
    QCOMPARE(m_proxy->state(), QProcess::Running);
}

// A long answer that is not streamed sends nothing until it is whole. A client that gives up
// before (an SDK's timeout, before its retry) ends the exchange: the upstream is closed (the
// provider stops: the mock counts it aborted) and the only slot is given back for the retry,
// not held until the provider answers or the stall timeout passes.
void TestProxy::aClientThatLeavesBeforeTheAnswerEndsTheExchange()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("1") });
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("30") });
    const QByteArray body = R"({"model":"claude-x","max_tokens":10})";
    {
        QTcpSocket s;
        s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
        QVERIFY(s.waitForConnected(10000));
        s.write(rawMockPost(body, "late", "left"));
        QTRY_COMPARE_WITH_TIMEOUT(mockStats().value(QStringLiteral("concurrent")).toInt(), 1, 10000);
        s.abort();
    }
    // Long before the mock's 20 s answer.
    QTRY_COMPARE_WITH_TIMEOUT(mockStats().value(QStringLiteral("aborted")).toInt(), 1, 15000);
    const Ran r = curl(post(QString::fromUtf8(body)));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    QCOMPARE(mockStats().value(QStringLiteral("gateTimeouts")).toInt(), 0);
    // A client that sends its next request behind the first (pipelined) is still there: its
    // answer comes, then the next.
    QTcpSocket p;
    p.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(p.waitForConnected(10000));
    p.write(rawMockPost(body, "late", "stays") + rawPost(body));
    QTRY_COMPARE_WITH_TIMEOUT(mockStats().value(QStringLiteral("concurrent")).toInt(), 1, 10000);
    QVERIFY(curl({ QStringLiteral("-X"), QStringLiteral("POST"),
                     m_mockUrl + QStringLiteral("/_release?id=stays") })
                .code
        == 0);
    QElapsedTimer t;
    t.start();
    QByteArray got;
    while (got.count("\"stop_reason\"") < 2 && !t.hasExpired(20000)) {
        p.waitForReadyRead(200);
        got += p.readAll();
    }
    QCOMPARE(got.count("HTTP/1.1 200"), 2);
    QCOMPARE(mockStats().value(QStringLiteral("aborted")).toInt(), 1);
}

void TestProxy::aClientThatHangsUpInASilentStretchEndsTheExchange_data()
{
    QTest::addColumn<QByteArray>("mock");
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<QByteArray>("seen"); // what the client reads before it hangs up
    QTest::addColumn<bool>("tls"); // the upstream over TLS (its read is what is cancelled)
    // JSON whose headers came, its body held (a long generation that is not streamed).
    QTest::newRow("headers, then silence")
        << QByteArray("headers-first") << QByteArray(R"({"model":"claude-x","max_tokens":10})")
        << QByteArray("\r\n\r\n") << false;
    // A stream silent after its first text (a reasoning model thinking between events).
    QTest::newRow("stream, then silence")
        << QByteArray("gated") << QByteArray(R"({"model":"claude-x","max_tokens":10,"stream":true})")
        << QByteArray("content_block_delta") << false;
    QTest::newRow("stream over TLS, then silence")
        << QByteArray("gated") << QByteArray(R"({"model":"claude-x","max_tokens":10,"stream":true})")
        << QByteArray("content_block_delta") << true;
}

// Once the answer has begun, a client that hangs up while the upstream is silent ends the
// exchange then: the upstream closed (the provider stops), the slot given back — not at the
// upstream's next byte (the mock's gate timing out, counted in gateTimeouts) or the stall
// timeout.
void TestProxy::aClientThatHangsUpInASilentStretchEndsTheExchange()
{
    QFETCH(QByteArray, mock);
    QFETCH(QByteArray, body);
    QFETCH(QByteArray, seen);
    QFETCH(bool, tls);
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("1") });
    QStringList proxyArgs { QStringLiteral("--queue-timeout"), QStringLiteral("60") };
    if (tls) {
        const QString dir = m_dir->path();
        QVERIFY(TestCerts::authority(dir, QStringLiteral("ca")));
        QVERIFY(TestCerts::server(dir, QStringLiteral("server"), QStringLiteral("IP:127.0.0.1")));
        m_mock.reset();
        m_mock = TestSupport::startChild(QStringLiteral("node"),
            { MOCK, QStringLiteral("--tls-cert"), dir + QStringLiteral("/server.crt"),
                QStringLiteral("--tls-key"), dir + QStringLiteral("/server.key") });
        QVERIFY(m_mock);
        m_mockUrl
            = QStringLiteral("https://127.0.0.1:") + QString::fromLatin1(TestSupport::firstLine(*m_mock));
        m_mockCa = dir + QStringLiteral("/ca.crt");
        proxyArgs << QStringLiteral("--upstream-ca") << m_mockCa;
    }
    startProxy(proxyArgs);
    {
        QTcpSocket s;
        s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
        QVERIFY(s.waitForConnected(10000));
        s.write(rawMockPost(body, mock, "silent"));
        QElapsedTimer t;
        t.start();
        QByteArray got;
        readUntil(s, got, seen.constData(), t);
        QVERIFY2(got.startsWith("HTTP/1.1 200") && got.contains(seen), got.constData());
        QCOMPARE(mockStats().value(QStringLiteral("gated")).toArray().size(), qsizetype(1));
        s.abort();
    }
    QTRY_COMPARE_WITH_TIMEOUT(mockStats().value(QStringLiteral("aborted")).toInt(), 1, 30000);
    QCOMPARE(mockStats().value(QStringLiteral("gateTimeouts")).toInt(), 0);
    QCOMPARE(mockStats().value(QStringLiteral("concurrent")).toInt(), 0);
    // The slot is back: the next request (--parallel 1) is answered.
    const Ran r = curl(post(QString::fromUtf8(R"({"model":"claude-x","max_tokens":10})")));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    QCOMPARE(mockStats().value(QStringLiteral("gateTimeouts")).toInt(), 0);
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), 2);
}

// An answer's headers reach the client as soon as they come, not with the first byte of its
// body (a status the client may act on; a body that starts after a pause).
void TestProxy::headersGoOutBeforeTheBody()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100") });
    startProxy();
    const QByteArray body = R"({"model":"claude-x","max_tokens":10})";
    QTcpSocket s;
    s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(s.waitForConnected(10000));
    s.write(rawMockPost(body, "headers-first", "hf"));
    QElapsedTimer t;
    t.start();
    QByteArray got;
    readUntil(s, got, "\r\n\r\n", t);
    QVERIFY2(got.startsWith("HTTP/1.1 200") && got.endsWith("\r\n\r\n"), got.constData());
    QVERIFY(
        curl({ QStringLiteral("-X"), QStringLiteral("POST"), m_mockUrl + QStringLiteral("/_release?id=hf") })
            .code
        == 0);
    readUntil(s, got, "\r\n0\r\n\r\n", t);
    QVERIFY2(got.contains("\"stop_reason\"") && got.endsWith("\r\n0\r\n\r\n"), got.constData());
    QCOMPARE(mockStats().value(QStringLiteral("gateTimeouts")).toInt(), 0);
}

// The home's doorbell (mapped by every process of the home) emptied under a running proxy with
// a stream in flight: the proxy lives on (it died of SIGBUS), the stream ends whole, and the
// next requests are admitted — the doorbell grown back.
void TestProxy::aTruncatedDoorbellKillsNothing()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--parallel"),
        QStringLiteral("2") });
    startProxy();
    const QString body = QStringLiteral(R"({"model":"claude-x","max_tokens":10})");
    QVERIFY(curl(post(body)).out.startsWith("HTTP/1.1 200"));
    QTcpSocket s;
    QVERIFY(postSlowStream(s, R"({"model":"claude-x","max_tokens":10,"stream":true})"));
    QElapsedTimer t;
    t.start();
    QByteArray got;
    readUntil(s, got, "content_block_delta", t);
    const QString doorbell = m_home + QStringLiteral("/doorbell");
    for (int i = 0; i < 3; ++i) {
        QFile f(doorbell);
        QVERIFY(f.open(QIODevice::ReadWrite | QIODevice::Truncate));
        f.close();
        const Ran r = curl(post(body));
        QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
    }
    readUntil(s, got, "\r\n0\r\n\r\n", t);
    QVERIFY2(got.contains("message_stop") && got.endsWith("\r\n0\r\n\r\n"), got.constData());
    QCOMPARE(m_proxy->state(), QProcess::Running);
    QCOMPARE(QFileInfo(doorbell).size(), qint64(4096));
}

// Counted as Anthropic counts (the provider is named anthropic): the output bound reserved at
// admission, then the real output; cache reads left out of the input tokens.
void TestProxy::theProvidersOwnTermsAreCounted()
{
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--input-tokens"),
        QStringLiteral("100000"), QStringLiteral("--output-tokens"), QStringLiteral("100000") });
    startProxy();
    const QByteArray body = R"({"model":"claude-x","max_tokens":3000,"messages":[]})";
    QTcpSocket s;
    s.connectToHost(QStringLiteral("127.0.0.1"), m_proxyPort);
    QVERIFY(s.waitForConnected(10000));
    s.write("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nx-mock: late\r\n"
            "x-mock-id: terms\r\nx-mock-cache-read: 5000\r\nx-mock-cache-write: 20\r\nContent-Length: "
        + QByteArray::number(body.size()) + "\r\n\r\n" + body);
    // In flight: the output bound is reserved, and the prompt estimated by its size.
    QTRY_COMPARE_WITH_TIMEOUT(usedOf("output_tokens"), 3000, 10000);
    QCOMPARE(usedOf("input_tokens"), (body.size() + 3) / 4);
    QVERIFY(curl({ QStringLiteral("-X"), QStringLiteral("POST"),
                     m_mockUrl + QStringLiteral("/_release?id=terms") })
                .code
        == 0);
    QElapsedTimer t;
    t.start();
    QByteArray got;
    readUntil(s, got, "\"cache_read_input_tokens\":5000", t);
    QVERIFY2(
        got.startsWith("HTTP/1.1 200") && got.contains("\"cache_read_input_tokens\":5000"), got.constData());
    // Settled: 11 uncached and 20 written to the cache count; the 5,000 read from it do not.
    QTRY_COMPARE_WITH_TIMEOUT(usedOf("output_tokens"), 5, 10000);
    QCOMPARE(usedOf("input_tokens"), 31);
    QCOMPARE(status()
                 .value(QStringLiteral("providers"))
                 .toArray()[0]
                 .toObject()
                 .value(QStringLiteral("used_tokens"))
                 .toInt(),
        36);
    // With --counting plain the same answer counts whole: cache reads included.
    m_proxy.reset();
    startProxy({ QStringLiteral("--counting"), QStringLiteral("plain") });
    const Ran r = curl(
        post(QString::fromUtf8(body)) << QStringLiteral("-H") << QStringLiteral("x-mock-cache-read: 5000"));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    QTRY_COMPARE_WITH_TIMEOUT(usedOf("input_tokens"), 31 + 5011, 10000);
    QCOMPARE(usedOf("output_tokens"), 10);
    // A rule that does not exist is refused before anything listens.
    const Ran bad = TestSupport::run(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("proxy"), QStringLiteral("anthropic"), QStringLiteral("--home"), m_home,
            QStringLiteral("--upstream"), m_mockUrl, QStringLiteral("--counting"),
            QStringLiteral("bedrock") },
        10000);
    QVERIFY(bad.code != 0);
    QVERIFY2(bad.err.contains("--counting"), bad.err.constData());
}

// The README's example limit, 40,000 tokens a window with 80% headroom (32,000), and an agent's request
// estimated at 83,070 tokens (its prompt, about 316 KB, and max_tokens 4096): once "400 ... can never be
// admitted"; now it waits until the window is empty, and goes.
void TestProxy::anAgentRequestOverTheTokenLimitWaitsForRoom_data()
{
    QTest::addColumn<bool>("redis");
    QTest::newRow("directory home") << false;
    QTest::newRow("redis home") << true; // the server script has the rule too
}

void TestProxy::anAgentRequestOverTheTokenLimitWaitsForRoom()
{
    QFETCH(bool, redis);
    RedisServer server;
    if (redis) {
        if (RedisServer::binary().isEmpty())
            QSKIP("redis-server is not installed (scripts/bootstrap.sh installs it)");
        QString why;
        QVERIFY2(server.start({}, &why), qPrintable(why));
        m_home = QString::fromStdString(server.url()) + QStringLiteral("?prefix=agent");
    }
    setLimits({ QStringLiteral("--requests"), QStringLiteral("100"), QStringLiteral("--tokens"),
        QStringLiteral("40000"), QStringLiteral("--headroom"), QStringLiteral("80"),
        QStringLiteral("--window"), QStringLiteral("2") });
    startProxy();
    QVERIFY(curl(post(QStringLiteral(R"({"model":"claude-x","max_tokens":100})")))
                .out.startsWith("HTTP/1.1 200"));
    const QByteArray head = R"({"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":")";
    const QByteArray tail = R"("}]})";
    const qsizetype bytes = (83070 - 4096) * 4;
    const QByteArray body = head + QByteArray(bytes - head.size() - tail.size(), 'a') + tail;
    QCOMPARE(body.size(), bytes);
    const QString file = m_dir->filePath(QStringLiteral("agent.json"));
    QFile f(file);
    QVERIFY(f.open(QIODevice::WriteOnly) && f.write(body) == body.size());
    f.close();
    const int seen = mockStats().value(QStringLiteral("requests")).toInt();
    const Ran r = curl({ QStringLiteral("-i"), m_proxyUrl + QStringLiteral("/v1/messages"),
        QStringLiteral("-H"), QStringLiteral("content-type: application/json"),
        QStringLiteral("--data-binary"), QLatin1Char('@') + file });
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.left(400).constData());
    QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), seen + 1);
    // It waited for the first request's tokens to leave the window.
    const Ran history = cli({ QStringLiteral("history"), QStringLiteral("--json") });
    QVERIFY2(history.out.contains("\"type\":\"admit\""), history.out.constData());
    bool waited = false;
    for (const QJsonValue v : QJsonDocument::fromJson(history.out).array()) {
        const QJsonObject e = v.toObject();
        if (e.value(QStringLiteral("type")).toString() == QStringLiteral("admit")
            && e.value(QStringLiteral("tokens")).toInt() == 83070
            && e.value(QStringLiteral("waited_ms")).toInt() > 0)
            waited = true;
    }
    QVERIFY2(waited, history.out.constData());
}

// A subscription plan's window used up (a 429 whose message names its reset, or the unified
// status rejected): everyone is held until the reset, then goes; nobody has to resume. A warning
// is recorded once for its window.
void TestProxy::aSubscriptionRejectionHoldsUntilItsResetWithoutPausing()
{
    // A hold ends at the window's pace (one per 60 ms here: within the queue timeout).
    setLimits({ QStringLiteral("--requests"), QStringLiteral("1000") });
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("0.2") });
    for (const char* mock : { "subscription-429", "unified-rejected" }) {
        const Ran refused = curl(post(QStringLiteral("{}"), QString::fromLatin1(mock))
            << QStringLiteral("-H") << QStringLiteral("x-mock-reset-s: 2"));
        QVERIFY2(refused.out.startsWith("HTTP/1.1 429"), refused.out.constData());
        const qint64 resetMs = [&] {
            const QRegularExpression epoch(QStringLiteral("(?:reached\\|(\\d+))|(?:unified-reset: (\\d+))"),
                QRegularExpression::CaseInsensitiveOption);
            const auto m = epoch.match(QString::fromUtf8(refused.out));
            return (m.captured(1).isEmpty() ? m.captured(2) : m.captured(1)).toLongLong() * 1000;
        }();
        QVERIFY2(resetMs > 0, refused.out.constData());
        const QJsonObject p = status().value(QStringLiteral("providers")).toArray()[0].toObject();
        QVERIFY(!p.value(QStringLiteral("paused")).toBool());
        QVERIFY(p.value(QStringLiteral("backoff_remaining_ms")).toInt() > 0);
        // Held: the proxy answers for the provider until the reset, then the next one goes.
        const int seen = mockStats().value(QStringLiteral("requests")).toInt();
        QElapsedTimer t;
        t.start();
        Ran r;
        int held = 0;
        while (!t.hasExpired(15000)) {
            r = curl(post(QStringLiteral("{}")));
            if (!r.out.startsWith("HTTP/1.1 429"))
                break;
            QVERIFY2(r.out.contains("Server: tollgate-proxy"), r.out.constData());
            ++held;
        }
        QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (mock + QByteArray(": ") + r.out).constData());
        QVERIFY(held > 0);
        QVERIFY(QDateTime::currentMSecsSinceEpoch() >= resetMs);
        QCOMPARE(mockStats().value(QStringLiteral("requests")).toInt(), seen + 1);
    }
    const Ran history = cli({ QStringLiteral("history"), QStringLiteral("--json") });
    QCOMPARE(history.out.count("\"type\":\"hold\""), 2);
    QVERIFY2(history.out.contains("usage limit is reached"), history.out.constData());
    QVERIFY2(history.out.contains("five_hour window (5h 100%, 7d 40%) is used up"), history.out.constData());
    QVERIFY(!history.out.contains("\"type\":\"pause\""));
    // A warning, on every answer of its window: one history event.
    for (int i = 0; i < 3; ++i)
        QVERIFY(curl(post(QStringLiteral("{}"), QStringLiteral("unified-warning"))
            << QStringLiteral("-H") << QStringLiteral("x-mock-reset-s: 600"))
                    .out.startsWith("HTTP/1.1 200"));
    QTRY_COMPARE_WITH_TIMEOUT(
        cli({ QStringLiteral("history"), QStringLiteral("--json") }).out.count("\"type\":\"quota-warning\""),
        1, 10000);
}

TOLLGATE_SHARDED_GUILESS_MAIN(TestProxy)
#include "tst_proxy.moc"
