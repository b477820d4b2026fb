// The dashboard with many holders does work in proportion to what changed, not to what is
// shown: a history append reads the history only, a new lock file is the only one read, a
// tick re-derives the ages of the rows in view only, a diff of 10,000 rows keeps the
// selection by key, and column widths come from a bounded sample. (Speed itself is measured
// by bench/dashboardscale.sh, not here.)

#include "backend/quotalimiter.h"
#include "base/systemclock.h"
#include "cachingprobe.h"
#include "dashboardcontroller.h"
#include "holdersmodel.h"
#include "homewatcher.h"
#include "keyedtableview.h"
#include "lock/lockfile.h"
#include "quotaobserver.h"
#include "store/filequotastore.h"

#include <QApplication>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHeaderView>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTemporaryDir>
#include <QTest>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace tollgate;
using namespace tollgate::ui;

namespace {

constexpr int TIMEOUT_MS = 10000;
constexpr qint64 NOW = 1'700'000'000'000;

HolderInfo lockHolder(int i, qint64 sinceMs)
{
    HolderInfo h;
    h.kind = HolderKind::LockFile;
    h.path = QStringLiteral("/locks/job-%1.lock").arg(i, 5, 10, QLatin1Char('0'));
    h.key = QStringLiteral("lock:") + h.path;
    h.pid = 1000 + i % 7;
    h.who = QStringLiteral("job %1").arg(i);
    h.sinceMs = sinceMs;
    return h;
}

DashboardSnapshot manyHolders(int n, quint64 revision)
{
    DashboardSnapshot s;
    s.nowMs = NOW;
    s.holdersRevision = revision;
    for (int i = 0; i < n; ++i)
        s.holders.append(lockHolder(i, NOW - 1000LL * (i % 5000)));
    return s;
}

// Counts how often the base is asked.
class CountingProbe final : public ProcessProbe
{
public:
    Liveness liveness(std::int64_t, std::optional<std::int64_t>) const override
    {
        ++asked;
        return Liveness::Alive;
    }
    std::optional<std::int64_t> startTime(std::int64_t) const override
    {
        ++asked;
        return 100;
    }
    std::string commandLine(std::int64_t pid) const override
    {
        ++asked;
        return "cmd " + std::to_string(pid);
    }
    mutable int asked = 0;
};

} // namespace

class TestDashboardScale final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void init();
    void historyAppendReadsNoLockFile();
    void newLockFileIsTheOnlyOneRead();
    void watcherSaysWhichPartChanged();
    void sameRevisionBuildsNoRow();
    void oneChangedHolderBuildsOneRow();
    void ageTickTouchesOnlyVisibleRows();
    void selectionKeptByKeyThroughDiffOf10000Rows();
    void columnsFitFromABoundedSampleNotPerTick();
    void cachingProbeAsksOncePerPid();
    void hostileEntriesInALockDirectory();
    void rescanLooksOnlyAtWhatChanged();
    void patchRebuildsOnlyTheRewrittenRow();
    void controllerAppliesAPatchAcrossThreads();

private:
    QString home() const { return m_dir->path() + QStringLiteral("/home"); }
    QString locks() const { return m_dir->path() + QStringLiteral("/locks"); }
    void takeLock(const QString& name);

    std::unique_ptr<QTemporaryDir> m_dir;
    SystemClock m_clock;
    ProcessProbe m_probe;
};

void TestDashboardScale::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    QVERIFY(QDir().mkpath(locks()));
}

void TestDashboardScale::takeLock(const QString& name)
{
    auto lock = LockFile::open((locks() + QLatin1Char('/') + name).toStdString(), m_clock, m_probe);
    QVERIFY(lock.ok());
    auto got = lock->tryAcquire(LockOptions {});
    QVERIFY(got.ok() && got->acquired);
}

void TestDashboardScale::historyAppendReadsNoLockFile()
{
    auto store = FileQuotaStore::open(home().toStdString(), m_clock);
    QVERIFY(store.ok());
    QuotaLimiter limiter(**store, m_clock, m_probe);
    ProviderLimits l;
    l.requests = 1000;
    QVERIFY(limiter.setLimits("api", l, "test").ok());
    for (int i = 0; i < 5; ++i)
        takeLock(QStringLiteral("l%1.lock").arg(i));

    QuotaObserver observer(home(), { locks() });
    QSignalSpy history(&observer, &QuotaObserver::historyAppended);
    QSignalSpy snapshots(&observer, &QuotaObserver::snapshotReady);
    observer.start();
    QCOMPARE(snapshots.count(), 1);
    QCOMPARE(snapshots.last().at(0).value<DashboardSnapshot>().holders.size(), qsizetype(5));
    const quint64 scans = observer.lockScans();
    const quint64 reads = observer.lockReads();
    QCOMPARE(reads, quint64(5));

    history.clear();
    AdmitRequest r;
    r.provider = "api";
    r.caller = "tester";
    QVERIFY(limiter.acquire(r, m_clock.now()).ok()); // state.bin and one history line
    QTRY_VERIFY_WITH_TIMEOUT(history.count() > 0, TIMEOUT_MS);
    QCOMPARE(observer.lockScans(), scans);
    QCOMPARE(observer.lockReads(), reads);
}

void TestDashboardScale::newLockFileIsTheOnlyOneRead()
{
    for (int i = 0; i < 20; ++i)
        takeLock(QStringLiteral("l%1.lock").arg(i));
    QuotaObserver observer(home(), { locks() });
    QSignalSpy snapshots(&observer, &QuotaObserver::snapshotReady);
    observer.start();
    QCOMPARE(observer.lockReads(), quint64(20));
    const quint64 revision = snapshots.last().at(0).value<DashboardSnapshot>().holdersRevision;

    snapshots.clear();
    takeLock(QStringLiteral("new.lock"));
    QTRY_VERIFY_WITH_TIMEOUT(snapshots.count() > 0, TIMEOUT_MS);
    const auto s = snapshots.last().at(0).value<DashboardSnapshot>();
    QCOMPARE(s.holders.size(), qsizetype(21));
    QVERIFY(s.holdersRevision != revision);
    QCOMPARE(observer.lockReads(), quint64(21));

    // Removed: nothing is read, the row goes.
    snapshots.clear();
    QVERIFY(QFile::remove(locks() + QStringLiteral("/l3.lock")));
    QTRY_VERIFY_WITH_TIMEOUT(snapshots.count() > 0, TIMEOUT_MS);
    QCOMPARE(snapshots.last().at(0).value<DashboardSnapshot>().holders.size(), qsizetype(20));
    QCOMPARE(observer.lockReads(), quint64(21));

    // Nothing changed, nothing is sent: a liveness round over live holders is silent.
    snapshots.clear();
    observer.checkLiveness();
    QCOMPARE(snapshots.count(), 0);
    QCOMPARE(observer.lockReads(), quint64(21));
}

void TestDashboardScale::watcherSaysWhichPartChanged()
{
    QVERIFY(QDir().mkpath(home()));
    const auto write = [](const QString& path, const QByteArray& data) {
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Append));
        QVERIFY(f.write(data) == data.size());
    };
    write(home() + QStringLiteral("/history.jsonl"), "{}\n");
    write(home() + QStringLiteral("/state.bin"), "x");
    HomeWatcher w(home(), { locks() });
    QSignalSpy spy(&w, &HomeWatcher::changed);
    const auto expect = [&](int part, const std::function<void()>& action) {
        spy.clear();
        action();
        QTRY_VERIFY_WITH_TIMEOUT(spy.count() > 0, TIMEOUT_MS);
        QCOMPARE(spy.first().at(0).toInt(), part);
    };
    expect(HomeWatcher::History, [&] { write(home() + QStringLiteral("/history.jsonl"), "{}\n"); });
    expect(HomeWatcher::Quota, [&] { write(home() + QStringLiteral("/state.bin"), "y"); });
    expect(HomeWatcher::Locks, [&] { write(locks() + QStringLiteral("/a.lock"), "pid=1\n"); });
}

void TestDashboardScale::sameRevisionBuildsNoRow()
{
    HoldersModel model;
    model.setSnapshot(manyHolders(10000, 7));
    QCOMPARE(model.rowCount(), 10000);
    QCOMPARE(model.rowsBuilt(), quint64(10000));
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
    QSignalSpy live(&model, &KeyedTableModel::liveColumnChanged);
    DashboardSnapshot again = manyHolders(10000, 7);
    again.nowMs = NOW + 1000;
    model.setSnapshot(again);
    QCOMPARE(model.rowsBuilt(), quint64(10000));
    QCOMPARE(inserted.count(), 0);
    // Only the ages moved: announced once for the column, no dataChanged (a sorting proxy
    // would re-sort 10,000 rows for it).
    QCOMPARE(changed.count(), 0);
    QCOMPARE(live.count(), 1);
    QCOMPARE(live.first().at(0).toInt(), int(HoldersModel::Age));
}

void TestDashboardScale::oneChangedHolderBuildsOneRow()
{
    HoldersModel model;
    model.setSnapshot(manyHolders(10000, 7));
    DashboardSnapshot next = manyHolders(10000, 8);
    next.holders[4321].health = HolderHealth::Dead;
    next.holders.removeAt(10);
    next.holders.append(lockHolder(20000, NOW));
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    QSignalSpy removed(&model, &QAbstractItemModel::rowsRemoved);
    QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
    model.setSnapshot(next);
    QCOMPARE(model.rowsBuilt(), quint64(10002)); // the changed one and the new one
    QCOMPARE(changed.count(), 1);
    QCOMPARE(removed.count(), 1);
    QCOMPARE(inserted.count(), 1);
    QCOMPARE(model.rowCount(), 10000);
    const int row = model.rowOf(next.holders[4320].key);
    QCOMPARE(model.index(row, HoldersModel::Health).data().toString(),
        HoldersModel::healthName(HolderHealth::Dead));
    QVERIFY(model.holder(lockHolder(20000, NOW).key));
    QVERIFY(!model.holder(lockHolder(10, NOW).key));
}

void TestDashboardScale::ageTickTouchesOnlyVisibleRows()
{
    HoldersModel model;
    model.setSnapshot(manyHolders(10000, 1));
    QSortFilterProxyModel sorted;
    sorted.setSourceModel(&model);
    sorted.setSortRole(KeyedTableModel::SortRole);
    KeyedTableView view;
    view.setModel(&sorted);
    view.setSortingEnabled(true);
    view.sortByColumn(HoldersModel::Age, Qt::DescendingOrder);
    view.resize(600, 300);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_VERIFY_WITH_TIMEOUT(model.ageTextsComputed() > 0, TIMEOUT_MS); // painted once
    const QString topKey = sorted.index(0, 0).data(KeyedTableModel::KeyRole).toString();

    const quint64 before = model.ageTextsComputed();
    QSignalSpy layout(&sorted, &QAbstractItemModel::layoutChanged);
    model.tick(NOW + 60'000);
    QTRY_VERIFY_WITH_TIMEOUT(model.ageTextsComputed() > before, TIMEOUT_MS); // repainted
    QCoreApplication::processEvents();
    const quint64 touched = model.ageTextsComputed() - before;
    const int visible = view.viewport()->height() / view.verticalHeader()->defaultSectionSize() + 2;
    QVERIFY2(touched <= quint64(visible * 2), qPrintable(QStringLiteral("%1 age texts").arg(touched)));
    QCOMPARE(layout.count(), 0); // the ages sort by a constant: nothing moves
    QCOMPARE(sorted.index(0, 0).data(KeyedTableModel::KeyRole).toString(), topKey);
    QCOMPARE(model.index(0, HoldersModel::Age).data().toString(), QStringLiteral("1 min 0 s"));
}

void TestDashboardScale::selectionKeptByKeyThroughDiffOf10000Rows()
{
    HoldersModel model;
    model.setSnapshot(manyHolders(10000, 1));
    QSortFilterProxyModel sorted;
    sorted.setSourceModel(&model);
    sorted.setSortRole(KeyedTableModel::SortRole);
    KeyedTableView view;
    view.setSelectionBehavior(QAbstractItemView::SelectRows);
    view.setSelectionMode(QAbstractItemView::SingleSelection);
    view.setModel(&sorted);
    view.setSortingEnabled(true);
    view.sortByColumn(HoldersModel::Who, Qt::AscendingOrder);
    const QString key = lockHolder(5000, 0).key;
    QVERIFY(view.selectKey(key));

    // 100 rows go (some above the selection), 100 come, the selected one changes.
    DashboardSnapshot next;
    next.nowMs = NOW;
    next.holdersRevision = 2;
    for (int i = 100; i < 10000; ++i)
        next.holders.append(lockHolder(i, NOW - 1000LL * (i % 5000)));
    for (int i = 0; i < 100; ++i)
        next.holders.append(lockHolder(30000 + i, NOW));
    for (HolderInfo& h : next.holders) {
        if (h.key == key)
            h.health = HolderHealth::Dead;
    }
    model.setSnapshot(next);
    QCOMPARE(view.selectedKey(), key);
    const QModelIndex current = view.currentIndex();
    QCOMPARE(current.siblingAtColumn(0).data(KeyedTableModel::KeyRole).toString(), key);
    QVERIFY(view.selectionModel()->isRowSelected(current.row(), {}));
    QCOMPARE(view.rowOfKey(key), current.row());
    QCOMPARE(view.selectionModel()->selectedRows().size(), 1);
}

void TestDashboardScale::columnsFitFromABoundedSampleNotPerTick()
{
    HoldersModel model;
    model.setSnapshot(manyHolders(10000, 1));
    KeyedTableView view;
    view.setModel(&model);
    view.resize(800, 300);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_VERIFY_WITH_TIMEOUT(view.columnFits() > 0, TIMEOUT_MS);
    for (int c = 0; c < model.columnCount(); ++c)
        QCOMPARE(view.horizontalHeader()->sectionResizeMode(c), QHeaderView::Interactive);
    QCOMPARE(view.verticalHeader()->sectionResizeMode(0), QHeaderView::Fixed);
    QVERIFY(view.cellsMeasured() <= quint64(KeyedTableView::FIT_SAMPLE_ROWS * model.columnCount()));
    // Wide enough for the widest sampled "Caller / tag" text.
    const int who = view.columnWidth(HoldersModel::Who);
    QVERIFY(who >= view.fontMetrics().horizontalAdvance(QStringLiteral("job 9999")));

    // Ticks and changed cells are no reason to measure again.
    const int fits = view.columnFits();
    const quint64 measured = view.cellsMeasured();
    for (int i = 1; i <= 3; ++i)
        model.tick(NOW + i * 1000);
    QVERIFY(!view.isFitPending());
    QCoreApplication::processEvents();
    QCOMPARE(view.columnFits(), fits);
    QCOMPARE(view.cellsMeasured(), measured);

    // A width set by code is a starting width: a fit still widens it.
    view.setColumnWidth(HoldersModel::Where, 10);
    view.fitColumns();
    QVERIFY(view.columnWidth(HoldersModel::Where) > 10);

    // A column the user sized (the mouse down on the header) stays as the user left it.
    QWidget* header = view.horizontalHeader()->viewport();
    const QPoint onFirst(view.horizontalHeader()->sectionSize(0) / 2, header->height() / 2);
    QTest::mousePress(header, Qt::LeftButton, {}, onFirst);
    view.horizontalHeader()->resizeSection(HoldersModel::Who, 30);
    QTest::mouseRelease(header, Qt::LeftButton, {}, onFirst);
    DashboardSnapshot more = manyHolders(10000, 2);
    more.holders.append(lockHolder(99999, NOW));
    more.holders.last().who = QStringLiteral("a much longer tag than any before it");
    model.setSnapshot(more);
    QVERIFY(view.isFitPending());
    view.fitColumns();
    QCOMPARE(view.columnWidth(HoldersModel::Who), 30);
}

void TestDashboardScale::cachingProbeAsksOncePerPid()
{
    CountingProbe base;
    CachingProbe probe(base);
    for (int i = 0; i < 10000; ++i) {
        QCOMPARE(probe.liveness(42, 200), Liveness::Alive);
        QCOMPARE(probe.commandLine(42), std::string("cmd 42"));
    }
    QCOMPARE(base.asked, 3); // liveness, start time, command line
    // The start-time rule of ProcessProbe::liveness: started (100) long after the lock (10).
    QCOMPARE(probe.liveness(42, 10), Liveness::Dead);
    QCOMPARE(probe.liveness(42, 100 - ProcessProbe::START_TIME_SLACK), Liveness::Alive);
    QCOMPARE(base.asked, 3);
    probe.clear();
    (void)probe.liveness(42, std::nullopt);
    QCOMPARE(base.asked, 4);
}

// A FIFO, a directory, a symlink and a control byte in a name: the incremental scan neither
// blocks nor shows anything but the regular lock files, and a replaced file is read again.
void TestDashboardScale::hostileEntriesInALockDirectory()
{
    takeLock(QStringLiteral("real.lock"));
    takeLock(QStringLiteral("new\nline.lock"));
    QVERIFY(::mkfifo(QFile::encodeName(locks() + QStringLiteral("/fifo.lock")).constData(), 0600) == 0);
    QVERIFY(QDir().mkpath(locks() + QStringLiteral("/dir.lock")));
    QVERIFY(QFile::link(locks() + QStringLiteral("/real.lock"), locks() + QStringLiteral("/link.lock")));
    QuotaObserver observer(home(), { locks() });
    QSignalSpy snapshots(&observer, &QuotaObserver::snapshotReady);
    observer.start();
    auto s = snapshots.last().at(0).value<DashboardSnapshot>();
    QStringList names;
    for (const HolderInfo& h : s.holders)
        names.append(QFileInfo(h.path).fileName());
    names.sort();
    QCOMPARE(names, QStringList({ QStringLiteral("new\nline.lock"), QStringLiteral("real.lock") }));

    // Released and taken again (same name, another file): read again, and sent as a patch of
    // that row (or a whole snapshot, had the report caught the moment it was absent).
    const quint64 reads = observer.lockReads();
    snapshots.clear();
    QSignalSpy patches(&observer, &QuotaObserver::holdersPatched);
    QVERIFY(QFile::remove(locks() + QStringLiteral("/real.lock")));
    takeLock(QStringLiteral("real.lock"));
    QTRY_VERIFY_WITH_TIMEOUT(observer.lockReads() > reads, TIMEOUT_MS);
    QTRY_VERIFY_WITH_TIMEOUT(snapshots.count() + patches.count() > 0, TIMEOUT_MS);
    if (patches.isEmpty()) {
        QCOMPARE(snapshots.last().at(0).value<DashboardSnapshot>().holders.size(), qsizetype(2));
    } else {
        const auto p = patches.last().at(0).value<HoldersPatch>();
        QCOMPARE(p.rows.size(), qsizetype(1));
        QVERIFY(p.rows.first().path.endsWith(QStringLiteral("/real.lock")));
    }
    QCOMPARE(observer.lockReads(), reads + 1); // only that one
}

// Issue 28, item 11: a lock-directory report stats only the names inotify gave, yet every kind
// of change is seen: a lock added, removed, rewritten in place with the same size and the same
// mtime (to the nanosecond: only the ctime moves), and replaced by rename with the old mtime.
void TestDashboardScale::rescanLooksOnlyAtWhatChanged()
{
    const QByteArray stamp = QByteArray::number(QDateTime::currentSecsSinceEpoch());
    const auto bytes = [&](const QByteArray& tag) {
        return "pid=" + QByteArray::number(qint64(::getpid())) + "\ntimestamp=" + stamp + "\ntag=" + tag
            + '\n';
    };
    const auto write = [](const QString& path, const QByteArray& data) {
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        QCOMPARE(f.write(data), data.size());
    };
    const auto path = [this](const QString& name) { return locks() + QLatin1Char('/') + name; };
    for (int i = 0; i < 200; ++i)
        write(path(QStringLiteral("j%1.lock").arg(i, 3, 10, QLatin1Char('0'))), bytes("aaaa"));

    QuotaObserver observer(home(), { locks() });
    QList<HolderInfo> current;
    int patches = 0;
    connect(&observer, &QuotaObserver::snapshotReady, this,
        [&](const DashboardSnapshot& s) { current = s.holders; });
    connect(&observer, &QuotaObserver::holdersPatched, this, [&](const HoldersPatch& p) {
        for (int i = 0; i < p.changed.size(); ++i) {
            QCOMPARE(current.at(p.changed.at(i)).key, p.rows.at(i).key);
            current[p.changed.at(i)] = p.rows.at(i);
        }
        ++patches;
    });
    observer.start();
    QCOMPARE(current.size(), qsizetype(200));
    QCOMPARE(observer.lockStats(), quint64(200));
    const auto whoOf = [&](const QString& name) {
        for (const HolderInfo& h : std::as_const(current)) {
            if (QFileInfo(h.path).fileName() == name)
                return h.who;
        }
        return QStringLiteral("(absent)");
    };

    // Added (written beside, then linked, as LockFile does).
    write(path(QStringLiteral("new.lock.tmp")), bytes("nnnn"));
    QVERIFY(::link(QFile::encodeName(path(QStringLiteral("new.lock.tmp"))).constData(),
                QFile::encodeName(path(QStringLiteral("new.lock"))).constData())
        == 0);
    QVERIFY(QFile::remove(path(QStringLiteral("new.lock.tmp"))));
    QTRY_COMPARE_WITH_TIMEOUT(whoOf(QStringLiteral("new.lock")), QStringLiteral("nnnn"), TIMEOUT_MS);
    QCOMPARE(current.size(), qsizetype(201));

    // Removed.
    QVERIFY(QFile::remove(path(QStringLiteral("j007.lock"))));
    QTRY_COMPARE_WITH_TIMEOUT(current.size(), qsizetype(200), TIMEOUT_MS);
    QCOMPARE(whoOf(QStringLiteral("j007.lock")), QStringLiteral("(absent)"));

    // Rewritten in place: same inode, same size, the mtime put back to the nanosecond.
    {
        const QByteArray native = QFile::encodeName(path(QStringLiteral("j010.lock")));
        struct stat before
        {
        };
        QCOMPARE(::stat(native.constData(), &before), 0);
        const int fd = ::open(native.constData(), O_WRONLY | O_CLOEXEC);
        QVERIFY(fd >= 0);
        const QByteArray data = bytes("bbbb");
        QCOMPARE(::pwrite(fd, data.constData(), size_t(data.size()), 0), ssize_t(data.size()));
        const timespec times[2] = { before.st_atim, before.st_mtim };
        QCOMPARE(::futimens(fd, times), 0);
        ::close(fd);
        struct stat after
        {
        };
        QCOMPARE(::stat(native.constData(), &after), 0);
        QCOMPARE(after.st_ino, before.st_ino);
        QCOMPARE(after.st_size, before.st_size);
        QCOMPARE(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
    }
    QTRY_COMPARE_WITH_TIMEOUT(whoOf(QStringLiteral("j010.lock")), QStringLiteral("bbbb"), TIMEOUT_MS);
    QVERIFY(patches > 0); // a row changed in place travels as a patch, not a whole snapshot

    // Replaced by rename with a file of the same size and the old file's mtime.
    {
        const QByteArray target = QFile::encodeName(path(QStringLiteral("j020.lock")));
        const QByteArray tmp = QFile::encodeName(path(QStringLiteral("j020.lock.x.tmp")));
        struct stat before
        {
        };
        QCOMPARE(::stat(target.constData(), &before), 0);
        write(QFile::decodeName(tmp), bytes("cccc"));
        const timespec times[2] = { before.st_atim, before.st_mtim };
        QCOMPARE(::utimensat(AT_FDCWD, tmp.constData(), times, 0), 0);
        QCOMPARE(::rename(tmp.constData(), target.constData()), 0);
    }
    QTRY_COMPARE_WITH_TIMEOUT(whoOf(QStringLiteral("j020.lock")), QStringLiteral("cccc"), TIMEOUT_MS);

    // Four changes, and far fewer stats than one whole-directory pass (200) would cost.
    QVERIFY2(observer.lockStats() < 200 + 20, qPrintable(QString::number(observer.lockStats())));
    // And the incremental view is what a full read sees.
    const DashboardSnapshot full = QuotaObserver::readSnapshot(
        home(), { locks() }, QuotaObserver::DEFAULT_STALE_SECONDS, m_probe, m_clock);
    QStringList seen, truth;
    for (const HolderInfo& h : std::as_const(current))
        seen.append(h.path + QLatin1Char('=') + h.who);
    for (const HolderInfo& h : full.holders)
        truth.append(h.path + QLatin1Char('=') + h.who);
    seen.sort();
    truth.sort();
    QCOMPARE(seen, truth);
}

// A snapshot (or patch) that names the revision shown as its base rebuilds the rows it lists
// and diffs nothing else; one with another base is diffed as before.
void TestDashboardScale::patchRebuildsOnlyTheRewrittenRow()
{
    HoldersModel model;
    const DashboardSnapshot first = manyHolders(10000, 5);
    model.setSnapshot(first);
    const quint64 compared = model.holdersCompared();
    const quint64 rows = model.rowsBuilt();

    DashboardSnapshot next = first;
    next.holders[42].who = QStringLiteral("rewritten");
    next.holdersRevision = 6;
    next.holdersBase = 5;
    next.holdersChanged = { 42 };
    model.setSnapshot(next);
    QCOMPARE(model.holdersCompared(), compared);
    QCOMPARE(model.rowsBuilt(), rows + 1);
    QCOMPARE(model.holder(next.holders[42].key)->who, QStringLiteral("rewritten"));
    QCOMPARE(model.rowCount(), 10000);

    // A patch based on the revision shown: its rows only, in place.
    HoldersPatch patch;
    patch.base = 6;
    patch.revision = 7;
    patch.changed = { 9 };
    patch.rows = { next.holders[9] };
    patch.rows[0].who = QStringLiteral("patched");
    QVERIFY(model.applyPatch(patch));
    QCOMPARE(model.holdersCompared(), compared);
    QCOMPARE(model.rowsBuilt(), rows + 2);
    QCOMPARE(model.holder(next.holders[9].key)->who, QStringLiteral("patched"));
    QCOMPARE(model.revision(), quint64(7));
    // Based on another revision, or naming a row by the wrong key: refused, nothing changed.
    QVERIFY(!model.applyPatch(patch));
    patch.base = 7;
    patch.revision = 8;
    patch.changed = { 10 };
    QVERIFY(!model.applyPatch(patch));
    QCOMPARE(model.revision(), quint64(7));

    // A base that is not the revision shown: the whole list is compared.
    DashboardSnapshot other = next;
    other.holders[7].who = QStringLiteral("also");
    other.holdersRevision = 8;
    other.holdersBase = 3;
    other.holdersChanged = {};
    model.setSnapshot(other);
    QCOMPARE(model.holdersCompared(), compared + 10000);
    QCOMPARE(model.holder(other.holders[7].key)->who, QStringLiteral("also"));
}

// The observer on its worker thread, the controller on this one: a lock file replaced by
// rename reaches the holders model and the controller's snapshot as a patch.
void TestDashboardScale::controllerAppliesAPatchAcrossThreads()
{
    for (int i = 0; i < 50; ++i)
        takeLock(QStringLiteral("c%1.lock").arg(i));
    DashboardController c(home(), { locks() });
    QSignalSpy patched(&c, &DashboardController::holdersChanged);
    c.start();
    QTRY_COMPARE_WITH_TIMEOUT(c.holders()->rowCount(), 50, TIMEOUT_MS);

    const QString target = QDir::cleanPath(locks() + QStringLiteral("/c7.lock"));
    const QString tmp = target + QStringLiteral(".x.tmp");
    {
        QFile f(tmp);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("pid=" + QByteArray::number(qint64(::getpid()))
            + "\ntimestamp=" + QByteArray::number(QDateTime::currentSecsSinceEpoch()) + "\ntag=replaced\n");
    }
    QVERIFY(::rename(QFile::encodeName(tmp).constData(), QFile::encodeName(target).constData()) == 0);
    const QString key = QStringLiteral("lock:") + target;
    QTRY_VERIFY_WITH_TIMEOUT(
        c.holders()->holder(key) && c.holders()->holder(key)->who == QStringLiteral("replaced"), TIMEOUT_MS);
    QVERIFY(patched.count() > 0);
    QCOMPARE(c.holders()->rowCount(), 50);
    int found = 0;
    for (const HolderInfo& h : c.snapshot().holders)
        found += h.key == key && h.who == QStringLiteral("replaced");
    QCOMPARE(found, 1);
    QCOMPARE(c.snapshot().holders.size(), qsizetype(50));
}

QTEST_MAIN(TestDashboardScale)
#include "tst_dashboardscale.moc"
