// The dashboard judges holders and lock files with the core's rules, not copies of them: a
// slot held from another pid namespace, a forged lock timestamp.

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "lock/lockinfo.h"
#include "quotaactions.h"
#include "quotaobserver.h"
#include "store/filequotastore.h"
#include "testsupport.h"

#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using namespace tollgate;
using namespace tollgate::ui;

class TestDashboardCore final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void slotOfAnotherNamespaceIsAliveWhileItsLeaseRuns();
    void forgedLockTimestampGivesASaneSince();

private:
    QString home() const { return m_dir->path() + QStringLiteral("/home"); }
    std::int64_t nowMs() const
    {
        return std::chrono::duration_cast<std::chrono::milliseconds>(m_clock.now().time_since_epoch())
            .count();
    }

    std::unique_ptr<QTemporaryDir> m_dir;
    SystemClock m_clock;
    ProcessProbe m_probe;
};

void TestDashboardCore::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
}

// Its pid is a number of another namespace: here it may name nobody (or someone else). The
// holder is alive while its lease runs, so a forced release asks first, as for a live holder.
void TestDashboardCore::slotOfAnotherNamespaceIsAliveWhileItsLeaseRuns()
{
    const qint64 pid = TestSupport::deadPid();
    {
        auto store = FileQuotaStore::open(home().toStdString(), m_clock);
        QVERIFY(store.ok());
        QuotaLimiter limiter(**store, m_clock, m_probe);
        ProviderLimits l;
        l.parallel = 1;
        QVERIFY(limiter.setLimits("api", l, "test").ok());
        const std::int64_t now = nowMs();
        QVERIFY((*store)
                    ->transact([&](QuotaTransaction& tx) -> Result<void> {
                        Slot s;
                        s.fence = 7;
                        s.pid = pid;
                        s.pidNs = m_probe.pidNamespace() + 1;
                        s.acquiredMs = now;
                        s.leaseUntilMs = now + 600000;
                        s.caller = "in a container";
                        tx.state.ensureProvider("api").slots.push_back(s);
                        tx.changed = true;
                        return {};
                    })
                    .ok());
    }
    const DashboardSnapshot s = QuotaObserver::readSnapshot(home(), {}, 3600, m_probe, m_clock);
    QCOMPARE(s.holders.size(), std::size_t(1));
    const HolderInfo h = s.holders.front();
    QCOMPARE(h.health, HolderHealth::Alive);
    QVERIFY(h.commandLine.isEmpty()); // not ours to probe

    QuotaObserver observer(home(), {});
    QSignalSpy done(&observer, &QuotaObserver::actionFinished);
    observer.actions()->releaseHolder(h, false);
    QCOMPARE(done.count(), 1);
    const auto r = done.last().at(0).value<ActionResult>();
    QVERIFY2(r.needsConfirmation, qPrintable(r.message));
    const DashboardSnapshot after = QuotaObserver::readSnapshot(home(), {}, 3600, m_probe, m_clock);
    QCOMPARE(after.holders.size(), std::size_t(1)); // still held
}

void TestDashboardCore::forgedLockTimestampGivesASaneSince()
{
    const QString locks = m_dir->path() + QStringLiteral("/locks");
    QVERIFY(QDir().mkpath(locks));
    QFile f(locks + QStringLiteral("/forged.lock"));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray::fromStdString(LockInfo { TestSupport::deadPid(), INT64_MAX, "forged" }.serialize()));
    f.close();
    const DashboardSnapshot s = QuotaObserver::readSnapshot(home(), { locks }, 3600, m_probe, m_clock);
    QCOMPARE(s.holders.size(), std::size_t(1));
    const qint64 since = s.holders.front().sinceMs;
    QVERIFY2(since > 0 && since <= nowMs(), qPrintable(QString::number(since)));
    QVERIFY(nowMs() - since < 3600 * 1000); // aged by the file's mtime: just written
}

QTEST_GUILESS_MAIN(TestDashboardCore)
#include "tst_dashboardcore.moc"
