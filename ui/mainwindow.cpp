#include "mainwindow.h"

#include "callerusagemodel.h"
#include "dashboardcontroller.h"
#include "eventsfiltermodel.h"
#include "eventsmodel.h"
#include "holdersmodel.h"
#include "keyedtableview.h"
#include "pausedialog.h"
#include "providersmodel.h"
#include "ratelimitcallersmodel.h"
#include "ratelimitchart.h"
#include "settingsdialog.h"
#include "traycontroller.h"
#include "usagebardelegate.h"
#include "usagechart.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDateTime>
#include <QFrame>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTableView>
#include <QToolBar>
#include <QVBoxLayout>

namespace tollgate::ui {

namespace {

KeyedTableView* makeTable(QWidget* parent, const QString& name)
{
    auto* view = new KeyedTableView(parent);
    view->setObjectName(name);
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->setSelectionMode(QAbstractItemView::SingleSelection);
    view->verticalHeader()->hide();
    view->verticalHeader()->setDefaultSectionSize(22);
    view->horizontalHeader()->setStretchLastSection(true);
    view->setAlternatingRowColors(true);
    view->setWordWrap(false);
    return view;
}

QFrame* makeBanner(QWidget* parent, const QString& name, const QString& style, QLabel*& text)
{
    auto* frame = new QFrame(parent);
    frame->setObjectName(name);
    frame->setStyleSheet(QStringLiteral("QFrame#%1 { %2 border-radius: 4px; }").arg(name, style));
    auto* layout = new QHBoxLayout(frame);
    layout->setContentsMargins(10, 6, 6, 6);
    text = new QLabel(frame);
    text->setObjectName(name + QStringLiteral("Text"));
    text->setWordWrap(true);
    text->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* close = new QPushButton(QObject::tr("Dismiss"), frame);
    QObject::connect(close, &QPushButton::clicked, frame, &QWidget::hide);
    layout->addWidget(text, 1);
    layout->addWidget(close, 0, Qt::AlignTop);
    frame->hide();
    return frame;
}

QString emptyStateText(const DashboardSnapshot& s)
{
    const QString home = s.home.toHtmlEscaped();
    QString where;
    if (s.status == HomeStatus::Missing)
        where = QObject::tr(
            "<p>The Tollgate home <tt>%1</tt> does not exist yet. The dashboard is watching for it "
            "and shows it as soon as the first caller creates it.</p>")
                    .arg(home);
    else if (s.status == HomeStatus::Unusable)
        where = QObject::tr("<p><b>The Tollgate home cannot be used:</b> %1</p>")
                    .arg(s.problem.toHtmlEscaped());
    else
        where = QObject::tr("<p>The Tollgate home <tt>%1</tt> is empty: no provider has limits yet.</p>")
                    .arg(home);
    return QObject::tr("<h2>No callers yet</h2>%1"
                       "<p>Start one by setting a provider's limits and running a command through it:</p>"
                       "<pre>tollgate limits set my-api --requests 60 --window 60 --parallel 4 --home %2\n"
                       "tollgate run my-api --caller nightly-report --home %2 -- ./report.sh</pre>"
                       "<p>or watch a simulation with real 429 storms:</p>"
                       "<pre>tollgate demo --home %2</pre>")
        .arg(where, home);
}

} // namespace

MainWindow::MainWindow(const DashboardOptions& options, QWidget* parent)
    : QMainWindow(parent)
    , m_settings(options.settingsPath)
{
    QStringList lockDirs = options.lockDirs;
    if (lockDirs.isEmpty())
        lockDirs = m_settings.lockDirs();
    else
        m_settings.setLockDirs(lockDirs);
    m_settings.sync();
    m_controller = new DashboardController(options.home, lockDirs, this);
    m_controller->setStormThreshold(
        m_settings.stormThreshold(), qint64(m_settings.stormWindowSeconds()) * 1000);
    m_controller->setStaleSeconds(m_settings.staleSeconds());
    m_tray = new TrayController(this);
    // Every confirmation defaults to No: Enter alone never does the risky thing.
    m_confirm = [this](const QString& title, const QString& text) {
        return QMessageBox::question(this, title, text, QMessageBox::Yes | QMessageBox::No, QMessageBox::No)
            == QMessageBox::Yes;
    };
    m_pausePrompt
        = [this](const QStringList& providers, const QString& preselect) -> std::optional<PauseChoice> {
        PauseDialog dialog(providers, preselect, this);
        if (dialog.exec() != QDialog::Accepted)
            return std::nullopt;
        return PauseChoice { dialog.provider(), dialog.reason() };
    };

    setWindowTitle(tr("Tollgate — %1").arg(options.home));
    setWindowIcon(StateIcon::icon(TrayState::Normal));
    buildUi();
    buildActions();

    connect(m_controller, &DashboardController::snapshotChanged, this, &MainWindow::onSnapshot);
    connect(m_controller, &DashboardController::chartsChanged, this, &MainWindow::onCharts);
    connect(m_controller, &DashboardController::actionFinished, this, &MainWindow::onAction);
    connect(m_controller, &DashboardController::limitChangeNeedsConfirmation, this,
        &MainWindow::onLimitChangeNeedsConfirmation);
    connect(m_controller, &DashboardController::undoAvailableChanged, this, &MainWindow::updateActions);
    connect(m_controller, &DashboardController::snapshotChanged, this, &MainWindow::updateActions);
    connect(m_providersView, &KeyedTableView::selectedKeyChanged, this, &MainWindow::updateActions);
    connect(m_holdersView, &KeyedTableView::selectedKeyChanged, this, &MainWindow::updateActions);
    updateActions();
    connect(m_controller, &DashboardController::stormStarted, this, &MainWindow::onStorm);
    connect(m_controller, &DashboardController::trayStateChanged, this, &MainWindow::onTrayState);
    connect(m_controller, &DashboardController::loadedChanged, this, [this] {
        onCharts();
        Q_EMIT loaded();
    });
    connect(m_controller->providers(), &ProvidersModel::editRefused, this,
        [this](const QString&, const QString& reason) {
            showMessage(tr("Limit not changed: %1").arg(reason), true);
        });
    connect(m_tray, &TrayController::showRequested, this, [this] {
        show();
        raise();
        activateWindow();
    });
    connect(m_tray, &TrayController::pauseAllRequested, this, &MainWindow::pauseAll);
    connect(m_tray, &TrayController::resumeAllRequested, this, &MainWindow::resumeAll);
    connect(m_tray, &TrayController::quitRequested, this, &MainWindow::quit);

    if (!restoreGeometry(m_settings.geometry()))
        resize(1500, 1000);
    restoreState(m_settings.windowState());
    m_controller->start();
}

MainWindow::~MainWindow()
{
    m_settings.setGeometry(saveGeometry());
    m_settings.setWindowState(saveState());
    m_settings.sync();
}

QString MainWindow::homeDir() const
{
    return m_controller->home();
}

bool MainWindow::isLoaded() const
{
    return m_controller->loaded();
}

void MainWindow::buildUi()
{
    auto* central = new QWidget(this);
    auto* layout = new QVBoxLayout(central);
    layout->setContentsMargins(6, 6, 6, 6);

    m_corruptBanner = new QLabel(central);
    m_corruptBanner->setObjectName(QStringLiteral("corruptBanner"));
    m_corruptBanner->setWordWrap(true);
    m_corruptBanner->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_corruptBanner->setStyleSheet(QStringLiteral(
        "QLabel { background: #fde2e1; color: #7a1010; border: 1px solid #e0a0a0; border-radius: 4px; "
        "padding: 6px 10px; }"));
    m_corruptBanner->hide();
    m_alertBanner = makeBanner(central, QStringLiteral("alertBanner"),
        QStringLiteral("background: #fff0d6; border: 1px solid #e0b060; color: #6a3b00;"), m_alertText);
    m_messageBanner = makeBanner(central, QStringLiteral("messageBanner"),
        QStringLiteral("background: #eef3fb; border: 1px solid #a8bfe0;"), m_messageText);
    m_undoButton = new QPushButton(tr("Undo"), m_messageBanner);
    m_undoButton->setObjectName(QStringLiteral("undoButton"));
    m_undoButton->setToolTip(tr("Restore the limits as they were before your last change (Ctrl+Z)"));
    m_undoButton->hide();
    connect(m_undoButton, &QPushButton::clicked, this, &MainWindow::undoLimitChange);
    qobject_cast<QHBoxLayout*>(m_messageBanner->layout())->insertWidget(1, m_undoButton, 0, Qt::AlignTop);
    layout->addWidget(m_corruptBanner);
    layout->addWidget(m_alertBanner);
    layout->addWidget(m_messageBanner);

    m_stack = new QStackedWidget(central);
    m_emptyState = new QLabel(m_stack);
    m_emptyState->setObjectName(QStringLiteral("emptyState"));
    m_emptyState->setWordWrap(true);
    m_emptyState->setTextFormat(Qt::RichText);
    m_emptyState->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    m_emptyState->setMargin(24);
    m_emptyState->setTextInteractionFlags(Qt::TextSelectableByMouse);
    DashboardSnapshot initial;
    initial.home = m_controller->home();
    m_emptyState->setText(emptyStateText(initial));
    m_stack->addWidget(m_emptyState);

    auto* page = new QSplitter(Qt::Vertical, m_stack);
    page->setObjectName(QStringLiteral("dashboardPage"));
    page->setChildrenCollapsible(false);

    auto* providersBox = new QGroupBox(tr("Providers — double-click a limit to edit it"), page);
    auto* providersLayout = new QVBoxLayout(providersBox);
    m_providersView = makeTable(providersBox, QStringLiteral("providersView"));
    m_providersView->setModel(m_controller->providers());
    m_providersView->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
    auto* bars = new UsageBarDelegate(m_providersView);
    m_providersView->setItemDelegateForColumn(ProvidersModel::RequestsUsed, bars);
    m_providersView->setItemDelegateForColumn(ProvidersModel::TokensUsed, bars);
    m_providersView->setItemDelegateForColumn(ProvidersModel::Slots, bars);
    m_providersView->horizontalHeader()->setStretchLastSection(true);
    m_providersView->setContextMenuPolicy(Qt::CustomContextMenu);
    providersLayout->addWidget(m_providersView);
    connect(
        m_controller->providers(), &QAbstractItemModel::rowsInserted, this, &MainWindow::fitProvidersView);
    connect(m_controller->providers(), &QAbstractItemModel::rowsRemoved, this, &MainWindow::fitProvidersView);

    auto* charts = new QSplitter(Qt::Horizontal, page);
    auto* usageBox = new QGroupBox(tr("Per-caller usage"), charts);
    auto* usageLayout = new QVBoxLayout(usageBox);
    auto* usageTop = new QHBoxLayout();
    m_usageKind = new QComboBox(usageBox);
    m_usageKind->setObjectName(QStringLiteral("usageKind"));
    m_usageKind->addItem(tr("Requests per minute"));
    m_usageKind->addItem(tr("Tokens per minute"));
    usageTop->addWidget(new QLabel(tr("Show:"), usageBox));
    usageTop->addWidget(m_usageKind);
    usageTop->addStretch(1);
    m_usageChart = new UsageChart(usageBox);
    m_usageChart->setObjectName(QStringLiteral("usageChart"));
    m_callersView = makeTable(usageBox, QStringLiteral("callersView"));
    m_callersSorted = new QSortFilterProxyModel(this);
    m_callersSorted->setSourceModel(m_controller->callerUsage());
    m_callersSorted->setSortRole(KeyedTableModel::SortRole);
    m_callersSorted->sort(CallerUsageModel::LastHour, Qt::DescendingOrder);
    m_callersView->setModel(m_callersSorted);
    m_callersView->setItemDelegateForColumn(CallerUsageModel::Share, new UsageBarDelegate(m_callersView));
    m_callersView->horizontalHeader()->setStretchLastSection(true);
    m_callersView->setMaximumHeight(150);
    usageLayout->addLayout(usageTop);
    usageLayout->addWidget(m_usageChart, 1);
    usageLayout->addWidget(m_callersView);
    connect(m_usageKind, &QComboBox::currentIndexChanged, this, [this](int i) {
        m_usageChart->setShowTokens(i == 1);
        onCharts();
    });

    auto* rateBox = new QGroupBox(tr("429 history"), charts);
    auto* rateLayout = new QVBoxLayout(rateBox);
    auto* rateTop = new QHBoxLayout();
    m_rateLimitSpan = new QComboBox(rateBox);
    m_rateLimitSpan->setObjectName(QStringLiteral("rateLimitSpan"));
    m_rateLimitSpan->addItem(tr("Last 24 hours"), 24);
    m_rateLimitSpan->addItem(tr("Last 6 hours"), 6);
    m_rateLimitSpan->addItem(tr("Last hour"), 1);
    rateTop->addWidget(new QLabel(tr("Show:"), rateBox));
    rateTop->addWidget(m_rateLimitSpan);
    rateTop->addStretch(1);
    rateLayout->addLayout(rateTop);
    m_rateLimitChart = new RateLimitChart(rateBox);
    m_rateLimitChart->setObjectName(QStringLiteral("rateLimitChart"));
    m_rateLimitView = makeTable(rateBox, QStringLiteral("rateLimitView"));
    m_rateLimitSorted = new QSortFilterProxyModel(this);
    m_rateLimitSorted->setSourceModel(m_controller->rateLimitCallers());
    m_rateLimitSorted->setSortRole(KeyedTableModel::SortRole);
    m_rateLimitSorted->sort(RateLimitCallersModel::Count, Qt::DescendingOrder);
    m_rateLimitView->setModel(m_rateLimitSorted);
    m_rateLimitView->horizontalHeader()->setStretchLastSection(true);
    m_rateLimitView->setMaximumHeight(150);
    if (const int i = m_rateLimitSpan->findData(m_settings.rateLimitSpanHours()); i >= 0) {
        m_rateLimitSpan->setCurrentIndex(i);
        m_rateLimitChart->setSpanHours(m_settings.rateLimitSpanHours());
    }
    connect(m_rateLimitSpan, &QComboBox::currentIndexChanged, this, [this] {
        const int hours = m_rateLimitSpan->currentData().toInt();
        m_rateLimitChart->setSpanHours(hours);
        m_settings.setRateLimitSpanHours(hours);
        onCharts();
    });
    rateLayout->addWidget(m_rateLimitChart, 1);
    rateLayout->addWidget(m_rateLimitView);

    auto* bottom = new QSplitter(Qt::Horizontal, page);
    auto* holdersBox = new QGroupBox(tr("Holders — slots and lock files"), bottom);
    auto* holdersLayout = new QVBoxLayout(holdersBox);
    m_holdersView = makeTable(holdersBox, QStringLiteral("holdersView"));
    auto* holdersSorted = new QSortFilterProxyModel(this);
    holdersSorted->setSourceModel(m_controller->holders());
    holdersSorted->setSortRole(KeyedTableModel::SortRole);
    m_holdersView->setModel(holdersSorted);
    m_holdersView->setSortingEnabled(true);
    m_holdersView->sortByColumn(HoldersModel::Age, Qt::DescendingOrder);
    m_holdersView->horizontalHeader()->setStretchLastSection(true);
    m_holdersView->setContextMenuPolicy(Qt::CustomContextMenu);
    auto* holderButtons = new QHBoxLayout();
    auto* releaseButton = new QPushButton(tr("Force release…"), holdersBox);
    releaseButton->setObjectName(QStringLiteral("releaseButton"));
    m_releaseButton = releaseButton;
    auto* cleanButton = new QPushButton(tr("Clean stale"), holdersBox);
    cleanButton->setObjectName(QStringLiteral("cleanButton"));
    cleanButton->setToolTip(tr("Release every slot and lock file whose holder is dead"));
    connect(releaseButton, &QPushButton::clicked, this, &MainWindow::releaseSelected);
    connect(cleanButton, &QPushButton::clicked, this, &MainWindow::cleanStale);
    holderButtons->addWidget(releaseButton);
    holderButtons->addWidget(cleanButton);
    holderButtons->addStretch(1);
    holdersLayout->addWidget(m_holdersView, 1);
    holdersLayout->addLayout(holderButtons);

    auto* eventsBox = new QGroupBox(tr("Events"), bottom);
    auto* eventsLayout = new QVBoxLayout(eventsBox);
    auto* filters = new QHBoxLayout();
    m_eventType = new QComboBox(eventsBox);
    m_eventType->setObjectName(QStringLiteral("eventType"));
    m_eventType->addItem(tr("All events"), QString());
    for (const char* type : { "admit", "429", "ok", "gave-up", "pause", "resume", "limits", "release",
             "reclaim", "backoff-reset", "reset", "lock-release", "lock-clean" })
        m_eventType->addItem(QLatin1String(type), QLatin1String(type));
    m_eventText = new QLineEdit(eventsBox);
    m_eventText->setObjectName(QStringLiteral("eventText"));
    m_eventText->setPlaceholderText(tr("Filter: provider, caller, pid, reason…"));
    m_eventText->setClearButtonEnabled(true);
    filters->addWidget(m_eventType);
    filters->addWidget(m_eventText, 1);
    m_eventsView = makeTable(eventsBox, QStringLiteral("eventsView"));
    m_eventsView->setModel(m_controller->filteredEvents());
    m_eventsView->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    m_eventsView->setColumnWidth(EventsModel::Time, 170);
    m_eventsView->setColumnWidth(EventsModel::Type, 90);
    m_eventsView->setColumnWidth(EventsModel::Provider, 90);
    m_eventsView->setColumnWidth(EventsModel::Caller, 120);
    m_eventsView->setColumnWidth(EventsModel::Pid, 70);
    eventsLayout->addLayout(filters);
    eventsLayout->addWidget(m_eventsView, 1);
    connect(m_eventType, &QComboBox::currentIndexChanged, this,
        [this] { m_controller->filteredEvents()->setTypeFilter(m_eventType->currentData().toString()); });
    connect(m_eventText, &QLineEdit::textChanged, m_controller->filteredEvents(),
        &EventsFilterModel::setTextFilter);
    // Follow the log while the user is at its end (also across resizes); leave it alone while
    // they read older lines.
    m_eventsView->setFollowsEnd(true);

    page->addWidget(providersBox);
    page->addWidget(charts);
    page->addWidget(bottom);
    page->setStretchFactor(0, 0);
    page->setStretchFactor(1, 5);
    page->setStretchFactor(2, 3);
    m_stack->addWidget(page);
    layout->addWidget(m_stack, 1);
    fitProvidersView();
    setCentralWidget(central);

    m_statusLabel = new QLabel(this);
    m_statusLabel->setObjectName(QStringLiteral("statusLabel"));
    statusBar()->addPermanentWidget(m_statusLabel);
    m_statusLabel->setText(tr("Watching %1").arg(m_controller->home()));

    connect(m_providersView, &QWidget::customContextMenuRequested, this, [this](const QPoint& pos) {
        const QModelIndex index = m_providersView->indexAt(pos);
        if (!index.isValid())
            return;
        const QString provider = m_controller->providers()->keyAt(index.row());
        m_providersView->selectKey(provider);
        if (auto menu = providerMenu(provider); !menu->isEmpty())
            menu->exec(m_providersView->viewport()->mapToGlobal(pos));
    });
    connect(m_holdersView, &QWidget::customContextMenuRequested, this, [this](const QPoint& pos) {
        const QModelIndex index = m_holdersView->indexAt(pos);
        if (!index.isValid())
            return;
        const QString key = index.data(KeyedTableModel::KeyRole).toString();
        m_holdersView->selectKey(key);
        if (auto menu = holderMenu(key); !menu->isEmpty())
            menu->exec(m_holdersView->viewport()->mapToGlobal(pos));
    });
}

std::unique_ptr<QMenu> MainWindow::providerMenu(const QString& provider)
{
    auto menu = std::make_unique<QMenu>(this);
    const ProvidersModel* model = m_controller->providers();
    if (model->rowOf(provider) < 0)
        return menu;
    if (model->isPaused(provider))
        menu->addAction(tr("Resume"), this, &MainWindow::resumeSelected);
    else
        menu->addAction(tr("Pause…"), this, &MainWindow::pauseSelected);
    if (model->inBackoff(provider))
        menu->addAction(tr("Reset backoff…"), this, &MainWindow::resetBackoffSelected);
    return menu;
}

std::unique_ptr<QMenu> MainWindow::holderMenu(const QString& key)
{
    auto menu = std::make_unique<QMenu>(this);
    if (!m_controller->holders()->holder(key))
        return menu;
    menu->addAction(tr("Force release…"), this, &MainWindow::releaseSelected);
    if (m_controller->holders()->deadCount() > 0)
        menu->addAction(tr("Clean stale"), this, &MainWindow::cleanStale);
    return menu;
}

void MainWindow::buildActions()
{
    auto* bar = addToolBar(tr("Actions"));
    bar->setObjectName(QStringLiteral("actionsToolBar"));
    bar->setMovable(false);
    bar->setToolButtonStyle(Qt::ToolButtonTextOnly);
    auto add = [this, bar](
                   const QString& name, const QString& text, const QString& tip, void (MainWindow::*slot)()) {
        QAction* a = bar->addAction(text);
        a->setObjectName(name);
        a->setToolTip(tip);
        connect(a, &QAction::triggered, this, slot);
        return a;
    };
    m_pauseAllAction = add(QStringLiteral("actionPauseAll"), tr("Pause all"), tr("Make every caller wait"),
        &MainWindow::pauseAll);
    m_resumeAllAction = add(QStringLiteral("actionResumeAll"), tr("Resume all"), tr("Let every caller go on"),
        &MainWindow::resumeAll);
    bar->addSeparator();
    add(QStringLiteral("actionPause"), tr("Pause…"), tr("Pause one provider or all, with a reason"),
        &MainWindow::pauseSelected);
    m_resumeAction = add(QStringLiteral("actionResume"), tr("Resume"), tr("Resume the selected provider"),
        &MainWindow::resumeSelected);
    m_resetBackoffAction = add(QStringLiteral("actionResetBackoff"), tr("Reset backoff…"),
        tr("End the selected provider's 429 backoff now"), &MainWindow::resetBackoffSelected);
    bar->addSeparator();
    m_releaseAction = add(QStringLiteral("actionRelease"), tr("Force release…"),
        tr("Release the selected slot or lock file"), &MainWindow::releaseSelected);
    add(QStringLiteral("actionCleanStale"), tr("Clean stale"), tr("Release every dead holder at once"),
        &MainWindow::cleanStale);
    bar->addSeparator();
    m_undoAction = add(QStringLiteral("actionUndoLimit"), tr("Undo limit change"),
        tr("Restore the limits as they were before your last change"), &MainWindow::undoLimitChange);
    m_undoAction->setShortcut(QKeySequence::Undo);
    m_undoAction->setShortcutContext(Qt::WindowShortcut);
    bar->addSeparator();
    add(QStringLiteral("actionSettings"), tr("Settings…"), tr("Storm alerts, lock directories"),
        &MainWindow::openSettings);
}

void MainWindow::onSnapshot()
{
    const DashboardSnapshot& s = m_controller->snapshot();
    const bool empty = (s.status != HomeStatus::Ready) && s.holders.empty();
    m_emptyState->setText(emptyStateText(s));
    m_stack->setCurrentIndex(empty ? 0 : 1);

    if (!s.corruptFile.isEmpty()) {
        m_corruptBanner->setText(
            tr("<b>Corrupt file:</b> <tt>%1</tt> does not parse (%2). The dashboard leaves it "
               "untouched; until it is fixed what it holds is not shown. The next <tt>tollgate</tt> "
               "command moves a corrupt state aside and starts conservatively.")
                .arg(s.corruptFile.toHtmlEscaped(), s.corruptReason.toHtmlEscaped()));
        m_corruptBanner->show();
    } else if (s.status == HomeStatus::Unusable || !s.problem.isEmpty()) {
        m_corruptBanner->setText(
            tr("<b>Cannot read the Tollgate home:</b> %1").arg(s.problem.toHtmlEscaped()));
        m_corruptBanner->show();
    } else {
        m_corruptBanner->hide();
    }
    QString status = tr("Watching %1").arg(s.home);
    if (!s.lockDirProblems.isEmpty())
        status += QStringLiteral(" · ") + s.lockDirProblems.join(QStringLiteral("; "));
    status += tr(" · updated %1")
                  .arg(QDateTime::fromMSecsSinceEpoch(s.nowMs).toString(QStringLiteral("HH:mm:ss")));
    m_statusLabel->setText(status);
}

void MainWindow::fitProvidersView()
{
    // As tall as its rows (a few providers is the usual case), so the charts get the room.
    const int rows = std::clamp(m_controller->providers()->rowCount(), 2, 8);
    const int height = m_providersView->horizontalHeader()->sizeHint().height()
        + rows * m_providersView->verticalHeader()->defaultSectionSize() + 2 * m_providersView->frameWidth()
        + 4;
    m_providersView->setFixedHeight(height);
}

void MainWindow::onCharts()
{
    const qint64 now = m_controller->nowMs();
    m_usageChart->update(m_controller->usage(), now);
    m_rateLimitChart->update(m_controller->usage(), now);
}

void MainWindow::onAction(const ActionResult& result)
{
    if (result.needsConfirmation) {
        const QString cmd = result.commandLine.isEmpty() ? tr("(command line unknown)") : result.commandLine;
        const QString text
            = tr("%1 is held by pid %2, which is still running:\n%3\n\nForce-release it "
                 "anyway? The process keeps running and may still use what it thinks it holds.")
                  .arg(result.message)
                  .arg(result.pid)
                  .arg(cmd);
        // The answer names this holder: the worker re-checks that it is still the one there.
        if (m_confirm(tr("Force release"), text))
            m_controller->releaseHolder(result.holder, true);
        else
            showMessage(tr("Not released."), false);
        return;
    }
    showMessage(result.message, !result.ok, result.ok && result.hasLimitChange);
}

void MainWindow::onLimitChangeNeedsConfirmation(const LimitChange& change, const QStringList& warnings)
{
    const QString text = tr("%1 the limits of %2?\n\n%3\n\nCallers are held back only by the limits "
                            "you keep.")
                             .arg(change.undo ? tr("Undo the last change of") : tr("Change"), change.provider,
                                 warnings.join(QLatin1Char('\n')));
    if (m_confirm(tr("Change limits"), text))
        m_controller->applyLimitChange(change);
    else
        showMessage(tr("Limits of %1 not changed.").arg(change.provider), false);
}

void MainWindow::updateActions()
{
    const QString provider = selectedProvider();
    const ProvidersModel* providers = m_controller->providers();
    m_resumeAction->setEnabled(!provider.isEmpty() && providers->isPaused(provider));
    m_resetBackoffAction->setEnabled(!provider.isEmpty());
    const bool holder = !selectedHolder().isEmpty();
    m_releaseAction->setEnabled(holder);
    m_releaseButton->setEnabled(holder);
    m_undoAction->setEnabled(m_controller->canUndoLimitChange());
}

void MainWindow::onStorm(const StormDetector::Storm& storm)
{
    const auto& detector = m_controller->storms();
    const QString text = tr("429 storm on %1: %2 429s within %3 s, from %4.")
                             .arg(storm.provider)
                             .arg(storm.count)
                             .arg(detector.windowMs() / 1000)
                             .arg(storm.callers.join(QStringLiteral(", ")));
    if (m_tray->available())
        m_tray->alert(tr("Tollgate: 429 storm on %1").arg(storm.provider), text);
    else
        showAlert(text);
}

void MainWindow::onTrayState(TrayState state)
{
    QString tip;
    switch (state) {
    case TrayState::Normal:
        tip = tr("Tollgate: all normal");
        break;
    case TrayState::Backoff:
        tip = tr("Tollgate: backing off after 429s");
        break;
    case TrayState::Paused:
        tip = tr("Tollgate: paused");
        break;
    case TrayState::Storm:
        tip = tr("Tollgate: 429 storm");
        break;
    }
    m_tray->setState(state, tip);
    setWindowIcon(StateIcon::icon(state));
}

void MainWindow::showMessage(const QString& text, bool error, bool offerUndo)
{
    statusBar()->showMessage(text, 10000);
    m_undoButton->setVisible(offerUndo);
    if (error || offerUndo) {
        m_messageText->setText(text);
        m_messageBanner->show();
    } else {
        m_messageBanner->hide();
    }
}

void MainWindow::showAlert(const QString& text)
{
    m_alertText->setText(QStringLiteral("⚠ ") + text);
    m_alertBanner->show();
}

QString MainWindow::selectedProvider() const
{
    return m_providersView->selectedKey();
}

QString MainWindow::selectedHolder() const
{
    return m_holdersView->selectedKey();
}

void MainWindow::selectProvider(const QString& provider)
{
    m_providersView->selectKey(provider);
}

void MainWindow::selectHolder(const QString& key)
{
    m_holdersView->selectKey(key);
}

void MainWindow::pauseAll()
{
    m_controller->pause(QString(), QString());
}

void MainWindow::resumeAll()
{
    m_controller->resume(QString());
}

void MainWindow::pauseSelected()
{
    const auto choice = m_pausePrompt(m_controller->providers()->providerNames(), selectedProvider());
    if (choice)
        m_controller->pause(choice->provider, choice->reason);
}

void MainWindow::resumeSelected()
{
    // An empty provider would mean "all": never the meaning of "the selected one".
    const QString provider = selectedProvider();
    if (provider.isEmpty()) {
        showMessage(tr("Select a provider first."), true);
        return;
    }
    m_controller->resume(provider);
}

void MainWindow::resetBackoffSelected()
{
    const QString provider = selectedProvider();
    if (provider.isEmpty()) {
        showMessage(tr("Select a provider first."), true);
        return;
    }
    if (m_confirm(tr("Reset backoff"),
            tr("Reset the 429 backoff of %1?\n\nWaiting callers go on at once, although the provider asked "
               "them to "
               "slow down.")
                .arg(provider)))
        m_controller->resetBackoff(provider);
}

void MainWindow::releaseSelected()
{
    const QString key = selectedHolder();
    const HolderInfo* shown = key.isEmpty() ? nullptr : m_controller->holders()->holder(key);
    if (!shown) {
        showMessage(tr("Select a slot or lock file first."), true);
        return;
    }
    m_controller->releaseHolder(*shown, false);
}

void MainWindow::cleanStale()
{
    m_controller->cleanStale();
}

void MainWindow::undoLimitChange()
{
    m_controller->undoLimitChange();
}

void MainWindow::openSettings()
{
    SettingsDialog dialog(m_settings.stormThreshold(), m_settings.stormWindowSeconds(),
        m_controller->lockDirs(), m_settings.staleSeconds(), this);
    if (dialog.exec() != QDialog::Accepted)
        return;
    m_settings.setStorm(dialog.stormThreshold(), dialog.stormWindowSeconds());
    m_controller->setStormThreshold(dialog.stormThreshold(), qint64(dialog.stormWindowSeconds()) * 1000);
    m_settings.setStaleSeconds(dialog.staleSeconds());
    m_controller->setStaleSeconds(dialog.staleSeconds());
    applyLockDirs(dialog.lockDirs());
    m_settings.sync();
}

void MainWindow::applyLockDirs(const QStringList& dirs)
{
    m_settings.setLockDirs(dirs);
    m_controller->setLockDirs(dirs);
}

void MainWindow::quit()
{
    m_quitting = true;
    close();
    QApplication::quit();
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    m_settings.setGeometry(saveGeometry());
    m_settings.setWindowState(saveState());
    m_settings.sync();
    if (m_tray->available() && !m_quitting) {
        hide();
        m_tray->announceHiddenToTray(m_settings.path());
        event->ignore();
        return;
    }
    event->accept();
}

} // namespace tollgate::ui
