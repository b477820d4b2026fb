// Numbers and dates from outside (a Retry-After value, limits.json, CLI options) are bounded
// and validated: nothing out of range is silently replaced, and no single 429 report stops
// every caller for longer than the documented maximum (RetryAfter::MAX_MS).

#include "quota/quotalimits.h"
#include "quota/retryafter.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <climits>
#include <ctime>

using namespace tollgate;

namespace {

constexpr std::int64_t DAY_MS = 24LL * 3600 * 1000;
// 2027-01-15 08:00:00 UTC, a Friday.
constexpr std::int64_t NOW = 1800000000000LL;

QByteArray limitsJson(const char* providerBody)
{
    return QByteArray("{\"version\": 1, \"providers\": {\"api\": {") + providerBody + "}}}";
}

} // namespace

class TestValues final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();

    void retryAfterSecondsAreBoundedAndExact();
    void retryAfterDatesAreBounded();
    void retryAfterRfc850TwoDigitYears();
    void retryAfterRefusesImpossibleDates_data();
    void retryAfterRefusesImpossibleDates();
    void retryAfterNeverOverflows();

    void limitsFileOutOfRangeIsRefused_data();
    void limitsFileOutOfRangeIsRefused();
    void limitsFileInRangeIsKept();
    void limitsValidateHasUpperBounds();

    void cliBoundsAReportedRetryAfter();
    void cliRefusesAnEditedLimitsFile();
    void cliRefusesMisspeltOrRepeatedKeys_data();
    void cliRefusesMisspeltOrRepeatedKeys();

private:
    struct Ran
    {
        int code = -1;
        QByteArray out, err;
    };
    Ran cli(QStringList args) const;

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
};

void TestValues::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    m_home = m_dir->path() + QStringLiteral("/home");
}

TestValues::Ran TestValues::cli(QStringList args) const
{
    args.insert(1, QStringLiteral("--home"));
    args.insert(2, m_home);
    QProcess p;
    p.start(QStringLiteral(TOLLGATE_CLI_PATH), args);
    p.waitForFinished(60000);
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
        p.readAllStandardError() };
}

void TestValues::retryAfterSecondsAreBoundedAndExact()
{
    QCOMPARE(*RetryAfter::parseMs("120", NOW), 120000);
    QCOMPARE(*RetryAfter::parseMs("1.5", NOW), 1500);
    QCOMPARE(*RetryAfter::parseMs("0.0004", NOW), 0);
    QCOMPARE(*RetryAfter::parseMs("0.0005", NOW), 1);
    QCOMPARE(*RetryAfter::parseMs("007", NOW), 7000);
    QCOMPARE(*RetryAfter::parseMs("120\r\n", NOW), 120000); // as read from a file
    QCOMPARE(*RetryAfter::parseMs("86400", NOW), DAY_MS);
    // Above the maximum: clamped to it (the server still gets a day of silence).
    QCOMPARE(*RetryAfter::parseMs("86401", NOW), DAY_MS);
    QCOMPARE(*RetryAfter::parseMs("31536000", NOW), DAY_MS);
    QCOMPARE(*RetryAfter::parseMs("99999999999999999999999999999999", NOW), DAY_MS);
    // Not delay-seconds: no sign, exponent, hex, inf or nan.
    for (const char* bad :
        { "-5", "+5", "-0.5", "1e3", "1e400", "0x10", "inf", "nan", ".5", "5.", "1 2", "1,5" })
        QVERIFY2(!RetryAfter::parseMs(bad, NOW).ok(), bad);
}

void TestValues::retryAfterDatesAreBounded()
{
    QCOMPARE(*RetryAfter::parseMs("Fri, 15 Jan 2027 08:01:00 GMT", NOW), 60000);
    QCOMPARE(*RetryAfter::parseMs("Fri Jan 15 08:01:00 2027", NOW), 60000);
    QVERIFY(!RetryAfter::parseMs("Sat Jan 16  8:00:00 2027", NOW).ok()); // the hour is 2DIGIT
    QCOMPARE(*RetryAfter::parseMs("Fri Jan  1 08:00:00 2027", NOW), 0); // asctime pads the day with a space
    QCOMPARE(*RetryAfter::parseMs("Sat, 16 Jan 2027 08:00:00 GMT", NOW), DAY_MS);
    QCOMPARE(*RetryAfter::parseMs("Sat, 16 Jan 2027 08:00:01 GMT", NOW), DAY_MS);
    // The example: 7,973 years before; now the same day-long maximum as seconds.
    QCOMPARE(*RetryAfter::parseMs("Fri, 31 Dec 9999 23:59:59 GMT", NOW), DAY_MS);
    QCOMPARE(*RetryAfter::parseMs("Fri Dec 31 23:59:59 9999", NOW), DAY_MS);
    QCOMPARE(*RetryAfter::parseMs("Thu, 01 Jan 1970 00:00:00 GMT", NOW), 0); // past: no wait
    QCOMPARE(*RetryAfter::parseMs("Sat, 01 Jan 0000 00:00:00 GMT", NOW), 0);
    // Leap days that exist, and a leap second.
    QCOMPARE(*RetryAfter::parseMs("Tue, 29 Feb 2028 00:00:00 GMT", NOW), DAY_MS);
    QCOMPARE(*RetryAfter::parseMs("Tue, 29 Feb 2000 00:00:00 GMT", NOW), 0);
    QCOMPARE(*RetryAfter::parseMs("Fri, 15 Jan 2027 08:00:60 GMT", NOW), 60000);
}

void TestValues::retryAfterRfc850TwoDigitYears()
{
    QCOMPARE(*RetryAfter::parseMs("Friday, 15-Jan-27 08:01:00 GMT", NOW), 60000);
    // RFC 9110: more than 50 years ahead means the past century: 2099 -> 1999, no wait.
    QCOMPARE(*RetryAfter::parseMs("Friday, 31-Dec-99 23:59:59 GMT", NOW), 0);
    QCOMPARE(*RetryAfter::parseMs("Thursday, 31-Dec-76 23:59:59 GMT", NOW), DAY_MS); // 2076: ahead, < 50 y
    QVERIFY(!RetryAfter::parseMs("Thursday, 31-Dec-99 23:59:59 GMT", NOW).ok()); // 1999-12-31 was a Friday
}

void TestValues::retryAfterRefusesImpossibleDates_data()
{
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("named"); // what the message must mention
    QTest::newRow("Feb 29, not a leap year") << "Mon, 29 Feb 2027 00:00:00 GMT"
                                             << "29 Feb 2027";
    QTest::newRow("Feb 29, 2100") << "Mon, 29 Feb 2100 00:00:00 GMT"
                                  << "29 Feb 2100";
    QTest::newRow("Feb 30") << "Wed, 30 Feb 2028 00:00:00 GMT"
                            << "30 Feb 2028";
    QTest::newRow("Apr 31") << "Sat, 31 Apr 2027 00:00:00 GMT"
                            << "31 Apr 2027";
    QTest::newRow("day 0") << "Fri, 00 Jan 2027 00:00:00 GMT"
                           << "00 Jan 2027";
    QTest::newRow("day 32") << "Fri, 32 Jan 2027 00:00:00 GMT"
                            << "32 Jan 2027";
    QTest::newRow("hour 24") << "Fri, 15 Jan 2027 24:00:00 GMT"
                             << "24:00:00";
    QTest::newRow("minute 60") << "Fri, 15 Jan 2027 08:60:00 GMT"
                               << "08:60:00";
    QTest::newRow("second 61") << "Fri, 15 Jan 2027 08:00:61 GMT"
                               << "08:00:61";
    QTest::newRow("weekday name") << "Fry, 15 Jan 2027 08:00:00 GMT"
                                  << "Fry";
    QTest::newRow("month name") << "Fri, 15 Jon 2027 08:00:00 GMT"
                                << "Jon";
    QTest::newRow("weekday of another day") << "Mon, 15 Jan 2027 08:00:00 GMT"
                                            << "Friday";
    QTest::newRow("asctime Feb 29") << "Mon Feb 29 00:00:00 2027"
                                    << "29 Feb 2027";
    QTest::newRow("rfc850 hour 24") << "Friday, 15-Jan-27 24:00:00 GMT"
                                    << "24:00:00";
    QTest::newRow("rfc850 short weekday") << "Fri, 15-Jan-27 08:00:00 GMT"
                                          << "HTTP date";
    QTest::newRow("not GMT") << "Fri, 15 Jan 2027 08:00:00 PST"
                             << "HTTP date";
    QTest::newRow("trailing text") << "Fri, 15 Jan 2027 08:00:00 GMT x"
                                   << "HTTP date";
    QTest::newRow("one-digit day") << "Fri, 5 Jan 2027 08:00:00 GMT"
                                   << "HTTP date";
    QTest::newRow("garbage") << "soon"
                             << "soon";
    QTest::newRow("empty") << "  "
                           << "empty";
}

void TestValues::retryAfterRefusesImpossibleDates()
{
    QFETCH(QString, value);
    QFETCH(QString, named);
    const std::string v = value.toStdString();
    auto r = RetryAfter::parseMs(v, NOW);
    QVERIFY2(!r.ok(), v.c_str());
    QCOMPARE(r.error().kind, ErrorKind::Usage);
    QVERIFY2(QString::fromStdString(r.error().message).contains(named), r.error().message.c_str());
    QVERIFY(r.error().message.find('\n') == std::string::npos); // one line
}

void TestValues::retryAfterNeverOverflows()
{
    for (std::int64_t now :
        { INT64_MIN, INT64_MIN + 1, std::int64_t(-1), std::int64_t(0), INT64_MAX - 1, INT64_MAX }) {
        for (const char* v : { "0", "86400", "9223372036854775807", "9223372036854775808.999",
                 "Fri, 31 Dec 9999 23:59:59 GMT", "Sat, 01 Jan 0000 00:00:00 GMT",
                 "Friday, 31-Dec-99 23:59:59 GMT", "Fri Dec 31 23:59:59 9999" }) {
            auto r = RetryAfter::parseMs(v, now);
            if (!r.ok()) // an rfc850 weekday can only match the century chosen for `now`
                continue;
            QVERIFY2(*r >= 0 && *r <= DAY_MS, v);
        }
    }
    QCOMPARE(*RetryAfter::parseMs("Fri, 31 Dec 9999 23:59:59 GMT", INT64_MIN), DAY_MS);
    QCOMPARE(*RetryAfter::parseMs("Sat, 01 Jan 0000 00:00:00 GMT", INT64_MAX), 0);
}

void TestValues::limitsFileOutOfRangeIsRefused_data()
{
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<QString>("message");
    QTest::newRow("max hold -1") << limitsJson("\"requests\": 5, \"max_hold_seconds\": -1")
                                 << "provider 'api': max_hold_seconds must be between 1 and 604800 (got -1)";
    QTest::newRow("max hold 0.5") << limitsJson("\"requests\": 5, \"max_hold_seconds\": 0.5")
                                  << "max_hold_seconds must be between 1 and 604800 (got 0.5)";
    QTest::newRow("max hold 1e13") << limitsJson("\"requests\": 5, \"max_hold_seconds\": 1e13")
                                   << "max_hold_seconds must be between 1 and 604800 (got 10000000000000)";
    QTest::newRow("max hold 8 days") << limitsJson("\"requests\": 5, \"max_hold_seconds\": 691200")
                                     << "max_hold_seconds must be between 1 and 604800 (got 691200)";
    QTest::newRow("max hold string")
        << limitsJson("\"requests\": 5, \"max_hold_seconds\": \"600\"")
        << "max_hold_seconds must be a number between 1 and 604800 (got a string)";
    QTest::newRow("max hold null") << limitsJson("\"requests\": 5, \"max_hold_seconds\": null")
                                   << "max_hold_seconds must be a number between 1 and 604800 (got null)";
    QTest::newRow("cap 1e300") << limitsJson("\"requests\": 5, \"backoff_cap_seconds\": 1e300")
                               << "backoff_cap_seconds must be between 0.001 and 86400 (got 1e+300)";
    QTest::newRow("cap 2 days") << limitsJson("\"requests\": 5, \"backoff_cap_seconds\": 172800")
                                << "backoff_cap_seconds must be between 0.001 and 86400 (got 172800)";
    QTest::newRow("base negative") << limitsJson("\"requests\": 5, \"backoff_base_seconds\": -60")
                                   << "backoff_base_seconds must be between 0.001 and 86400 (got -60)";
    QTest::newRow("base above cap")
        << limitsJson("\"requests\": 5, \"backoff_base_seconds\": 120, \"backoff_cap_seconds\": 60")
        << "backoff_base_seconds (120) must not be above backoff_cap_seconds (60)";
    QTest::newRow("window 0") << limitsJson("\"requests\": 5, \"window_seconds\": 0")
                              << "window_seconds must be between 0.1 and 604800 (got 0)";
    QTest::newRow("window 604801") << limitsJson("\"requests\": 5, \"window_seconds\": 604801")
                                   << "window_seconds must be between 0.1 and 604800 (got 604801)";
    QTest::newRow("window bool") << limitsJson("\"requests\": 5, \"window_seconds\": true")
                                 << "window_seconds must be a number between 0.1 and 604800 (got a boolean)";
    QTest::newRow("requests 0") << limitsJson("\"requests\": 0")
                                << "requests must be a whole number between 1 and 1099511627776 (got 0)";
    QTest::newRow("requests 1.5") << limitsJson("\"requests\": 1.5")
                                  << "requests must be a whole number between 1 and 1099511627776 (got 1.5)";
    QTest::newRow("requests 2^63")
        << limitsJson("\"requests\": 9223372036854775808")
        << "requests must be a whole number between 1 and 1099511627776 (got 9223372036854775808)";
    QTest::newRow("requests -2^63")
        << limitsJson("\"requests\": -9223372036854775808")
        << "requests must be a whole number between 1 and 1099511627776 (got -9223372036854775808)";
    QTest::newRow("tokens array")
        << limitsJson("\"tokens\": [1]")
        << "tokens must be a whole number between 1 and 1099511627776 or null (got an array)";
    QTest::newRow("parallel 257") << limitsJson("\"parallel\": 257")
                                  << "parallel must be a whole number between 1 and 256 (got 257)";
    QTest::newRow("headroom 0") << limitsJson("\"requests\": 5, \"headroom_percent\": 0")
                                << "headroom_percent must be a whole number between 1 and 100 (got 0)";
    QTest::newRow("headroom 101") << limitsJson("\"requests\": 5, \"headroom_percent\": 101")
                                  << "headroom_percent must be a whole number between 1 and 100 (got 101)";
    QTest::newRow("headroom 80.5") << limitsJson("\"requests\": 5, \"headroom_percent\": 80.5")
                                   << "headroom_percent must be a whole number between 1 and 100 (got 80.5)";
    QTest::newRow("headroom null") << limitsJson("\"requests\": 5, \"headroom_percent\": null")
                                   << "headroom_percent must be a whole number between 1 and 100 (got null)";
    QTest::newRow("model window 1e300")
        << limitsJson("\"requests\": 5, \"models\": {\"m\": {\"requests\": 1, \"window_seconds\": 1e300}}")
        << "provider 'api' model 'm': window_seconds must be between 0.1 and 604800 (got 1e+300)";
    QTest::newRow("model requests -1")
        << limitsJson("\"requests\": 5, \"models\": {\"m\": {\"requests\": -1}}")
        << "provider 'api' model 'm': requests must be a whole number between 1 and "
           "1099511627776 (got -1)";
    QTest::newRow("model tokens object")
        << limitsJson("\"requests\": 5, \"models\": {\"m\": {\"tokens\": {}}}")
        << "provider 'api' model 'm': tokens must be a whole number between 1 and "
           "1099511627776 or null (got an object)";
    // A key this version does not read is refused, not skipped: a misspelt limit is a lost one.
    QTest::newRow("parallel misspelt")
        << limitsJson("\"requests\": 5, \"paralel\": 1")
        << "unknown key providers.api.paralel (a provider's keys are requests, "
           "tokens, window_seconds, parallel, headroom_percent, "
           "backoff_base_seconds, backoff_cap_seconds, max_hold_seconds, models, input_tokens, "
           "output_tokens, per_day, day_resets, learn, learned)";
    QTest::newRow("requests capitalised")
        << limitsJson("\"Requests\": 1") << "unknown key providers.api.Requests";
    QTest::newRow("model key misspelt")
        << limitsJson("\"requests\": 5, \"models\": {\"m\": {\"token\": 1}}")
        << "unknown key providers.api.models.m.token (a model's keys are requests, tokens, window_seconds, "
           "input_tokens, output_tokens, per_day, match, learned)";
    QTest::newRow("top-level key misspelt")
        << QByteArray("{\"version\": 1, \"provider\": {\"api\": {\"requests\": 5}}}")
        << "unknown key provider (the top level's keys are version, providers)";
    QTest::newRow("top-level extra key")
        << QByteArray("{\"version\": 1, \"comment\": \"x\", \"providers\": {}}") << "unknown key comment";
    QTest::newRow("unknown key, control bytes")
        << limitsJson("\"requests\": 5, \"a\\nb\": 1") << "unknown key providers.api.a?b";
    // nlohmann::json would keep the last of two equal keys; which one was meant is unknown.
    QTest::newRow("duplicate limit") << limitsJson("\"requests\": 5, \"parallel\": 2, \"parallel\": 1")
                                     << "duplicate key providers.api.parallel";
    QTest::newRow("duplicate model limit")
        << limitsJson("\"requests\": 5, \"models\": {\"m\": {\"tokens\": 100, \"tokens\": 1}}")
        << "duplicate key providers.api.models.m.tokens";
    QTest::newRow("duplicate provider")
        << QByteArray("{\"version\": 1, \"providers\": {\"api\": {\"requests\": 5}, \"api\": {}}}")
        << "duplicate key providers.api";
    QTest::newRow("duplicate version")
        << QByteArray("{\"version\": 1, \"version\": 1, \"providers\": {}}") << "duplicate key version";
}

void TestValues::limitsFileOutOfRangeIsRefused()
{
    QFETCH(QByteArray, body);
    QFETCH(QString, message);
    auto r = QuotaLimits::fromJson(body.toStdString());
    QVERIFY2(!r.ok(), body.constData());
    QCOMPARE(r.error().kind, ErrorKind::Corrupt);
    QVERIFY2(QString::fromStdString(r.error().message).contains(message), r.error().message.c_str());
}

void TestValues::limitsFileInRangeIsKept()
{
    auto r = QuotaLimits::fromJson(
        limitsJson("\"requests\": 1099511627776, \"tokens\": null, \"parallel\": 256, "
                   "\"window_seconds\": 604800, \"headroom_percent\": 1, "
                   "\"backoff_base_seconds\": 0.001, \"backoff_cap_seconds\": 86400, "
                   "\"max_hold_seconds\": 604800, "
                   "\"models\": {\"m\": {\"tokens\": 2.0, \"window_seconds\": 0.1}}")
            .toStdString());
    QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
    const ProviderLimits* l = r->find("api");
    QVERIFY(l);
    QCOMPARE(*l->requests, std::int64_t(1) << 40);
    QVERIFY(!l->tokens);
    QCOMPARE(*l->parallel, 256);
    QCOMPARE(l->windowMs, 604800000);
    QCOMPARE(l->headroomPercent, 1);
    QCOMPARE(l->backoffBaseMs, 1);
    QCOMPARE(l->backoffCapMs, DAY_MS);
    QCOMPARE(l->maxHoldMs, 604800000);
    QCOMPARE(*l->models.at("m").tokens, 2);
    QCOMPARE(l->models.at("m").windowMs, 100);
    // What we write, we read back unchanged.
    auto again = QuotaLimits::fromJson(r->toJson());
    QVERIFY(again.ok());
    QVERIFY(*again == *r);
    // A missing field is the default; that is not "silently replaced".
    auto d = QuotaLimits::fromJson(limitsJson("\"requests\": 5").toStdString());
    QVERIFY(d.ok());
    QCOMPARE(d->find("api")->maxHoldMs, ProviderLimits {}.maxHoldMs);
}

void TestValues::limitsValidateHasUpperBounds()
{
    ProviderLimits l;
    l.requests = 5;
    QVERIFY(QuotaLimits::validate("api", l).ok());
    auto with = [&](auto change) {
        ProviderLimits x = l;
        change(x);
        auto r = QuotaLimits::validate("api", x);
        return r.ok() ? std::string() : r.error().message;
    };
    QCOMPARE(with([](ProviderLimits& x) { x.maxHoldMs = 10'000'000'000'000'000; }),
        std::string("provider 'api': max_hold_seconds must be between 1 and 604800 (got 10000000000000)"));
    QCOMPARE(with([](ProviderLimits& x) { x.maxHoldMs = -1000; }),
        std::string("provider 'api': max_hold_seconds must be between 1 and 604800 (got -1)"));
    auto startsWith = [](const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; };
    QVERIFY(startsWith(with([](ProviderLimits& x) { x.backoffCapMs = INT64_MAX; }),
        "provider 'api': backoff_cap_seconds must be between 0.001 and 86400 (got 9223372036854775.807)"));
    QCOMPARE(with([](ProviderLimits& x) { x.backoffBaseMs = 0; }),
        std::string("provider 'api': backoff_base_seconds must be between 0.001 and 86400 (got 0)"));
    QVERIFY(startsWith(with([](ProviderLimits& x) { x.headroomPercent = INT64_MIN; }),
        "provider 'api': headroom_percent must be a whole number between 1 and 100 (got "
        "-9223372036854775808)"));
    QVERIFY(startsWith(with([](ProviderLimits& x) { x.windowMs = INT64_MAX; }),
        "provider 'api': window_seconds must be between 0.1 and 604800 (got 9223372036854775.807)"));
    QVERIFY(startsWith(with([](ProviderLimits& x) { x.requests = INT64_MAX; }),
        "provider 'api': requests must be a whole number between 1 and 1099511627776 (got "
        "9223372036854775807)"));
    QCOMPARE(with([](ProviderLimits& x) { x.backoffCapMs = INT64_MIN; }),
        std::string("provider 'api': backoff_cap_seconds must be between 0.001 and 86400 (got "
                    "-9223372036854775.808)"));
    QCOMPARE(with([](ProviderLimits& x) { x.maxHoldMs = -5; }),
        std::string("provider 'api': max_hold_seconds must be between 1 and 604800 (got -0.005)"));
    QCOMPARE(with([](ProviderLimits& x) { x.maxHoldMs = 999; }),
        std::string("provider 'api': max_hold_seconds must be between 1 and 604800 (got 0.999)"));
    QVERIFY(startsWith(with([](ProviderLimits& x) { x.models["m"].tokens = 0; }),
        "provider 'api' model 'm': tokens must be a whole number between 1 and 1099511627776 (got 0)"));
}

void TestValues::cliBoundsAReportedRetryAfter()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("5"), QStringLiteral("--window"),
                     QStringLiteral("60") })
                 .code,
        0);
    // An impossible date is refused (usage), and records nothing.
    auto bad = cli({ QStringLiteral("report-429"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("t"), QStringLiteral("--retry-after"),
        QStringLiteral("Mon, 29 Feb 2027 00:00:00 GMT") });
    QCOMPARE(bad.code, 2);
    QVERIFY2(bad.err.contains("29 Feb 2027"), bad.err.constData());
    // The example: every caller would have backed off for 7,973 years.
    auto far = cli({ QStringLiteral("report-429"), QStringLiteral("api"), QStringLiteral("--caller"),
        QStringLiteral("t"), QStringLiteral("--retry-after"), QStringLiteral("Fri, 31 Dec 9999 23:59:59 GMT"),
        QStringLiteral("--json") });
    QCOMPARE(far.code, 0);
    const QJsonObject j = QJsonDocument::fromJson(far.out).object();
    QVERIFY2(j.contains(QStringLiteral("backoff_ms")), far.out.constData());
    QCOMPARE(j.value(QStringLiteral("backoff_ms")).toDouble(), double(DAY_MS));
    auto status = cli({ QStringLiteral("status"), QStringLiteral("--json") });
    QCOMPARE(status.code, 0);
    const QJsonArray providers
        = QJsonDocument::fromJson(status.out).object().value(QStringLiteral("providers")).toArray();
    QCOMPARE(providers.size(), 1);
    // a day, plus the jitter (at most 5 s)
    const double remaining
        = providers.first().toObject().value(QStringLiteral("backoff_remaining_ms")).toDouble();
    QVERIFY2(remaining > 0 && remaining <= double(DAY_MS + 5000), status.out.constData());
}

void TestValues::cliRefusesAnEditedLimitsFile()
{
    QCOMPARE(cli({ QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("api"),
                     QStringLiteral("--requests"), QStringLiteral("5"), QStringLiteral("--window"),
                     QStringLiteral("60") })
                 .code,
        0);
    QFile f(m_home + QStringLiteral("/limits.json"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    QByteArray text = f.readAll();
    f.close();
    QVERIFY(text.contains("\"max_hold_seconds\": 600.0") || text.contains("\"max_hold_seconds\": 600"));
    text.replace("\"max_hold_seconds\": 600.0", "\"max_hold_seconds\": -1");
    text.replace("\"max_hold_seconds\": 600", "\"max_hold_seconds\": -1");
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(text);
    f.close();
    auto shown = cli({ QStringLiteral("limits"), QStringLiteral("show") });
    QCOMPARE(shown.code, 3);
    QVERIFY2(
        shown.err.contains("max_hold_seconds must be between 1 and 604800 (got -1)"), shown.err.constData());
    QVERIFY(!shown.out.contains("max hold")); // not shown as the default
}

// The reviewer's hand edits: each once left `limits show` saying "p: no limits" (exit 0), or
// kept only the last of two values. Now each is refused like an out-of-range value: exit 3,
// the file and the key named, and nothing rewritten. `limits import` of the same text is
// refused too (exit 2, a usage error: the file was named on the command line).
void TestValues::cliRefusesMisspeltOrRepeatedKeys_data()
{
    QTest::addColumn<QByteArray>("from");
    QTest::addColumn<QByteArray>("to");
    QTest::addColumn<QByteArray>("message");
    QTest::newRow("parallel misspelt") << QByteArray("\"parallel\": 2") << QByteArray("\"paralel\": 1")
                                       << QByteArray("unknown key providers.p.paralel");
    QTest::newRow("requests capitalised") << QByteArray("\"requests\": 5") << QByteArray("\"Requests\": 1")
                                          << QByteArray("unknown key providers.p.Requests");
    QTest::newRow("model key misspelt") << QByteArray("\"tokens\": 100") << QByteArray("\"tokns\": 100")
                                        << QByteArray("unknown key providers.p.models.m.tokns");
    QTest::newRow("top-level key") << QByteArray("\"version\": 1")
                                   << QByteArray("\"version\": 1, \"limits\": {}")
                                   << QByteArray("unknown key limits");
    QTest::newRow("duplicate parallel")
        << QByteArray("\"parallel\": 2") << QByteArray("\"parallel\": 2, \"parallel\": 1")
        << QByteArray("duplicate key providers.p.parallel");
    QTest::newRow("duplicate model tokens")
        << QByteArray("\"tokens\": 100") << QByteArray("\"tokens\": 100, \"tokens\": 1")
        << QByteArray("duplicate key providers.p.models.m.tokens");
    QTest::newRow("duplicate provider")
        << QByteArray("\"providers\": {") << QByteArray("\"providers\": {\"p\": {\"requests\": 1},")
        << QByteArray("duplicate key providers.p");
}

void TestValues::cliRefusesMisspeltOrRepeatedKeys()
{
    QFETCH(QByteArray, from);
    QFETCH(QByteArray, to);
    QFETCH(QByteArray, message);
    const auto set = [this](QStringList more) {
        return cli(
            QStringList { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("p") } + more)
            .code;
    };
    QCOMPARE(set({ QStringLiteral("--requests"), QStringLiteral("5"), QStringLiteral("--window"),
                 QStringLiteral("60"), QStringLiteral("--parallel"), QStringLiteral("2") }),
        0);
    QCOMPARE(set({ QStringLiteral("--model"), QStringLiteral("m"), QStringLiteral("--tokens"),
                 QStringLiteral("100") }),
        0);
    const QString path = m_home + QStringLiteral("/limits.json");
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QByteArray text = f.readAll();
    f.close();
    QCOMPARE(text.count(from), 1);
    text.replace(from, to);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(text);
    f.close();
    const QStringList before = QDir(m_home).entryList(QDir::Files, QDir::Name);

    const std::pair<const char*, QStringList> commands[] = {
        { "limits show", { QStringLiteral("limits"), QStringLiteral("show") } },
        { "status", { QStringLiteral("status") } },
        { "acquire",
            { QStringLiteral("acquire"), QStringLiteral("p"), QStringLiteral("--caller"), QStringLiteral("t"),
                QStringLiteral("--timeout"), QStringLiteral("0") } },
        { "limits set",
            { QStringLiteral("limits"), QStringLiteral("set"), QStringLiteral("q"),
                QStringLiteral("--requests"), QStringLiteral("1") } },
    };
    for (const auto& [what, args] : commands) {
        const Ran r = cli(args);
        QVERIFY2(r.code == 3, (what + (": " + r.err)).constData());
        QVERIFY2(
            r.err.contains(path.toUtf8()) && r.err.contains(message), (what + (": " + r.err)).constData());
    }
    // Nothing rewritten or set aside: the user's file is as they left it, and no backup rotated.
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), text);
    f.close();
    QCOMPARE(QDir(m_home).entryList(QDir::Files, QDir::Name), before);

    // The same text given to `limits import` is refused before any home is touched.
    const QString doc = m_dir->path() + QStringLiteral("/edited.json");
    QFile d(doc);
    QVERIFY(d.open(QIODevice::WriteOnly));
    d.write(text);
    d.close();
    const QString other = m_dir->path() + QStringLiteral("/other");
    QProcess p;
    p.start(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("limits"), QStringLiteral("import"), QStringLiteral("--home"), other, doc });
    QVERIFY(p.waitForFinished(60000));
    const QByteArray err = p.readAllStandardError();
    QCOMPARE(p.exitCode(), 2);
    QVERIFY2(err.contains(doc.toUtf8()) && err.contains(message), err.constData());
    QVERIFY(!QFileInfo::exists(other + QStringLiteral("/limits.json")));
}

QTEST_APPLESS_MAIN(TestValues)
#include "tst_values.moc"
