// The window must never act on the wrong thing: selections follow the item (by key) across
// refreshes and clear when it goes; a confirmation whose target changed in between does
// nothing and says so; a drastic limit edit asks first and can be undone; every action is
// reported in the window and recorded in the history (lock file actions too); and the event
// log keeps following new rows after a resize. Real homes, real lock files, and real holder
// processes (`tollgate lock run ... -- sleep`) where liveness matters.

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "capacitymodel.h"
#include "dashboardcontroller.h"
#include "eventsmodel.h"
#include "history/historyreader.h"
#include "holdersmodel.h"
#include "keyedtableview.h"
#include "lock/lockinfo.h"
#include "mainwindow.h"
#include "providersmodel.h"
#include "store/filequotastore.h"
#include "testsupport.h"

#include <QAction>
#include <QDir>
#include <QFile>
#include <QFrame>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenu>
#include <QProcess>
#include <QPushButton>
#include <QScrollBar>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTest>

using namespace tollgate;
using namespace tollgate::ui;

class TestDashboardSafety final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void cleanup();
    void selectionFollowsTheItem();
    void providerSelectionFollowsTheItem();
    void confirmationRefusesAChangedLock();
    void lockActionsAreRecorded();
    void emptyLimitCellAsksFirst();
    void undoRestoresTheLastLimitChange();
    void pauseWithoutReason();
    void eventsFollowAfterResize();
    void contextMenusOfferWhatApplies();
    void aDeadHoldersSlotIsFreeAsStatusSays();
    void cleanStaleCountsAsksAndTakesOnlyWhatIsStale();
    void aCorruptLockFileIsRemovedOnlyAfterAsking();

private:
    void makeHome();
    [[nodiscard]] DashboardOptions options() const;
    [[nodiscard]] std::vector<HistoryEvent> history() const;
    // `tollgate lock run PATH --tag TAG -- sleep 600`: a live holder; returns the recorded
    // holder's pid (the command's keeper, a child of that tollgate) once the lock file names it.
    qint64 startHolder(const QString& path, const QString& tag);
    [[nodiscard]] static qint64 lockPid(const QString& path);

    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_home;
    QString m_locks;
    SystemClock m_clock;
    ProcessProbe m_probe;
    std::unique_ptr<FileQuotaStore> m_store;
    std::unique_ptr<QuotaLimiter> m_limiter;
    std::vector<std::unique_ptr<QProcess>> m_holders;
};

namespace {

constexpr int TIMEOUT_MS = 15000;

void writeLock(const QString& path, qint64 pid, qint64 timestamp, const QByteArray& tag)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("pid=" + QByteArray::number(pid) + "\ntimestamp=" + QByteArray::number(timestamp) + "\ntag=" + tag
        + "\n");
}

void writeCorruptLock(const QString& path)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("not a lock file\n");
}

// A confirmation that keeps the question in `asked` and answers `answer` (read when asked).
MainWindow::ConfirmHandler recordingConfirm(QString& asked, const bool& answer)
{
    return [&asked, &answer](const QString&, const QString& text) {
        asked = text;
        return answer;
    };
}

QString dashboard()
{
    return QStringLiteral("tollgate-dashboard (pid %1)").arg(ProcessProbe::selfPid());
}

ActionResult nextAction(QSignalSpy& spy)
{
    if (spy.isEmpty() && !spy.wait(TIMEOUT_MS)) {
        ActionResult timedOut;
        timedOut.action = QStringLiteral("timeout");
        timedOut.message = QStringLiteral("no action result");
        return timedOut;
    }
    return spy.takeFirst().at(0).value<ActionResult>();
}

QStringList menuTexts(QMenu* menu)
{
    QStringList out;
    for (QAction* a : menu->actions())
        out.append(QString(a->text()).remove(QLatin1Char('&'))); // without the mnemonics
    return out;
}

} // namespace

#define OPEN_WINDOW(w)                                                                                       \
    MainWindow w(options());                                                                                 \
    w.show();                                                                                                \
    QVERIFY(QTest::qWaitForWindowExposed(&w));                                                               \
    QTRY_VERIFY_WITH_TIMEOUT(w.isLoaded(), TIMEOUT_MS)

void TestDashboardSafety::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_home = m_dir->path() + QStringLiteral("/home");
    m_locks = m_dir->path() + QStringLiteral("/locks");
    QVERIFY(QDir().mkpath(m_locks));
}

void TestDashboardSafety::cleanup()
{
    for (auto& p : m_holders) {
        p->terminate(); // forwarded to the sleep; tollgate then exits
        if (!p->waitForFinished(10000)) {
            p->kill();
            p->waitForFinished(10000);
        }
    }
    m_holders.clear();
    m_limiter.reset();
    m_store.reset();
}

DashboardOptions TestDashboardSafety::options() const
{
    return DashboardOptions { m_home, { m_locks }, m_dir->path() + QStringLiteral("/dashboard.ini") };
}

void TestDashboardSafety::makeHome()
{
    auto store = FileQuotaStore::open(m_home.toStdString(), m_clock);
    QVERIFY(store);
    m_store = std::move(store).value();
    m_limiter = std::make_unique<QuotaLimiter>(*m_store, m_clock, m_probe);
    ProviderLimits l;
    l.requests = 60;
    l.parallel = 4;
    QVERIFY(m_limiter->setLimits("api", l, "test"));
}

std::vector<HistoryEvent> TestDashboardSafety::history() const
{
    HistoryReader reader(m_home.toStdString());
    auto batch = reader.poll();
    return batch ? batch->events : std::vector<HistoryEvent> {};
}

qint64 TestDashboardSafety::lockPid(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return 0;
    auto info = LockInfo::parse(f.readAll().toStdString());
    return info ? info->pid : 0;
}

qint64 TestDashboardSafety::startHolder(const QString& path, const QString& tag)
{
    auto p = std::make_unique<QProcess>();
    p->setProcessChannelMode(QProcess::ForwardedErrorChannel);
    p->start(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("lock"), QStringLiteral("run"), path, QStringLiteral("--tag"), tag,
            QStringLiteral("--timeout"), QStringLiteral("10"), QStringLiteral("--"), QStringLiteral("sleep"),
            QStringLiteral("600") });
    if (!p->waitForStarted(TIMEOUT_MS))
        return 0;
    const qint64 pid = p->processId();
    m_holders.push_back(std::move(p));
    // The lock names the command's keeper, a child of that tollgate (ChildRunner): the holder
    // the dashboard shows.
    QElapsedTimer t;
    t.start();
    while (!(lockPid(path) > 0 && TestSupport::parentPid(lockPid(path)) == pid) && t.elapsed() < TIMEOUT_MS)
        QTest::qWait(20);
    const qint64 holder = lockPid(path);
    return holder > 0 && TestSupport::parentPid(holder) == pid ? holder : 0;
}

// Rows appear before and vanish before the selected one (the holders view is sorted): the
// selection stays on the same lock file; when that file goes, nothing is selected and the
// release action is off — it never moves to a neighbour.
void TestDashboardSafety::selectionFollowsTheItem()
{
    const qint64 now = m_clock.unixSeconds();
    const qint64 self = ProcessProbe::selfPid();
    // Sorted by age, oldest first: old.lock, deploy.lock, then the newer ones.
    writeLock(m_locks + QStringLiteral("/old.lock"), self, now - 500, "old");
    writeLock(m_locks + QStringLiteral("/deploy.lock"), self, now - 300, "deploy");
    writeLock(m_locks + QStringLiteral("/cron-cleanup.lock"), self, now - 100, "cron");
    OPEN_WINDOW(w);
    auto* view = w.findChild<KeyedTableView*>(QStringLiteral("holdersView"));
    QVERIFY(view);
    QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 3, TIMEOUT_MS);
    const QString deploy = QStringLiteral("lock:") + m_locks + QStringLiteral("/deploy.lock");
    w.selectHolder(deploy);
    QCOMPARE(w.selectedHolder(), deploy);
    auto* release = w.findChild<QAction*>(QStringLiteral("actionRelease"));
    QVERIFY(release->isEnabled());
    auto selectedRowKey = [view] {
        const QModelIndexList rows = view->selectionModel()->selectedRows();
        return rows.size() == 1 ? rows.first().data(KeyedTableModel::KeyRole).toString() : QString();
    };
    const int before = view->currentIndex().row();

    // A row sorted before it appears, one before it goes: still deploy.lock.
    writeLock(m_locks + QStringLiteral("/older.lock"), self, now - 900, "older");
    QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 4, TIMEOUT_MS);
    QVERIFY(view->currentIndex().row() != before); // it did move down
    QCOMPARE(w.selectedHolder(), deploy);
    QCOMPARE(selectedRowKey(), deploy);
    QVERIFY(QFile::remove(m_locks + QStringLiteral("/old.lock")));
    QVERIFY(QFile::remove(m_locks + QStringLiteral("/older.lock")));
    QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 2, TIMEOUT_MS);
    QCOMPARE(w.selectedHolder(), deploy);
    QCOMPARE(selectedRowKey(), deploy);

    // The selected lock goes: nothing is selected, and Force release has nothing to act on.
    QVERIFY(QFile::remove(m_locks + QStringLiteral("/deploy.lock")));
    QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 1, TIMEOUT_MS);
    QCOMPARE(w.selectedHolder(), QString());
    QCOMPARE(selectedRowKey(), QString());
    QVERIFY(!view->currentIndex().isValid());
    QVERIFY(!release->isEnabled());
    QVERIFY(!w.findChild<QPushButton*>(QStringLiteral("releaseButton"))->isEnabled());
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);
    w.releaseSelected(); // even if called: nothing reaches the worker
    QTest::qWait(200);
    QVERIFY(actions.isEmpty());
    QVERIFY(QFile::exists(m_locks + QStringLiteral("/cron-cleanup.lock")));
}

void TestDashboardSafety::providerSelectionFollowsTheItem()
{
    makeHome();
    OPEN_WINDOW(w);
    auto* view = w.findChild<KeyedTableView*>(QStringLiteral("providersView"));
    QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 1, TIMEOUT_MS);
    ProviderLimits l;
    l.requests = 5;
    QVERIFY(m_limiter->setLimits("beta", l, "test"));
    QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 2, TIMEOUT_MS);
    w.selectProvider(QStringLiteral("beta"));
    QVERIFY(m_limiter->removeLimits("api", "test")); // the row before it goes
    QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 1, TIMEOUT_MS);
    QCOMPARE(w.selectedProvider(), QStringLiteral("beta"));
    QVERIFY(m_limiter->setLimits("api", l, "test"));
    QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 2, TIMEOUT_MS);
    QCOMPARE(w.selectedProvider(), QStringLiteral("beta"));
    QVERIFY(m_limiter->removeLimits("beta", "test"));
    QTRY_COMPARE_WITH_TIMEOUT(view->model()->rowCount(), 1, TIMEOUT_MS);
    QCOMPARE(w.selectedProvider(), QString());
    QVERIFY(!view->selectionModel()->hasSelection());
    QVERIFY(!w.findChild<QAction*>(QStringLiteral("actionResetBackoff"))->isEnabled());
}

// Force release of a live holder asks; while the dialog is open another process releases the
// lock and a third takes it. Confirming then does nothing and says so.
void TestDashboardSafety::confirmationRefusesAChangedLock()
{
    makeHome();
    const QString path = m_locks + QStringLiteral("/deploy.lock");
    const qint64 first = startHolder(path, QStringLiteral("first deploy"));
    QVERIFY(first);
    OPEN_WINDOW(w);
    const QString key = QStringLiteral("lock:") + path;
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->holders()->holder(key)
            && w.controller()->holders()->holder(key)->health == HolderHealth::Alive,
        TIMEOUT_MS);
    w.selectHolder(key);
    qint64 second = 0;
    QString asked;
    w.setConfirmHandler([&](const QString&, const QString& text) {
        asked = text;
        QProcess release;
        release.start(QStringLiteral(TOLLGATE_CLI_PATH),
            { QStringLiteral("lock"), QStringLiteral("release"), path, QStringLiteral("--force") });
        if (!release.waitForFinished(TIMEOUT_MS) || release.exitCode() != 0)
            return false;
        second = startHolder(path, QStringLiteral("second deploy"));
        return true;
    });
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);
    w.findChild<QAction*>(QStringLiteral("actionRelease"))->trigger();
    ActionResult r = nextAction(actions);
    QVERIFY(r.needsConfirmation); // the question about the first holder
    r = nextAction(actions);
    QVERIFY2(second, "the second holder did not take the lock");
    QVERIFY2(!r.ok, qPrintable(r.message));
    QVERIFY2(
        r.message.contains(QStringLiteral("deploy.lock changed since you looked")), qPrintable(r.message));
    QVERIFY2(r.message.contains(QStringLiteral("now held by pid %1").arg(second)), qPrintable(r.message));
    QVERIFY2(r.message.contains(QStringLiteral("nothing done")), qPrintable(r.message));
    QCOMPARE(lockPid(path), second);
    // The dialog named the first holder, its pid once.
    QCOMPARE(asked.count(QString::number(first)), 1);
    QVERIFY(asked.contains(QStringLiteral("sleep 600")) || asked.contains(QStringLiteral("tollgate")));
    QVERIFY(w.statusBar()->currentMessage().contains(QStringLiteral("changed since you looked")));
    const auto events = history();
    QVERIFY(std::none_of(events.begin(), events.end(),
        [](const HistoryEvent& e) { return e.type == EventType::LockRelease; }));
}

// Force release (of a live holder, confirmed) and Clean stale (of a dead holder's lock) are
// reported in the window and recorded in the history with the dashboard as actor.
void TestDashboardSafety::lockActionsAreRecorded()
{
    makeHome();
    const QString live = m_locks + QStringLiteral("/live.lock");
    const qint64 holder = startHolder(live, QStringLiteral("nightly deploy"));
    QVERIFY(holder);
    const qint64 dead = TestSupport::deadPid();
    const QString stale = m_locks + QStringLiteral("/crashed.lock");
    writeLock(stale, dead, m_clock.unixSeconds() - 7200, "crashed job"); // past the stale age
    OPEN_WINDOW(w);
    QTRY_COMPARE_WITH_TIMEOUT(w.controller()->holders()->rowCount(), 2, TIMEOUT_MS);
    w.setConfirmHandler([](const QString&, const QString&) { return true; });
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);

    w.selectHolder(QStringLiteral("lock:") + live);
    w.releaseSelected();
    ActionResult r = nextAction(actions); // the confirmation round trip
    if (r.needsConfirmation)
        r = nextAction(actions);
    QVERIFY2(r.ok, qPrintable(r.message));
    QVERIFY(!QFile::exists(live));
    QVERIFY2(w.statusBar()->currentMessage().contains(QStringLiteral("live.lock released")),
        qPrintable(w.statusBar()->currentMessage()));

    w.cleanStale();
    r = nextAction(actions);
    QVERIFY2(r.ok, qPrintable(r.message));
    QVERIFY(!QFile::exists(stale));
    QVERIFY2(r.message.contains(QStringLiteral("crashed.lock")), qPrintable(r.message));

    const auto events = history();
    auto find = [&events](const char* type) {
        auto it = std::find_if(
            events.begin(), events.end(), [type](const HistoryEvent& e) { return e.typeName() == type; });
        return it == events.end() ? nullptr : &*it;
    };
    const HistoryEvent* released = find("lock-release");
    QVERIFY(released);
    QCOMPARE(released->pid, holder);
    const QString reason = QString::fromStdString(released->reason);
    QVERIFY2(reason.contains(live) && reason.contains(QStringLiteral("nightly deploy"))
            && reason.contains(dashboard()) && reason.contains(QStringLiteral("alive")),
        qPrintable(reason));
    const HistoryEvent* cleaned = find("lock-clean");
    QVERIFY(cleaned);
    QCOMPARE(cleaned->pid, dead);
    const QString cleanReason = QString::fromStdString(cleaned->reason);
    QVERIFY2(cleanReason.contains(stale) && cleanReason.contains(QStringLiteral("crashed job"))
            && cleanReason.contains(dashboard()),
        qPrintable(cleanReason));
    // ... and the window's Events show them.
    auto shown = [&w](const QString& type) {
        const EventsModel* m = w.controller()->events();
        for (int i = 0; i < m->rowCount(); ++i) {
            if (m->index(i, EventsModel::Type).data().toString() == type)
                return true;
        }
        return false;
    };
    QTRY_VERIFY_WITH_TIMEOUT(
        shown(QStringLiteral("lock-release")) && shown(QStringLiteral("lock-clean")), TIMEOUT_MS);
}

// Ctrl+A, Backspace, Enter on a limit cell: the edit asks first (declined: nothing changes);
// a change by more than half asks too; a small one does not.
void TestDashboardSafety::emptyLimitCellAsksFirst()
{
    makeHome();
    OPEN_WINDOW(w);
    auto* model = w.controller()->providers();
    QTRY_COMPARE_WITH_TIMEOUT(model->rowCount(), 1, TIMEOUT_MS);
    QStringList asked;
    bool answer = false;
    w.setConfirmHandler([&](const QString&, const QString& text) {
        asked.append(text);
        return answer;
    });
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);
    model->setData(model->index(0, ProvidersModel::RequestLimit), QString());
    QCOMPARE(asked.size(), 1);
    QVERIFY2(asked.first().contains(QStringLiteral("requests per window: 60 → none (removes the limit)")),
        qPrintable(asked.first()));
    QSignalSpy refreshed(w.controller(), &DashboardController::refreshed);
    w.controller()->refreshNow();
    QVERIFY(refreshed.wait(TIMEOUT_MS));
    QVERIFY(actions.isEmpty());
    QCOMPARE(m_limiter->limits()->find("api")->requests, std::optional<std::int64_t>(60));
    QVERIFY(w.statusBar()->currentMessage().contains(QStringLiteral("not changed")));

    model->setData(model->index(0, ProvidersModel::RequestLimit), QStringLiteral("20")); // more than half
    QCOMPARE(asked.size(), 2);
    QVERIFY2(asked.last().contains(QStringLiteral("60 → 20")), qPrintable(asked.last()));
    model->setData(model->index(0, ProvidersModel::Parallel), QStringLiteral("9")); // 4 → 9: more than half
    QCOMPARE(asked.size(), 3);
    model->setData(
        model->index(0, ProvidersModel::RequestLimit), QStringLiteral("45")); // a quarter: no question
    QCOMPARE(asked.size(), 3);
    ActionResult r = nextAction(actions);
    QVERIFY2(r.ok, qPrintable(r.message));
    QCOMPARE(m_limiter->limits()->find("api")->requests, std::optional<std::int64_t>(45));
    QCOMPARE(m_limiter->limits()->find("api")->parallel, std::optional<std::int64_t>(4));

    // Confirmed: the limit goes, and the history says who did it.
    QTRY_COMPARE_WITH_TIMEOUT(
        model->limitsOf(QStringLiteral("api"))->requests, std::optional<std::int64_t>(45), TIMEOUT_MS);
    answer = true;
    model->setData(model->index(0, ProvidersModel::RequestLimit), QString());
    QCOMPARE(asked.size(), 4);
    r = nextAction(actions);
    QVERIFY2(r.ok, qPrintable(r.message));
    QCOMPARE(m_limiter->limits()->find("api")->requests, std::optional<std::int64_t>());
    const auto events = history();
    QVERIFY(std::any_of(events.begin(), events.end(), [](const HistoryEvent& e) {
        return e.type == EventType::Limits && e.reason.find("45 → none") != std::string::npos
            && e.reason.find("tollgate-dashboard") != std::string::npos;
    }));
}

void TestDashboardSafety::undoRestoresTheLastLimitChange()
{
    makeHome();
    OPEN_WINDOW(w);
    auto* model = w.controller()->providers();
    QTRY_COMPARE_WITH_TIMEOUT(model->rowCount(), 1, TIMEOUT_MS);
    auto* undo = w.findChild<QAction*>(QStringLiteral("actionUndoLimit"));
    QVERIFY(undo && !undo->isEnabled());
    QCOMPARE(undo->shortcut(), QKeySequence(QKeySequence::Undo));
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);
    QVERIFY(model->setData(model->index(0, ProvidersModel::RequestLimit), QStringLiteral("50")));
    QVERIFY(nextAction(actions).ok);
    QCOMPARE(m_limiter->limits()->find("api")->requests, std::optional<std::int64_t>(50));
    QVERIFY(undo->isEnabled());
    QVERIFY(w.findChild<QPushButton*>(QStringLiteral("undoButton"))->isVisible());
    QTRY_COMPARE_WITH_TIMEOUT(
        model->limitsOf(QStringLiteral("api"))->requests, std::optional<std::int64_t>(50), TIMEOUT_MS);

    w.findChild<QPushButton*>(QStringLiteral("undoButton"))->click();
    ActionResult r = nextAction(actions);
    QVERIFY2(r.ok, qPrintable(r.message));
    QCOMPARE(m_limiter->limits()->find("api")->requests, std::optional<std::int64_t>(60));

    // Someone else changes the limit after ours: Undo does not overwrite it.
    QTRY_COMPARE_WITH_TIMEOUT(
        model->limitsOf(QStringLiteral("api"))->requests, std::optional<std::int64_t>(60), TIMEOUT_MS);
    QVERIFY(model->setData(model->index(0, ProvidersModel::RequestLimit), QStringLiteral("55")));
    QVERIFY(nextAction(actions).ok);
    ProviderLimits other = *m_limiter->limits()->find("api");
    other.requests = 70;
    QVERIFY(m_limiter->setLimits("api", other, "another process"));
    undo->trigger();
    r = nextAction(actions);
    QVERIFY(!r.ok);
    QVERIFY2(r.message.contains(QStringLiteral("changed since you looked")), qPrintable(r.message));
    QCOMPARE(m_limiter->limits()->find("api")->requests, std::optional<std::int64_t>(70));
}

void TestDashboardSafety::pauseWithoutReason()
{
    makeHome();
    OPEN_WINDOW(w);
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);
    w.findChild<QAction*>(QStringLiteral("actionPauseAll"))->trigger();
    QVERIFY(nextAction(actions).ok);
    QCOMPARE(QString::fromStdString(m_limiter->snapshot()->state.pauseReason),
        QStringLiteral("by ") + dashboard());
    w.setPauseHandler([](const QStringList&, const QString&) -> std::optional<MainWindow::PauseChoice> {
        return MainWindow::PauseChoice { QStringLiteral("api"), QStringLiteral("   ") };
    });
    w.findChild<QAction*>(QStringLiteral("actionPause"))->trigger();
    QVERIFY(nextAction(actions).ok);
    QCOMPARE(QString::fromStdString(m_limiter->snapshot()->state.provider("api")->pauseReason),
        QStringLiteral("by ") + dashboard());
    int pauses = 0;
    for (const HistoryEvent& e : history()) {
        if (e.type != EventType::Pause)
            continue;
        ++pauses;
        QCOMPARE(QString::fromStdString(e.reason), QStringLiteral("by ") + dashboard());
    }
    QCOMPARE(pauses, 2);
    QVERIFY(w.statusBar()->currentMessage().contains(QStringLiteral("paused")));
}

void TestDashboardSafety::eventsFollowAfterResize()
{
    makeHome();
    auto addEvents = [this](int n) {
        for (int i = 0; i < n; ++i)
            QVERIFY(m_limiter->reportSuccess("api", "filler"));
    };
    addEvents(120);
    OPEN_WINDOW(w);
    w.resize(1400, 1000);
    auto* view = w.findChild<KeyedTableView*>(QStringLiteral("eventsView"));
    QScrollBar* bar = view->verticalScrollBar();
    QTRY_VERIFY_WITH_TIMEOUT(view->model()->rowCount() >= 120, TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(bar->maximum() > 0 && bar->value() == bar->maximum(), TIMEOUT_MS);

    // Smaller: more rows are hidden, the end moves; the view still shows the newest rows...
    w.resize(1400, 620);
    QTRY_VERIFY_WITH_TIMEOUT(bar->value() == bar->maximum(), TIMEOUT_MS);
    // ... and keeps following what arrives next.
    const int rows = view->model()->rowCount();
    addEvents(10);
    QTRY_VERIFY_WITH_TIMEOUT(view->model()->rowCount() >= rows + 10, TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(bar->value() == bar->maximum(), TIMEOUT_MS);
    w.resize(1400, 1100);
    addEvents(5);
    QTRY_VERIFY_WITH_TIMEOUT(view->model()->rowCount() >= rows + 15, TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(bar->value() == bar->maximum(), TIMEOUT_MS);

    // Scrolled up by the user: left alone.
    bar->setValue(0);
    addEvents(5);
    QTRY_VERIFY_WITH_TIMEOUT(view->model()->rowCount() >= rows + 20, TIMEOUT_MS);
    QTest::qWait(100);
    QCOMPARE(bar->value(), 0);
}

void TestDashboardSafety::contextMenusOfferWhatApplies()
{
    makeHome();
    OPEN_WINDOW(w);
    QTRY_COMPARE_WITH_TIMEOUT(w.controller()->providers()->rowCount(), 1, TIMEOUT_MS);
    auto* resume = w.findChild<QAction*>(QStringLiteral("actionResume"));
    QVERIFY(!resume->isEnabled()); // nothing selected
    w.selectProvider(QStringLiteral("api"));
    QVERIFY(!resume->isEnabled()); // not paused
    QStringList texts = menuTexts(w.providerMenu(QStringLiteral("api")).get());
    QVERIFY2(!texts.contains(QStringLiteral("Resume")) && texts.contains(QStringLiteral("Pause…"))
            && !texts.contains(QStringLiteral("Reset backoff…")),
        qPrintable(texts.join(QLatin1Char('|'))));
    QVERIFY(m_limiter->pause("api", "maintenance", "test"));
    QVERIFY(m_limiter->report429("api", "indexer", std::nullopt));
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->providers()->isPaused(QStringLiteral("api"))
            && w.controller()->providers()->inBackoff(QStringLiteral("api")),
        TIMEOUT_MS);
    QVERIFY(resume->isEnabled());
    texts = menuTexts(w.providerMenu(QStringLiteral("api")).get());
    QVERIFY2(texts.contains(QStringLiteral("Resume")) && !texts.contains(QStringLiteral("Pause…"))
            && texts.contains(QStringLiteral("Reset backoff…")),
        qPrintable(texts.join(QLatin1Char('|'))));

    // Holders: Clean stale only when something is dead.
    writeLock(m_locks + QStringLiteral("/mine.lock"), ProcessProbe::selfPid(), m_clock.unixSeconds(), "mine");
    const QString key = QStringLiteral("lock:") + m_locks + QStringLiteral("/mine.lock");
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->holders()->holder(key), TIMEOUT_MS);
    texts = menuTexts(w.holderMenu(key).get());
    QCOMPARE(texts, QStringList({ QStringLiteral("Force release…") }));
}

QTEST_MAIN(TestDashboardSafety)

// Issue 28, item 3: with the slot of a SIGKILLed holder, the tile said NO SLOT (red) where
// `tollgate status` said ok, one slot free: the window computed capacity without discounting
// what the next acquire reclaims. Now both come from core the same way (the observer, which may
// probe pids, hands the GUI the state as acquire will judge it).
void TestDashboardSafety::aDeadHoldersSlotIsFreeAsStatusSays()
{
    makeHome();
    ProviderLimits l;
    l.requests = 60;
    l.parallel = 1;
    QVERIFY(m_limiter->setLimits("api", l, "test"));
    // `acquire --slot` records its parent as the holder: here a shell that then ends, as a
    // script killed after acquiring.
    QProcess acquire;
    acquire.start(QStringLiteral("sh"),
        { QStringLiteral("-c"),
            QStringLiteral("\"$0\" acquire api --home \"$1\" --slot --caller killed >/dev/null"),
            QStringLiteral(TOLLGATE_CLI_PATH), m_home });
    QVERIFY(acquire.waitForFinished(TIMEOUT_MS));
    QCOMPARE(acquire.exitCode(), 0);

    QProcess status;
    status.start(QStringLiteral(TOLLGATE_CLI_PATH),
        { QStringLiteral("status"), QStringLiteral("--home"), m_home, QStringLiteral("--json") });
    QVERIFY(status.waitForFinished(TIMEOUT_MS));
    const QByteArray out = status.readAllStandardOutput();
    const QJsonObject provider
        = QJsonDocument::fromJson(out).object().value(QStringLiteral("providers")).toArray().at(0).toObject();
    const QJsonObject capacity = provider.value(QStringLiteral("capacity")).toObject();
    QCOMPARE(capacity.value(QStringLiteral("level")).toString(), QStringLiteral("ok"));
    QCOMPARE(capacity.value(QStringLiteral("slots_free")).toInt(), 1);

    OPEN_WINDOW(w);
    QTRY_COMPARE_WITH_TIMEOUT(w.capacity()->rows().size(), 1, TIMEOUT_MS);
    const CapacityModel::Row& tile = w.capacity()->rows().at(0);
    QCOMPARE(tile.level, CapacityModel::Level::Ok);
    QVERIFY2(tile.details.contains(QStringLiteral("1 / 1 slots free")),
        qPrintable(tile.details.join(QLatin1Char('|'))));
    auto* providers = w.controller()->providers();
    QCOMPARE(providers->index(0, ProvidersModel::Slots).data().toString(), QStringLiteral("0 / 1"));
}

// Issue 28, item 4: Clean stale removed lock files shown as "dead" but not "stale" (a holder
// that died a moment ago), thousands at once, without a count or a question. Now it counts
// and names what it will take, asks, and takes only lock files shown stale; a corrupt one, a
// dead-but-young one and a live one stay.
void TestDashboardSafety::cleanStaleCountsAsksAndTakesOnlyWhatIsStale()
{
    const qint64 dead = TestSupport::deadPid();
    const qint64 now = m_clock.unixSeconds();
    const QString stale = m_locks + QStringLiteral("/stale.lock");
    const QString young = m_locks + QStringLiteral("/young.lock");
    const QString corrupt = m_locks + QStringLiteral("/corrupt.lock");
    writeLock(stale, dead, now - 7200, "long gone");
    writeLock(young, dead, now - 30, "just crashed");
    writeCorruptLock(corrupt);
    OPEN_WINDOW(w);
    QTRY_COMPARE_WITH_TIMEOUT(w.controller()->holders()->rowCount(), 3, TIMEOUT_MS);
    QString asked;
    bool answer = false;
    w.setConfirmHandler(recordingConfirm(asked, answer));
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);
    w.cleanStale(); // refused: nothing happens
    QVERIFY2(asked.contains(QStringLiteral("remove 1 stale lock file")), qPrintable(asked));
    QVERIFY2(asked.contains(QStringLiteral("stale.lock")) && !asked.contains(QStringLiteral("young.lock"))
            && !asked.contains(QStringLiteral("corrupt.lock")),
        qPrintable(asked));
    QVERIFY(!actions.wait(500)); // nothing was sent to act on
    QVERIFY(QFile::exists(stale));

    answer = true;
    w.cleanStale();
    const ActionResult r = nextAction(actions);
    QVERIFY2(r.ok, qPrintable(r.message));
    QVERIFY(!QFile::exists(stale));
    QVERIFY(QFile::exists(young));
    QVERIFY(QFile::exists(corrupt));
}

// Issue 28, item 4: Force release of a corrupt lock file removed it without a question and
// called its holder "dead", though no pid is known. It asks, naming the file and its fault.
void TestDashboardSafety::aCorruptLockFileIsRemovedOnlyAfterAsking()
{
    const QString corrupt = m_locks + QStringLiteral("/corrupt.lock");
    writeCorruptLock(corrupt);
    OPEN_WINDOW(w);
    const QString key = QStringLiteral("lock:") + corrupt;
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->holders()->holder(key), TIMEOUT_MS);
    QString asked;
    bool answer = false;
    w.setConfirmHandler(recordingConfirm(asked, answer));
    QSignalSpy actions(w.controller(), &DashboardController::actionFinished);
    w.selectHolder(key);
    w.releaseSelected();
    ActionResult r = nextAction(actions);
    QVERIFY(r.needsConfirmation); // the worker asks instead of removing
    QTRY_VERIFY_WITH_TIMEOUT(!asked.isEmpty(), TIMEOUT_MS);
    QVERIFY2(asked.contains(corrupt) && asked.contains(QStringLiteral("corrupt")), qPrintable(asked));
    QVERIFY(QFile::exists(corrupt));

    answer = true;
    asked.clear();
    w.selectHolder(key);
    w.releaseSelected();
    r = nextAction(actions);
    QVERIFY(r.needsConfirmation);
    r = nextAction(actions); // the confirmed release
    QVERIFY2(r.ok, qPrintable(r.message));
    QVERIFY(!QFile::exists(corrupt));
    QVERIFY2(r.message.contains(QStringLiteral("holder unknown")), qPrintable(r.message));
}

#include "tst_dashboardsafety.moc"
