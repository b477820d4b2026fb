#pragma once

// LimitsHomeTest: what the dashboard's limits tests share (tst_dashboardlimits,
// tst_dashboardlearning): a file home made through core with provider "api"'s limits, its
// limits.json read back (to show what an edit wrote and that nothing else moved), a model
// tester per controller, and START_CONTROLLER. A test class derives from it and calls newHome()
// from init() and dropHome() from cleanup().

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "store/filequotastore.h"
#include "system/processprobe.h"

#include <QAbstractItemModelTester>
#include <QCryptographicHash>
#include <QFile>
#include <QObject>
#include <QTemporaryDir>
#include <QTest>
#include <memory>

namespace tollgate::ui {

inline constexpr int TIMEOUT_MS = 15000;

// QAbstractItemModelTester checks every change a model announces, for as long as it lives.
struct Tester
{
    explicit Tester(QAbstractItemModel* m)
        : tester(m, QAbstractItemModelTester::FailureReportingMode::QtTest)
    {
    }
    QAbstractItemModelTester tester;
};

class LimitsHomeTest : public QObject
{
protected:
    void newHome()
    {
        m_dir = std::make_unique<QTemporaryDir>();
        QVERIFY(m_dir->isValid());
        m_home = m_dir->path() + QStringLiteral("/home");
    }
    void dropHome()
    {
        m_limiter.reset();
        m_store.reset();
    }
    void makeHome(const ProviderLimits& limits)
    {
        auto store = FileQuotaStore::open(m_home.toStdString(), m_clock);
        QVERIFY(store);
        m_store = std::move(store).value();
        m_limiter = std::make_unique<QuotaLimiter>(*m_store, m_clock, m_probe);
        QVERIFY(m_limiter->setLimits("api", limits, "test"));
    }
    // "api" as limits.json holds it now.
    [[nodiscard]] ProviderLimits written() const
    {
        auto parsed = QuotaLimits::fromJson(limitsFile().toStdString());
        if (!parsed || !parsed->find("api"))
            return {};
        return *parsed->find("api");
    }
    [[nodiscard]] QByteArray limitsDigest() const
    {
        return QCryptographicHash::hash(limitsFile(), QCryptographicHash::Sha256);
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
    SystemClock m_clock;
    ProcessProbe m_probe;
    std::unique_ptr<FileQuotaStore> m_store;
    std::unique_ptr<QuotaLimiter> m_limiter;

private:
    [[nodiscard]] QByteArray limitsFile() const
    {
        QFile f(m_home + QStringLiteral("/limits.json"));
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    }
};

} // namespace tollgate::ui

// A controller on the home, loaded, its limits model checked by a Tester.
#define START_CONTROLLER(c)                                                                                  \
    auto c = std::make_unique<DashboardController>(m_home, QStringList {});                                  \
    Tester c##Tester(c->limits());                                                                           \
    c->start();                                                                                              \
    QTRY_VERIFY_WITH_TIMEOUT(c->loaded(), TIMEOUT_MS);                                                       \
    QTRY_VERIFY_WITH_TIMEOUT(c->limits()->rowCount() > 0, TIMEOUT_MS)
