// What `tollgate proxy anthropic` learns from the provider's answers, end to end with real
// processes only: the CLI's proxy, the mock provider (tests/helpers/mockprovider.js, which adds
// the headers a test names in x-mock-answer-headers to its answer) and curl as the client; the
// CLI reads what was learned (`limits show`, `status`, `history`). What must hold:
// - with `limits set --learn`, the limits the user has not set follow the figures the answers
//   state (a later change too), each change a history event; a limit the user sets is theirs
//   and no longer follows; the figures of a model in a class go to that class;
// - without it, the figures are shown (`status`: provider_reported, a notice) and taken only by
//   `limits adopt`;
// - a subscription plan's 5-hour and 7-day usage is shown (the PLAN line, --json plan), and a
//   rejected plan holds callers and says USED UP;
// - hostile header values break nothing: no learned value above 2^40, status stays sane.
// Every test runs on a directory home and on a Redis home (the server scripts/test.sh shares,
// else one of this program's own). Waits are polls with deadlines; nothing is timed.

#include "helpers/redisserver.h"
#include "testsupport.h"

#include <QDateTime>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <memory>

namespace {

using Ran = TestSupport::Ran;
using Child = TestSupport::Child;

const QString MOCK = QStringLiteral(TOLLGATE_TEST_DATA "/../helpers/mockprovider.js");
constexpr int DEADLINE_MS = 10000; // for what the proxy records just after an answer
constexpr qint64 MAX_COUNT = qint64(1) << 40; // QuotaLimits::MAX_COUNT, the largest limit

QStringList words(const char* text)
{
    return QString::fromUtf8(text).split(QLatin1Char(' '), Qt::SkipEmptyParts);
}

// The headers an Anthropic answer states its input and output token limits with.
QJsonObject tokenLimits(qint64 input, qint64 output)
{
    return { { QStringLiteral("anthropic-ratelimit-input-tokens-limit"), QString::number(input) },
        { QStringLiteral("anthropic-ratelimit-output-tokens-limit"), QString::number(output) } };
}

QStringList stringsOf(const QJsonValue& v)
{
    QStringList out;
    for (const QJsonValue s : v.toArray())
        out << s.toString();
    return out;
}

} // namespace

class TestProxyLearning final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void init();
    void cleanup();
    void unsetLimitsFollowTheProvider_data() { homes(); }
    void unsetLimitsFollowTheProvider();
    void learningTurnedOnLaterTakesTheFiguresAlreadyStated_data() { homes(); }
    void learningTurnedOnLaterTakesTheFiguresAlreadyStated();
    void aClassLearnsItsModelsFigures_data() { homes(); }
    void aClassLearnsItsModelsFigures();
    void withoutLearningTheFiguresAreShownAndAdopted_data() { homes(); }
    void withoutLearningTheFiguresAreShownAndAdopted();
    void thePlansUsageIsShownAndARejectionHolds_data() { homes(); }
    void thePlansUsageIsShownAndARejectionHolds();
    void hostileHeadersBreakNothing_data() { homes(); }
    void hostileHeadersBreakNothing();

private:
    static void homes()
    {
        QTest::addColumn<bool>("redis");
        QTest::newRow("directory home") << false;
        QTest::newRow("redis home") << true;
    }
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
        QVERIFY2(r.code == 0, (r.out + r.err).constData());
    }
    void startProxy(const QStringList& extra = {})
    {
        m_proxy = TestSupport::startChild(QStringLiteral(TOLLGATE_CLI_PATH),
            QStringList { QStringLiteral("proxy"), QStringLiteral("anthropic"), QStringLiteral("--home"),
                m_home, QStringLiteral("--upstream"), m_mockUrl, QStringLiteral("--listen"),
                QStringLiteral("127.0.0.1:0") }
                + extra);
        QVERIFY(m_proxy);
        const QByteArray line = TestSupport::firstLine(*m_proxy);
        QVERIFY2(line.startsWith("listening on http://127.0.0.1:"), line.constData());
        m_proxyUrl = QString::fromUtf8(line.mid(13, line.indexOf(' ', 13) - 13));
    }
    // A request for `model` through the proxy, as caller "e2e", whose answer carries `headers`
    // on top of the mock's own (`mock`: the mock's behaviour, x-mock).
    Ran send(const QString& model, const QJsonObject& headers, const QString& mock = {},
        const QStringList& extra = {}) const
    {
        QStringList a { QStringLiteral("-sS"), QStringLiteral("-i"), m_proxyUrl + QStringLiteral("/v1/messages"),
            QStringLiteral("-H"), QStringLiteral("content-type: application/json"), QStringLiteral("-H"),
            QStringLiteral("X-Tollgate-Caller: e2e"), QStringLiteral("-d"),
            QStringLiteral(R"({"model":"%1","max_tokens":10,"messages":[]})").arg(model) };
        if (!headers.isEmpty())
            a << QStringLiteral("-H")
              << QStringLiteral("x-mock-answer-headers: ")
                    + QString::fromUtf8(QJsonDocument(headers).toJson(QJsonDocument::Compact));
        if (!mock.isEmpty())
            a << QStringLiteral("-H") << QStringLiteral("x-mock: ") + mock;
        return TestSupport::run(QStringLiteral("curl"), a + extra);
    }
    QJsonObject limits() const
    {
        const Ran r = cli(words("limits show --json anthropic"));
        return QJsonDocument::fromJson(r.out).array().first().toObject();
    }
    QJsonObject provider() const
    {
        const Ran r = cli(words("status --json"));
        for (const QJsonValue v : QJsonDocument::fromJson(r.out).object().value(QStringLiteral("providers")).toArray()) {
            if (v.toObject().value(QStringLiteral("provider")).toString() == QStringLiteral("anthropic"))
                return v.toObject();
        }
        return {};
    }
    QByteArray history() const { return cli(words("history")).out; }
    int mockRequests() const
    {
        const Ran r = TestSupport::run(QStringLiteral("curl"), { QStringLiteral("-sS"), m_mockUrl + QStringLiteral("/_stats") });
        return QJsonDocument::fromJson(r.out).object().value(QStringLiteral("requests")).toInt(-1);
    }
    // Every limit of the provider and its classes, as numbers (null: not set).
    static QList<qint64> everyLimit(const QJsonObject& l)
    {
        QList<qint64> out;
        const char* keys[] = { "requests", "tokens", "input_tokens", "output_tokens" };
        auto add = [&](const QJsonObject& o) {
            for (const char* k : keys) {
                if (!o.value(QLatin1String(k)).isNull())
                    out << o.value(QLatin1String(k)).toInteger();
            }
            for (const char* k : keys) {
                const QJsonValue d = o.value(QStringLiteral("per_day")).toObject().value(QLatin1String(k));
                if (!d.isNull() && !d.isUndefined())
                    out << d.toInteger();
            }
        };
        add(l);
        for (const QJsonValue m : l.value(QStringLiteral("models")).toObject())
            add(m.toObject());
        return out;
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<RedisServer> m_redis; // this program's own, when scripts/test.sh shares none
    int m_redisHomes = 0;
    QString m_home;
    Child m_mock;
    QString m_mockUrl;
    Child m_proxy;
    QString m_proxyUrl;
};

void TestProxyLearning::initTestCase()
{
    if (QStandardPaths::findExecutable(QStringLiteral("node")).isEmpty()
        || QStandardPaths::findExecutable(QStringLiteral("curl")).isEmpty())
        QFAIL("node or curl is not installed (scripts/bootstrap.sh installs both)");
    QVERIFY2(QFile::exists(MOCK), qPrintable(MOCK));
}

void TestProxyLearning::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->filePath(QStringLiteral("home"));
    if (QTest::currentDataTag() == QByteArrayLiteral("redis home")) {
        const auto home = RedisServer::testHome(m_redis, QStringLiteral("learn"), ++m_redisHomes);
        if (!home.skip.isEmpty())
            QSKIP(qPrintable(home.skip));
        QVERIFY2(home.failure.isEmpty(), qPrintable(home.failure));
        m_home = QString::fromStdString(home.url);
    }
    // The mock states 1000 requests a minute on every answer (anthropic-ratelimit-requests-limit).
    m_mock = TestSupport::startChild(QStringLiteral("node"), { MOCK, QStringLiteral("--limit"), QStringLiteral("1000") });
    QVERIFY(m_mock);
    const QByteArray port = TestSupport::firstLine(*m_mock);
    QVERIFY2(!port.isEmpty(), "the mock provider did not start");
    m_mockUrl = QStringLiteral("http://127.0.0.1:") + QString::fromLatin1(port);
}

void TestProxyLearning::cleanup()
{
    m_proxy.reset();
    m_mock.reset();
}

// (a) With --learn, the limits the user has not set follow the provider's; the user's stay.
void TestProxyLearning::unsetLimitsFollowTheProvider()
{
    setLimits(words("--requests 50 --learn"));
    startProxy();
    Ran r = send(QStringLiteral("claude-sonnet-4"), tokenLimits(30000, 8000));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
    QTRY_COMPARE_WITH_TIMEOUT(limits().value(QStringLiteral("input_tokens")).toInteger(), 30000, DEADLINE_MS);
    QJsonObject l = limits();
    QCOMPARE(l.value(QStringLiteral("output_tokens")).toInteger(), 8000);
    QCOMPARE(l.value(QStringLiteral("requests")).toInteger(), 50); // the user's: not the 1000 stated
    QVERIFY(l.value(QStringLiteral("learn")).toBool());
    QCOMPARE(stringsOf(l.value(QStringLiteral("learned"))),
        QStringList({ QStringLiteral("input_tokens"), QStringLiteral("output_tokens") }));
    QVERIFY(l.value(QStringLiteral("tokens")).isNull()); // the mock states no token limit
    QByteArray h = history();
    QVERIFY2(h.contains("limits  anthropic  (learned from e2e's answer: input_tokens none -> 30000, "
                        "output_tokens none -> 8000"),
        h.constData());
    // The user's requests differ from the provider's: flagged, not changed.
    QVERIFY2(h.contains("provider reports 1000 requests/min; Tollgate is set to 50"), h.constData());
    // Every answer repeats the figures: one event for them, not one per answer.
    QVERIFY(send(QStringLiteral("claude-sonnet-4"), tokenLimits(30000, 8000)).out.startsWith("HTTP/1.1 200"));

    // A changed figure on a later answer is followed.
    r = send(QStringLiteral("claude-sonnet-4"), tokenLimits(40000, 8000));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
    QTRY_COMPARE_WITH_TIMEOUT(limits().value(QStringLiteral("input_tokens")).toInteger(), 40000, DEADLINE_MS);
    h = history();
    QVERIFY2(h.contains("learned from e2e's answer: input_tokens 30000 -> 40000 (by the proxy)"), h.constData());
    QCOMPARE(h.count("learned from e2e's answer"), 2);

    // Set by the user, a limit is theirs: no longer marked, no longer followed.
    setLimits(words("--input-tokens 25000"));
    l = limits();
    QCOMPARE(l.value(QStringLiteral("input_tokens")).toInteger(), 25000);
    QCOMPARE(stringsOf(l.value(QStringLiteral("learned"))), QStringList({ QStringLiteral("output_tokens") }));
    r = send(QStringLiteral("claude-sonnet-4"), tokenLimits(45000, 9000));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
    // Both figures came in one answer and are decided together: once the output has followed,
    // the input was left as the user's.
    QTRY_COMPARE_WITH_TIMEOUT(limits().value(QStringLiteral("output_tokens")).toInteger(), 9000, DEADLINE_MS);
    l = limits();
    QCOMPARE(l.value(QStringLiteral("input_tokens")).toInteger(), 25000);
    QCOMPARE(stringsOf(l.value(QStringLiteral("learned"))), QStringList({ QStringLiteral("output_tokens") }));
    h = history();
    QVERIFY2(h.contains("learned from e2e's answer: output_tokens 8000 -> 9000 (by the proxy)"), h.constData());
    // ...and the difference is flagged instead.
    const QJsonObject p = provider();
    QCOMPARE(p.value(QStringLiteral("provider_reported")).toObject().value(QStringLiteral("input_tokens_per_minute")).toInteger(),
        45000);
    QVERIFY2(QJsonDocument(p.value(QStringLiteral("limit_notices")).toArray()).toJson().contains("45000 input tokens/min"),
        QJsonDocument(p).toJson().constData());
}

// `limits set --learn` while a proxy runs that has already passed the provider's figures on:
// the proxy tells the store of the same figures again only after a minute, so `limits set
// --learn` takes what the state already holds at once.
void TestProxyLearning::learningTurnedOnLaterTakesTheFiguresAlreadyStated()
{
    setLimits(words("--requests 50"));
    startProxy();
    QVERIFY(send(QStringLiteral("claude-sonnet-4"), tokenLimits(30000, 8000)).out.startsWith("HTTP/1.1 200"));
    QTRY_COMPARE_WITH_TIMEOUT(
        provider().value(QStringLiteral("provider_reported")).toObject().value(QStringLiteral("input_tokens_per_minute")).toInteger(),
        30000, DEADLINE_MS);
    setLimits(words("--learn"));
    QVERIFY(send(QStringLiteral("claude-sonnet-4"), tokenLimits(30000, 8000)).out.startsWith("HTTP/1.1 200"));
    // The answer's figures are acted on before its body goes to the client: one more answer
    // afterwards, and whatever the first one led to has been done.
    QVERIFY(send(QStringLiteral("claude-sonnet-4"), tokenLimits(30000, 8000)).out.startsWith("HTTP/1.1 200"));
    QCOMPARE(limits().value(QStringLiteral("input_tokens")).toInteger(), 30000);
}

// (b) The figures an answer for a model of a class states are that class's limits.
void TestProxyLearning::aClassLearnsItsModelsFigures()
{
    setLimits(words("--requests 50 --learn"));
    setLimits(QStringList { QStringLiteral("--class"), QStringLiteral("opus"), QStringLiteral("--models"),
        QStringLiteral("claude-opus-4*"), QStringLiteral("--requests"), QStringLiteral("20") });
    startProxy();
    Ran r = send(QStringLiteral("claude-opus-4-1"), tokenLimits(20000, 4000));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
    auto opus = [&] {
        return limits().value(QStringLiteral("models")).toObject().value(QStringLiteral("opus")).toObject();
    };
    QTRY_COMPARE_WITH_TIMEOUT(opus().value(QStringLiteral("input_tokens")).toInteger(), 20000, DEADLINE_MS);
    QCOMPARE(opus().value(QStringLiteral("output_tokens")).toInteger(), 4000);
    QCOMPARE(opus().value(QStringLiteral("requests")).toInteger(), 20); // the user's
    QCOMPARE(stringsOf(opus().value(QStringLiteral("learned"))),
        QStringList({ QStringLiteral("input_tokens"), QStringLiteral("output_tokens") }));
    // The provider's own limits are untouched.
    QJsonObject l = limits();
    QVERIFY(l.value(QStringLiteral("input_tokens")).isNull());
    QVERIFY(l.value(QStringLiteral("output_tokens")).isNull());
    QVERIFY(stringsOf(l.value(QStringLiteral("learned"))).isEmpty());
    QByteArray h = history();
    QVERIFY2(h.contains("learned from e2e's answer: input_tokens none -> 20000, output_tokens none -> 4000 (class opus)"),
        h.constData());
    const QJsonObject reported = provider().value(QStringLiteral("provider_reported")).toObject();
    QCOMPARE(reported.value(QStringLiteral("class")).toString(), QStringLiteral("opus"));

    // A model of no class: the provider's own limits learn its figures; the class keeps its own.
    r = send(QStringLiteral("claude-sonnet-4"), tokenLimits(90000, 16000));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
    QTRY_COMPARE_WITH_TIMEOUT(limits().value(QStringLiteral("input_tokens")).toInteger(), 90000, DEADLINE_MS);
    l = limits();
    QCOMPARE(l.value(QStringLiteral("output_tokens")).toInteger(), 16000);
    QCOMPARE(opus().value(QStringLiteral("input_tokens")).toInteger(), 20000);
    QCOMPARE(opus().value(QStringLiteral("output_tokens")).toInteger(), 4000);
    QVERIFY(provider().value(QStringLiteral("provider_reported")).toObject().value(QStringLiteral("class")).isNull());
}

// (c) Without --learn the figures are only shown, until `limits adopt` takes them.
void TestProxyLearning::withoutLearningTheFiguresAreShownAndAdopted()
{
    setLimits(words("--requests 50"));
    startProxy();
    // Nothing stated yet: nothing to adopt.
    Ran r = cli(words("limits adopt anthropic"));
    QVERIFY2(r.code != 0 && r.err.contains("has stated no limits yet"), (r.out + r.err).constData());
    r = send(QStringLiteral("claude-sonnet-4"), tokenLimits(30000, 8000));
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
    auto reported = [&] { return provider().value(QStringLiteral("provider_reported")).toObject(); };
    QTRY_COMPARE_WITH_TIMEOUT(reported().value(QStringLiteral("input_tokens_per_minute")).toInteger(), 30000, DEADLINE_MS);
    QCOMPARE(reported().value(QStringLiteral("output_tokens_per_minute")).toInteger(), 8000);
    QCOMPARE(reported().value(QStringLiteral("requests_per_minute")).toInteger(), 1000);
    // Nothing learned; notices say what differs (here every figure: requests, input, output).
    QJsonObject l = limits();
    QVERIFY(!l.value(QStringLiteral("learn")).toBool());
    QVERIFY(l.value(QStringLiteral("input_tokens")).isNull());
    QCOMPARE(l.value(QStringLiteral("requests")).toInteger(), 50);
    const QByteArray notices
        = QJsonDocument(provider().value(QStringLiteral("limit_notices")).toArray()).toJson(QJsonDocument::Compact);
    QVERIFY2(notices.contains("provider reports 30000 input tokens/min"), notices.constData());
    QVERIFY2(notices.contains("provider reports 8000 output tokens/min"), notices.constData());
    QVERIFY2(notices.contains("provider reports 1000 requests/min; Tollgate is set to 50"), notices.constData());
    const Ran text = cli(words("status"));
    QVERIFY2(text.out.contains("NOTE provider reports 30000 input tokens/min"), text.out.constData());

    // Adopted: every stated figure, the user's requests too, as the user's (no learned marks).
    r = cli(words("limits adopt anthropic"));
    QVERIFY2(r.code == 0, (r.out + r.err).constData());
    l = limits();
    QCOMPARE(l.value(QStringLiteral("requests")).toInteger(), 1000);
    QCOMPARE(l.value(QStringLiteral("input_tokens")).toInteger(), 30000);
    QCOMPARE(l.value(QStringLiteral("output_tokens")).toInteger(), 8000);
    QVERIFY(stringsOf(l.value(QStringLiteral("learned"))).isEmpty());
    QCOMPARE(provider().value(QStringLiteral("limit_notices")).toArray().size(), 0);
    const QByteArray h = history();
    QVERIFY2(h.contains("adopted the provider's limits: requests 50 -> 1000, input_tokens none -> 30000, "
                        "output_tokens none -> 8000"),
        h.constData());
    // Once more: nothing changes.
    r = cli(words("limits adopt anthropic"));
    QVERIFY2(r.code == 0 && (r.out + r.err).contains("already the provider's"), (r.out + r.err).constData());
    // A later change is not followed (not learning): shown again as a notice.
    QVERIFY(send(QStringLiteral("claude-sonnet-4"), tokenLimits(35000, 8000)).out.startsWith("HTTP/1.1 200"));
    QTRY_COMPARE_WITH_TIMEOUT(reported().value(QStringLiteral("input_tokens_per_minute")).toInteger(), 35000, DEADLINE_MS);
    QCOMPARE(limits().value(QStringLiteral("input_tokens")).toInteger(), 30000);
    QCOMPARE(provider().value(QStringLiteral("limit_notices")).toArray().size(), 1);
}

// (d) A plan's 5-hour and 7-day usage in status; a rejected plan holds callers: USED UP.
void TestProxyLearning::thePlansUsageIsShownAndARejectionHolds()
{
    setLimits(words("--requests 100"));
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("0.2") });
    const qint64 now = QDateTime::currentSecsSinceEpoch();
    const QJsonObject plan { { QStringLiteral("anthropic-ratelimit-unified-status"), QStringLiteral("allowed") },
        { QStringLiteral("anthropic-ratelimit-unified-5h-utilization"), QStringLiteral("0.42") },
        { QStringLiteral("anthropic-ratelimit-unified-5h-reset"), QString::number(now + 3 * 3600) },
        { QStringLiteral("anthropic-ratelimit-unified-7d-utilization"), QStringLiteral("0.63") },
        { QStringLiteral("anthropic-ratelimit-unified-7d-reset"), QString::number(now + 3 * 86400) } };
    Ran r = send(QStringLiteral("claude-sonnet-4"), plan);
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
    auto planOf = [&] { return provider().value(QStringLiteral("plan")).toObject(); };
    QTRY_COMPARE_WITH_TIMEOUT(planOf().value(QStringLiteral("status")).toString(), QStringLiteral("allowed"), DEADLINE_MS);
    QJsonObject p = planOf();
    QVERIFY(p.value(QStringLiteral("current")).toBool());
    const QJsonObject five = p.value(QStringLiteral("five_hour")).toObject();
    const QJsonObject seven = p.value(QStringLiteral("seven_day")).toObject();
    QCOMPARE(five.value(QStringLiteral("utilization")).toDouble(), 0.42);
    QCOMPARE(seven.value(QStringLiteral("utilization")).toDouble(), 0.63);
    QCOMPARE(five.value(QStringLiteral("reset_ms")).toInteger(), (now + 3 * 3600) * 1000);
    QVERIFY(five.value(QStringLiteral("resets_in_ms")).toInteger() > 0);
    QVERIFY(five.value(QStringLiteral("resets_in_ms")).toInteger() <= 3 * 3600 * 1000);
    // The 7-day reset, days ahead, is held to a day like every time from an answer.
    QVERIFY(seven.value(QStringLiteral("resets_in_ms")).toInteger() > 0);
    QVERIFY(seven.value(QStringLiteral("resets_in_ms")).toInteger() <= 24 * 3600 * 1000);
    Ran text = cli(words("status"));
    QVERIFY2(text.out.contains("  PLAN 5h 42% (resets in "), text.out.constData());
    QVERIFY2(text.out.contains("), 7d 63% (resets in "), text.out.constData());
    QVERIFY(!text.out.contains("USED UP"));

    // Rejected, with a reset 3 s ahead: the callers are held (the proxy answers 429 itself and
    // nothing reaches the mock) until the reset; status says USED UP meanwhile and after.
    r = send(QStringLiteral("claude-sonnet-4"), {}, QStringLiteral("unified-rejected"),
        { QStringLiteral("-H"), QStringLiteral("x-mock-reset-s: 3") });
    QVERIFY2(r.out.startsWith("HTTP/1.1 429"), r.out.constData());
    QTRY_COMPARE_WITH_TIMEOUT(planOf().value(QStringLiteral("status")).toString(), QStringLiteral("rejected"), DEADLINE_MS);
    p = planOf();
    QCOMPARE(p.value(QStringLiteral("five_hour")).toObject().value(QStringLiteral("utilization")).toDouble(), 1.0);
    QCOMPARE(p.value(QStringLiteral("seven_day")).toObject().value(QStringLiteral("utilization")).toDouble(), 0.4);
    text = cli(words("status"));
    QVERIFY2(text.out.contains("USED UP: callers are held until the reset"), text.out.constData());
    QVERIFY(!provider().value(QStringLiteral("paused")).toBool());
    const int seen = mockRequests();
    QElapsedTimer t;
    t.start();
    int held = 0;
    while (!t.hasExpired(20000)) {
        r = send(QStringLiteral("claude-sonnet-4"), {});
        if (!r.out.startsWith("HTTP/1.1 429"))
            break;
        QVERIFY2(r.out.contains("Server: tollgate-proxy"), r.out.constData());
        ++held;
    }
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), r.out.constData());
    QVERIFY(held > 0);
    QCOMPARE(mockRequests(), seen + 1);
    // The answer that went carried no plan headers: the state keeps the rejected plan's words,
    // now of a window that has reset since.
    text = cli(words("status"));
    QVERIFY2(text.out.contains("PLAN 5h 100%"), text.out.constData());
    QVERIFY2(text.out.contains("before a reset)"), text.out.constData());
    QVERIFY(!planOf().value(QStringLiteral("current")).toBool());
}

// (e) Hostile values in every header that is read: nothing breaks, status stays sane, nothing
// learned passes 2^40.
void TestProxyLearning::hostileHeadersBreakNothing()
{
    setLimits(words("--learn"));
    startProxy({ QStringLiteral("--queue-timeout"), QStringLiteral("0.5") });
    const QList<QJsonObject> answers = {
        { { QStringLiteral("anthropic-ratelimit-unified-status"), QStringLiteral("on_fire") },
            { QStringLiteral("anthropic-ratelimit-unified-5h-utilization"), QStringLiteral("1e300") },
            { QStringLiteral("anthropic-ratelimit-unified-5h-reset"), QStringLiteral("253402300799") }, // 9999-12-31
            { QStringLiteral("anthropic-ratelimit-unified-7d-utilization"), QStringLiteral("-0.5") },
            { QStringLiteral("anthropic-ratelimit-unified-7d-reset"), QStringLiteral("garbage") },
            { QStringLiteral("anthropic-ratelimit-input-tokens-limit"), QStringLiteral("4611686018427387904") }, // 2^62
            { QStringLiteral("anthropic-ratelimit-output-tokens-limit"), QStringLiteral("-5") },
            { QStringLiteral("anthropic-ratelimit-tokens-limit"), QStringLiteral("1125899906842624") } }, // 2^50
        { { QStringLiteral("anthropic-ratelimit-unified-status"), QStringLiteral("") },
            { QStringLiteral("anthropic-ratelimit-unified-5h-utilization"), QStringLiteral("NaN") },
            { QStringLiteral("anthropic-ratelimit-unified-5h-reset"), QStringLiteral("-1") },
            { QStringLiteral("anthropic-ratelimit-unified-7d-utilization"), QStringLiteral("inf") },
            { QStringLiteral("anthropic-ratelimit-unified-7d-reset"), QStringLiteral("99999999999999999999") },
            { QStringLiteral("anthropic-ratelimit-input-tokens-limit"), QStringLiteral("12abc") },
            { QStringLiteral("anthropic-ratelimit-output-tokens-limit"), QStringLiteral("1e9") },
            { QStringLiteral("anthropic-ratelimit-input-tokens-remaining"), QStringLiteral("-1") },
            { QStringLiteral("anthropic-ratelimit-input-tokens-reset"), QStringLiteral("9999-12-31T23:59:59Z") },
            { QStringLiteral("anthropic-ratelimit-tokens-limit"), QStringLiteral("9007199254740993") } }, // 2^53 + 1
        { { QStringLiteral("anthropic-ratelimit-unified-5h-utilization"), QStringLiteral("0x10") },
            { QStringLiteral("anthropic-ratelimit-unified-7d-utilization"), QStringLiteral("9.99") },
            { QStringLiteral("anthropic-ratelimit-output-tokens-limit"), QStringLiteral("1099511627777") } }, // 2^40 + 1
    };
    for (const QJsonObject& headers : answers) {
        const Ran r = send(QStringLiteral("claude-sonnet-4"), headers);
        QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
    }
    // The last answer's output figure (2^40 + 1) is learned, held to 2^40: then everything the
    // answers before it said has been taken as well.
    QTRY_COMPARE_WITH_TIMEOUT(limits().value(QStringLiteral("output_tokens")).toInteger(), MAX_COUNT, DEADLINE_MS);
    const QJsonObject l = limits();
    QCOMPARE(l.value(QStringLiteral("tokens")).toInteger(), MAX_COUNT); // 2^50, held to 2^40
    QVERIFY(l.value(QStringLiteral("input_tokens")).isNull()); // 2^62, 12abc: not numbers it takes
    QVERIFY(l.value(QStringLiteral("requests")).toInteger() == 1000); // the mock's own, sane figure
    for (const qint64 v : everyLimit(l))
        QVERIFY2(v > 0 && v <= MAX_COUNT, qPrintable(QString::number(v)));

    // Status stays sane: the plan, if kept, has no share outside [0, 10] and no reset past a day.
    const Ran status = cli(words("status --json"));
    QCOMPARE(status.code, 0);
    const QJsonObject p = provider();
    QVERIFY(!p.isEmpty());
    QVERIFY(!p.value(QStringLiteral("paused")).toBool());
    QCOMPARE(p.value(QStringLiteral("backoff_remaining_ms")).toInteger(), 0);
    const QJsonObject reported = p.value(QStringLiteral("provider_reported")).toObject();
    for (const char* k : { "requests_per_minute", "tokens_per_minute", "input_tokens_per_minute", "output_tokens_per_minute" }) {
        const QJsonValue v = reported.value(QLatin1String(k));
        QVERIFY2(v.isNull() || (v.toInteger() > 0 && v.toInteger() <= MAX_COUNT), k);
    }
    const QJsonValue plan = p.value(QStringLiteral("plan"));
    if (!plan.isNull()) {
        const QString s = plan.toObject().value(QStringLiteral("status")).toString();
        QVERIFY2(s == QStringLiteral("unknown") || s == QStringLiteral("allowed"), qPrintable(s));
        for (const char* w : { "five_hour", "seven_day" }) {
            const QJsonObject o = plan.toObject().value(QLatin1String(w)).toObject();
            const QJsonValue u = o.value(QStringLiteral("utilization"));
            QVERIFY2(u.isNull() || (u.toDouble() >= 0 && u.toDouble() <= 10), w);
            const QJsonValue in = o.value(QStringLiteral("resets_in_ms"));
            QVERIFY2(in.isNull() || (in.toInteger() >= 0 && in.toInteger() <= 24 * 3600 * 1000 + 60000), w);
        }
    }
    const Ran text = cli(words("status"));
    QCOMPARE(text.code, 0);
    QVERIFY2(!text.out.contains("USED UP"), text.out.constData());
    QVERIFY2(!text.out.contains("e+"), text.out.constData()); // no 1e300 % anywhere
    // Nobody is held by them, nothing was refused, and the proxy still serves.
    const Ran r = send(QStringLiteral("claude-sonnet-4"), {});
    QVERIFY2(r.out.startsWith("HTTP/1.1 200"), (r.out + r.err).constData());
    QVERIFY(m_proxy->state() == QProcess::Running);
    const QByteArray h = history();
    QVERIFY2(!h.contains("  hold  "), h.constData());
}

QTEST_GUILESS_MAIN(TestProxyLearning)
#include "tst_proxylearning.moc"
