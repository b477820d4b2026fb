// The provider view (issue 28): choosing a provider in the Provider box shows that provider
// in full — its tile, its row and limits, its callers and their chart with its own limit line,
// its 429s, its slots and its events — and "All providers" shows them all again, never a sum
// of their limits. A real home written by the core, read by the window's worker thread.

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "callerusagemodel.h"
#include "capacitymodel.h"
#include "dashboardcontroller.h"
#include "eventsfiltermodel.h"
#include "eventsmodel.h"
#include "holdersmodel.h"
#include "limitsmodel.h"
#include "lock/lockinfo.h"
#include "mainwindow.h"
#include "providersmodel.h"
#include "ratelimitcallersmodel.h"
#include "store/filequotastore.h"
#include "system/processprobe.h"
#include "usagechart.h"

#include <QAction>
#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QGroupBox>
#include <QLabel>
#include <QMenu>
#include <QSaveFile>
#include <QTemporaryDir>
#include <QTest>
#include <memory>

using namespace tollgate;
using namespace tollgate::ui;

class TestProviderView final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void cleanup();
    void oneProviderInFullAndBackToAll();
    void aProviderThatGoesTakesTheViewBackToAll();
    void aLockRewrittenInPlaceUnderTheProviderView();

private:
    void makeHome();
    [[nodiscard]] DashboardOptions options() const;

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
    SystemClock m_clock;
    ProcessProbe m_probe;
    std::unique_ptr<FileQuotaStore> m_store;
    std::unique_ptr<QuotaLimiter> m_limiter;
};

namespace {

constexpr int TIMEOUT_MS = 10000;

QStringList columnValues(const QAbstractItemModel* m, int column)
{
    QStringList out;
    for (int r = 0; r < m->rowCount(); ++r)
        out.append(m->index(r, column).data().toString());
    out.sort();
    return out;
}

} // namespace

#define OPEN_WINDOW(w)                                                                                       \
    MainWindow w(options());                                                                                 \
    w.show();                                                                                                \
    QVERIFY(QTest::qWaitForWindowExposed(&w));                                                               \
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS)

void TestProviderView::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->path() + QStringLiteral("/home");
}

void TestProviderView::cleanup()
{
    m_limiter.reset();
    m_store.reset();
}

DashboardOptions TestProviderView::options() const
{
    return DashboardOptions { m_home, {}, m_dir->path() + QStringLiteral("/dashboard.ini") };
}

void TestProviderView::makeHome()
{
    auto store = FileQuotaStore::open(m_home.toStdString(), m_clock);
    QVERIFY(store);
    m_store = std::move(store).value();
    m_limiter = std::make_unique<QuotaLimiter>(*m_store, m_clock, m_probe);
    ProviderLimits alpha;
    alpha.requests = 40;
    alpha.parallel = 3;
    QVERIFY(m_limiter->setLimits("alpha", alpha, "test"));
    ProviderLimits beta;
    beta.requests = 100;
    beta.models["large"] = ModelLimits { 10, std::nullopt, 60000 };
    QVERIFY(m_limiter->setLimits("beta", beta, "test"));
    const std::pair<const char*, const char*> calls[]
        = { { "alpha", "indexer" }, { "alpha", "indexer" }, { "alpha", "chat" }, { "beta", "nightly" } };
    for (const auto& [provider, caller] : calls) {
        AdmitRequest r;
        r.provider = provider;
        r.caller = caller;
        QVERIFY(m_limiter->acquire(r, m_clock.now()));
    }
    // A slot of alpha's, held by this process.
    AdmitRequest slot;
    slot.provider = "alpha";
    slot.caller = "holder";
    slot.wantsSlot = true;
    slot.pid = ProcessProbe::selfPid();
    auto permit = m_limiter->acquire(slot, m_clock.now());
    QVERIFY(permit);
    permit->detach();
    QVERIFY(m_limiter->report429("alpha", "chat", std::nullopt));
    QVERIFY(m_limiter->report429("beta", "nightly", std::nullopt));
}

void TestProviderView::oneProviderInFullAndBackToAll()
{
    makeHome();
    OPEN_WINDOW(w);
    DashboardController* c = w.controller();
    auto* box = w.findChild<QComboBox*>(QStringLiteral("providerScope"));
    QVERIFY(box);
    QTRY_COMPARE_WITH_TIMEOUT(box->count(), 3, TIMEOUT_MS);
    QCOMPARE(box->itemText(0), QStringLiteral("All providers"));
    // Reached by Alt+O: its label's mnemonic.
    bool labelled = false;
    for (const QLabel* l : w.findChildren<QLabel*>())
        labelled = labelled || (l->buddy() == box && l->text().contains(QStringLiteral("&o")));
    QVERIFY(labelled);
    QCOMPARE(box->itemData(1).toString(), QStringLiteral("alpha"));
    QCOMPARE(box->itemData(2).toString(), QStringLiteral("beta"));
    QTRY_COMPARE_WITH_TIMEOUT(c->providers()->rowCount(), 2, TIMEOUT_MS);
    QTRY_COMPARE_WITH_TIMEOUT(c->callerUsage()->rowCount(), 4, TIMEOUT_MS);
    // All providers: what is shown is the snapshot itself, not a copy of it per snapshot.
    QCOMPARE(&c->shownSnapshot(), &c->snapshot());
    auto* usage = w.findChild<UsageChart*>(QStringLiteral("usageChart"));
    QCOMPARE(usage->limitLineValue(), 0.0); // two providers: no line (never their sum)

    // Beta, as a user picks it from the box.
    box->setCurrentIndex(2);
    Q_EMIT box->activated(2);
    QCOMPARE(c->providerScope(), QStringLiteral("beta"));
    QVERIFY(&c->shownSnapshot() != &c->snapshot());
    QCOMPARE(c->shownSnapshot().state.providers.size(), std::size_t(1));
    QCOMPARE(columnValues(c->providers(), ProvidersModel::Provider), QStringList { QStringLiteral("beta") });
    // Its limits: the provider and its class, nothing of alpha's.
    QCOMPARE(columnValues(c->limits(), LimitsModel::Provider),
        QStringList({ QStringLiteral("beta"), QStringLiteral("beta") }));
    auto* capacity = w.findChild<QObject*>(QStringLiteral("capacityPanel"));
    QVERIFY(capacity);
    QTRY_COMPARE(capacity->findChildren<QFrame*>(QStringLiteral("capacityTile")).size(), 1);
    QCOMPARE(
        columnValues(c->callerUsage(), CallerUsageModel::Caller), QStringList { QStringLiteral("nightly") });
    QCOMPARE(columnValues(c->rateLimitCallers(), RateLimitCallersModel::Caller),
        QStringList { QStringLiteral("nightly") });
    QCOMPARE(c->holders()->rowCount(), 0); // alpha's slot is not beta's
    QVERIFY(
        w.findChild<QGroupBox*>(QStringLiteral("holdersPanel"))->title().contains(QStringLiteral("beta")));
    // Its own limit line: 100 per 60 s.
    QTRY_VERIFY_WITH_TIMEOUT(usage->limitLineValue() > 0, TIMEOUT_MS);
    const double betaLine = usage->limitLineValue();
    // The event log: only beta's.
    QTRY_VERIFY_WITH_TIMEOUT(c->filteredEvents()->rowCount() > 0, TIMEOUT_MS);
    for (int r = 0; r < c->filteredEvents()->rowCount(); ++r) {
        const QString p = c->filteredEvents()->index(r, EventsModel::Provider).data().toString();
        QVERIFY2(p == QStringLiteral("beta") || p.isEmpty(), qPrintable(p));
    }

    // Alpha from a tile's menu path: its slot, its callers, a different line.
    w.showProvider(QStringLiteral("alpha"));
    QCOMPARE(box->currentData().toString(), QStringLiteral("alpha"));
    QCOMPARE(columnValues(c->callerUsage(), CallerUsageModel::Caller),
        QStringList({ QStringLiteral("chat"), QStringLiteral("holder"), QStringLiteral("indexer") }));
    QCOMPARE(c->holders()->rowCount(), 1);
    QTRY_VERIFY_WITH_TIMEOUT(usage->limitLineValue() > 0 && usage->limitLineValue() != betaLine, TIMEOUT_MS);
    // Its menu offers to show all again.
    auto menu = w.providerMenu(QStringLiteral("alpha"));
    QVERIFY(menu->findChild<QAction*>(QStringLiteral("showAllProviders")));

    // All again: both providers, all callers, no line.
    box->setCurrentIndex(0);
    Q_EMIT box->activated(0);
    QCOMPARE(c->providerScope(), QString());
    QCOMPARE(&c->shownSnapshot(), &c->snapshot());
    QCOMPARE(c->providers()->rowCount(), 2);
    QCOMPARE(c->callerUsage()->rowCount(), 4);
    QTRY_COMPARE_WITH_TIMEOUT(usage->limitLineValue(), 0.0, TIMEOUT_MS);
    QTRY_COMPARE(capacity->findChildren<QFrame*>(QStringLiteral("capacityTile")).size(), 2);
    QVERIFY(w.providerMenu(QStringLiteral("alpha"))->findChild<QAction*>(QStringLiteral("showOnlyProvider")));
}

void TestProviderView::aProviderThatGoesTakesTheViewBackToAll()
{
    makeHome();
    OPEN_WINDOW(w);
    DashboardController* c = w.controller();
    QTRY_COMPARE_WITH_TIMEOUT(c->providers()->rowCount(), 2, TIMEOUT_MS);
    // A provider the home no longer has (its limits and state gone while it was shown): the
    // next snapshot takes the view back to every provider, rather than an empty window.
    w.showProvider(QStringLiteral("gone"));
    QCOMPARE(c->providerScope(), QString());
    QTRY_COMPARE_WITH_TIMEOUT(c->providers()->rowCount(), 2, TIMEOUT_MS);
    auto* box = w.findChild<QComboBox*>(QStringLiteral("providerScope"));
    QCOMPARE(box->count(), 3);
    QCOMPARE(box->currentIndex(), 0);
}

// A lock file rewritten in place travels as a patch of its row (not a whole snapshot). In the
// provider view, which shows no lock files, the row must still reach the whole list kept for
// Clean stale, and the view must keep showing only the provider's slots.
void TestProviderView::aLockRewrittenInPlaceUnderTheProviderView()
{
    makeHome();
    const QString locks = m_dir->path() + QStringLiteral("/locks");
    QVERIFY(QDir().mkpath(locks));
    auto writeLock = [&locks](const char* tag) {
        QSaveFile f(locks + QStringLiteral("/job.lock"));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray::fromStdString(
            LockInfo { ProcessProbe::selfPid(), QDateTime::currentSecsSinceEpoch(), tag }.serialize()));
        QVERIFY(f.commit());
    };
    writeLock("first");
    DashboardOptions o = options();
    o.lockDirs = QStringList { locks };
    MainWindow w(o);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS);
    DashboardController* c = w.controller();
    auto whoOfLock = [c] {
        for (const HolderInfo& h : c->snapshot().holders) {
            if (h.kind == HolderKind::LockFile)
                return h.who;
        }
        return QString();
    };
    QTRY_COMPARE_WITH_TIMEOUT(whoOfLock(), QStringLiteral("first"), TIMEOUT_MS);
    QTRY_COMPARE_WITH_TIMEOUT(c->holders()->rowCount(), 2, TIMEOUT_MS); // alpha's slot and the lock
    w.showProvider(QStringLiteral("alpha"));
    QCOMPARE(c->holders()->rowCount(), 1);
    writeLock("second");
    QTRY_COMPARE_WITH_TIMEOUT(whoOfLock(), QStringLiteral("second"), TIMEOUT_MS);
    QCOMPARE(c->holders()->rowCount(), 1);
    QCOMPARE(c->holders()->index(0, HoldersModel::Kind).data().toString(), QStringLiteral("slot"));
    // And back to all: the lock's row as it is now.
    w.showProvider(QString());
    QTRY_COMPARE_WITH_TIMEOUT(c->holders()->rowCount(), 2, TIMEOUT_MS);
    bool seen = false;
    for (int r = 0; r < c->holders()->rowCount(); ++r)
        seen
            = seen || c->holders()->index(r, HoldersModel::Who).data().toString() == QStringLiteral("second");
    QVERIFY(seen);
}

QTEST_MAIN(TestProviderView)
#include "tst_providerview.moc"
