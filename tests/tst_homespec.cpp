// HomeSpec: what a home string names. A URL is a Redis home or refused by name, never taken
// as a relative directory; a password never rides in the string.

#include "base/secretmask.h"
#include "store/homespec.h"

#include <QTest>
#include <cstdlib>

using namespace tollgate;

class TestHomeSpec final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void directories_data();
    void directories();
    void redisUrls_data();
    void redisUrls();
    void refused_data();
    void refused();
    void resolveOrder();
    void masksAnyUserinfo_data();
    void masksAnyUserinfo();
    void everyShapeOfPasswordIsRefusedMasked_data();
    void everyShapeOfPasswordIsRefusedMasked();
};

void TestHomeSpec::directories_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("dir");
    QTest::newRow("absolute") << "/var/lib/tollgate"
                              << "/var/lib/tollgate";
    QTest::newRow("trailing slashes") << "/tmp/home//"
                                      << "/tmp/home";
    QTest::newRow("relative") << "state/tollgate"
                              << "state/tollgate";
    QTest::newRow("colon inside") << "a:b/c"
                                  << "a:b/c";
}

void TestHomeSpec::directories()
{
    QFETCH(QString, text);
    QFETCH(QString, dir);
    auto spec = HomeSpec::parse(text.toStdString());
    QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().describe().c_str());
    QVERIFY(spec->isDirectory());
    QCOMPARE(QString::fromStdString(spec->dir()), dir);
    QCOMPARE(QString::fromStdString(spec->text()), dir);
}

void TestHomeSpec::redisUrls_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("user");
    QTest::addColumn<QString>("host");
    QTest::addColumn<int>("port");
    QTest::addColumn<int>("db");
    QTest::addColumn<QString>("prefix");
    QTest::addColumn<QString>("canonical");
    QTest::newRow("host only") << "redis://cache"
                               << ""
                               << "cache" << 6379 << 0 << "tollgate"
                               << "redis://cache:6379/0";
    QTest::newRow("everything") << "redis://ci@10.0.0.5:6380/3?prefix=team-a"
                                << "ci"
                                << "10.0.0.5" << 6380 << 3 << "team-a"
                                << "redis://ci@10.0.0.5:6380/3?prefix=team-a";
    QTest::newRow("ipv6") << "redis://[::1]:7000"
                          << ""
                          << "::1" << 7000 << 0 << "tollgate"
                          << "redis://[::1]:7000/0";
    QTest::newRow("scheme in capitals") << "REDIS://h/2"
                                        << ""
                                        << "h" << 6379 << 2 << "tollgate"
                                        << "redis://h:6379/2";
    QTest::newRow("trailing slash") << "redis://h/"
                                    << ""
                                    << "h" << 6379 << 0 << "tollgate"
                                    << "redis://h:6379/0";
}

void TestHomeSpec::redisUrls()
{
    QFETCH(QString, text);
    QFETCH(QString, user);
    QFETCH(QString, host);
    QFETCH(int, port);
    QFETCH(int, db);
    QFETCH(QString, prefix);
    QFETCH(QString, canonical);
    auto spec = HomeSpec::parse(text.toStdString());
    QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().describe().c_str());
    QCOMPARE(spec->kind(), HomeSpec::Kind::Redis);
    QCOMPARE(QString::fromStdString(spec->redis().user), user);
    QCOMPARE(QString::fromStdString(spec->redis().host), host);
    QCOMPARE(spec->redis().port, port);
    QCOMPARE(spec->redis().db, db);
    QCOMPARE(QString::fromStdString(spec->redis().prefix), prefix);
    QCOMPARE(QString::fromStdString(spec->text()), canonical);
    // The canonical form reads back as the same address.
    auto again = HomeSpec::parse(spec->text());
    QVERIFY(again.ok());
    QVERIFY(again->redis() == spec->redis());
}

void TestHomeSpec::refused_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("says");
    QTest::newRow("password in the url") << "redis://u:secret@h"
                                         << "TOLLGATE_REDIS_PASSWORD";
    QTest::newRow("empty password") << "redis://:secret@h"
                                    << "TOLLGATE_REDIS_PASSWORD";
    QTest::newRow("tls") << "rediss://h:6380"
                         << "TLS";
    QTest::newRow("other scheme") << "http://h"
                                  << "unknown kind of home 'http://'";
    QTest::newRow("unix scheme") << "unix:///run/redis.sock"
                                 << "unix socket";
    QTest::newRow("one slash") << "redis:/h"
                               << "looks like a URL";
    QTest::newRow("no host") << "redis://"
                             << "needs a host";
    QTest::newRow("no host, port") << "redis://:6379"
                                   << "needs a host";
    QTest::newRow("port 0") << "redis://h:0"
                            << "port";
    QTest::newRow("port too big") << "redis://h:65536"
                                  << "port";
    QTest::newRow("port not a number") << "redis://h:abc"
                                       << "port";
    QTest::newRow("empty port") << "redis://h:"
                                << "port";
    QTest::newRow("db not a number") << "redis://h/x"
                                     << "database number";
    QTest::newRow("db too big") << "redis://h/70000"
                                << "database number";
    QTest::newRow("db with a path") << "redis://h/1/2"
                                    << "database number";
    QTest::newRow("unknown option") << "redis://h?db=2"
                                    << "unknown option 'db'";
    QTest::newRow("empty prefix") << "redis://h?prefix="
                                  << "prefix=";
    QTest::newRow("brace in prefix") << "redis://h?prefix={x}"
                                     << "prefix=";
    QTest::newRow("long prefix") << QStringLiteral("redis://h?prefix=") + QString(65, QLatin1Char('p'))
                                 << "prefix=";
    QTest::newRow("percent") << "redis://h%2fx"
                             << "percent-encoding";
    QTest::newRow("control byte in host") << "redis://h\x1b[2J"
                                          << "host";
    QTest::newRow("fragment") << "redis://h#x"
                              << "'#'";
    QTest::newRow("open ipv6") << "redis://[::1"
                               << "']'";
    QTest::newRow("dot dot") << "/tmp/../etc"
                             << "'..'";
    QTest::newRow("password with percent") << "redis://u:secret%40x@h"
                                           << "TOLLGATE_REDIS_PASSWORD";
    QTest::newRow("password with slash") << "redis://u:sec/ret@h"
                                         << "TOLLGATE_REDIS_PASSWORD";
    QTest::newRow("password with question mark") << "redis://u:sec?ret@h"
                                                 << "TOLLGATE_REDIS_PASSWORD";
    QTest::newRow("password with hash") << "redis://u:sec#ret@h"
                                        << "TOLLGATE_REDIS_PASSWORD";
    QTest::newRow("leading space") << " redis://h"
                                   << "white space";
    QTest::newRow("trailing space") << "/tmp/home "
                                    << "white space";
    QTest::newRow("url inside") << "x/redis://h"
                                << "'://' inside";
    QTest::newRow("host and port") << "localhost:6379"
                                   << "HOST:PORT";
    QTest::newRow("address and port") << "10.0.0.5:6380"
                                      << "HOST:PORT";
    QTest::newRow("brackets without ipv6") << "redis://[beef]"
                                           << "IPv6";
    QTest::newRow("negative db") << "redis://h/-0"
                                 << "database number";
    QTest::newRow("plus port") << "redis://h:+1"
                               << "port";
    QTest::newRow("prefix twice") << "redis://h?prefix=a&prefix=b"
                                  << "twice";
}

void TestHomeSpec::refused()
{
    QFETCH(QString, text);
    QFETCH(QString, says);
    auto spec = HomeSpec::parse(text.toStdString());
    QVERIFY2(!spec.ok(), text.toUtf8().constData());
    const QString message = QString::fromStdString(spec.error().describe());
    QVERIFY2(message.contains(says), message.toUtf8().constData());
    QVERIFY2(!message.contains(QStringLiteral("secret")) && !message.contains(QStringLiteral("ret@")),
        "a refusal repeated the password");
}

void TestHomeSpec::resolveOrder()
{
    qputenv("TOLLGATE_HOME", "redis://from-env");
    qputenv("XDG_STATE_HOME", "/xdg");
    auto explicitWins = HomeSpec::resolve(std::string("/explicit"));
    QVERIFY(explicitWins.ok());
    QCOMPARE(QString::fromStdString(explicitWins->text()), QStringLiteral("/explicit"));
    auto env = HomeSpec::resolve(std::nullopt);
    QVERIFY(env.ok());
    QCOMPARE(env->kind(), HomeSpec::Kind::Redis);
    QCOMPARE(QString::fromStdString(env->redis().host), QStringLiteral("from-env"));
    qunsetenv("TOLLGATE_HOME");
    auto xdg = HomeSpec::resolve(std::nullopt);
    QVERIFY(xdg.ok());
    QCOMPARE(QString::fromStdString(xdg->dir()), QStringLiteral("/xdg/tollgate"));
    qunsetenv("XDG_STATE_HOME");
    qputenv("HOME", "/home/u");
    auto home = HomeSpec::resolve(std::nullopt);
    QVERIFY(home.ok());
    QCOMPARE(QString::fromStdString(home->dir()), QStringLiteral("/home/u/.local/state/tollgate"));
}

void TestHomeSpec::masksAnyUserinfo_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("shown");
    QTest::newRow("redis") << "redis://u:pw@h"
                           << "redis://u:***@h";
    QTest::newRow("rediss") << "rediss://u:pw@h:6380"
                            << "rediss://u:***@h:6380";
    QTest::newRow("http") << "http://u:pw@h/x"
                          << "http://u:***@h/x";
    QTest::newRow("unix") << "unix://u:pw@/run/r.sock"
                          << "unix://u:***@/run/r.sock";
    QTest::newRow("leading space") << "  redis://u:pw@h"
                                   << "  redis://u:***@h";
    QTest::newRow("one slash") << "redis:/u:pw@h"
                               << "redis:/u:***@h";
    QTest::newRow("three slashes") << "redis:///u:pw@h"
                                   << "redis:///u:***@h";
    QTest::newRow("no slash") << "redis:u:pw@h"
                              << "redis:***@h";
    QTest::newRow("no scheme") << "u:pw@h:6379"
                               << "u:***@h:6379";
    QTest::newRow("no user") << "redis://:pw@h"
                             << "redis://:***@h";
    QTest::newRow("empty password") << "redis://u:@h"
                                    << "redis://u:***@h";
    QTest::newRow("@ / ? # % in the password") << "redis://u:a@b/c?d#e%f@h"
                                               << "redis://u:***@h";
    QTest::newRow("upper case") << "REDISS://u:pw@h"
                                << "REDISS://u:***@h";
    QTest::newRow("a user alone") << "redis://u@h"
                                  << "redis://u@h";
    QTest::newRow("no userinfo") << "redis://h:6379/0"
                                 << "redis://h:6379/0";
    QTest::newRow("a path") << "/data/a:b@c"
                            << "/data/a:b@c";
    QTest::newRow("a url's path") << "http://h/a:b@c"
                                  << "http://h/a:b@c";
    QTest::newRow("a url inside") << "x/redis://u:pw@h"
                                  << "x/redis://u:***@h";
    // A scheme that lost its ':' or itself: after "//", a user:password@ is a URL's.
    QTest::newRow("scheme without ':'") << "redis//u:pw@h"
                                        << "redis//u:***@h";
    QTest::newRow("scheme with ';'") << "redis;//u:pw@h"
                                     << "redis;//u:***@h";
    QTest::newRow("no scheme, slashes") << "//u:pw@h"
                                        << "//u:***@h";
    QTest::newRow("a path with '//'") << "/data//a/b:c@d"
                                      << "/data//a/b:c@d";
    QTest::newRow("empty") << ""
                           << "";
}

void TestHomeSpec::masksAnyUserinfo()
{
    QFETCH(QString, text);
    QFETCH(QString, shown);
    QCOMPARE(QString::fromStdString(SecretMask::userinfo(text.toStdString())), shown);
    QCOMPARE(SecretMask::holdsPassword(text.toStdString()), text != shown);
}

void TestHomeSpec::everyShapeOfPasswordIsRefusedMasked_data()
{
    QTest::addColumn<QString>("text");
    QTest::newRow("redis") << "redis://u:hunter2@h";
    QTest::newRow("rediss") << "rediss://u:hunter2@h";
    QTest::newRow("http") << "http://u:hunter2@h";
    QTest::newRow("unix") << "unix://u:hunter2@/run/r.sock";
    QTest::newRow("leading space") << " redis://u:hunter2@h";
    QTest::newRow("trailing space") << "redis://u:hunter2@h ";
    QTest::newRow("one slash") << "redis:/u:hunter2@h";
    QTest::newRow("no slash") << "redis:u:hunter2@h";
    QTest::newRow("no scheme") << "u:hunter2@h:6379";
    QTest::newRow("url inside a path") << "x/redis://u:hunter2@h";
    QTest::newRow("scheme without ':'") << "redis//u:hunter2@h";
    QTest::newRow("scheme with ';'") << "redis;//u:hunter2@h";
    QTest::newRow("no scheme, slashes") << "//u:hunter2@h";
    QTest::newRow("after a NUL") << QStringLiteral("redis://u:hunter2@h") + QChar(0) + QStringLiteral("x");
    // Typed where no password goes: refused as an unknown option or a '#' part, the URL quoted.
    QTest::newRow("query option") << "redis://127.0.0.1:6379?password=hunter2";
    QTest::newRow("after the prefix") << "redis://h?prefix=team&auth=hunter2";
    QTest::newRow("fragment") << "redis://h#hunter2";
    QTest::newRow("rediss query") << "rediss://h:6380/0?token=hunter2#x";
}

void TestHomeSpec::everyShapeOfPasswordIsRefusedMasked()
{
    // Refused, and neither the path nor the message of the error (what --json prints as
    // "path" and "error") repeats it.
    QFETCH(QString, text);
    const std::string raw = text.toUtf8().toStdString();
    auto spec = HomeSpec::parse(raw);
    QVERIFY2(!spec.ok(), raw.c_str());
    const std::string all = spec.error().path + "\n" + spec.error().message;
    QVERIFY2(all.find("hunter2") == std::string::npos, all.c_str());
    QVERIFY2(all.find("***") != std::string::npos, all.c_str());
    qputenv("TOLLGATE_HOME", QByteArray::fromStdString(raw.substr(0, raw.find('\0'))));
    auto resolved = HomeSpec::resolve(std::nullopt);
    qunsetenv("TOLLGATE_HOME");
    QVERIFY(!resolved.ok());
    QVERIFY(resolved.error().describe().find("hunter2") == std::string::npos);
}

QTEST_APPLESS_MAIN(TestHomeSpec)
#include "tst_homespec.moc"
