#include "mainwindow.h"

#include "callerusagemodel.h"
#include "capacitymodel.h"
#include "capacitypanel.h"
#include "chartspan.h"
#include "chartspanel.h"
#include "dashboardcontroller.h"
#include "eventsfiltermodel.h"
#include "eventsmodel.h"
#include "eventspanel.h"
#include "history/historyevent.h"
#include "holdersmodel.h"
#include "holderspanel.h"
#include "keyedtableview.h"
#include "learnedlimits.h"
#include "limitsmodel.h"
#include "pausedialog.h"
#include "providersmodel.h"
#include "providerspanel.h"
#include "ratelimitcallersmodel.h"
#include "ratelimitchart.h"
#include "settingsdialog.h"
#include "theme.h"
#include "traycontroller.h"
#include "usagebardelegate.h"
#include "usagechart.h"
#include "windowfit.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDateTime>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFile>
#include <QFileInfo>
#include <QFormLayout>
#include <QFrame>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>

namespace tollgate::ui {

namespace {

// The default ClassPromptHandler: a class's name, its model patterns and its first limits.
std::optional<LimitsModel::NewClass> askNewClass(const QString& provider, QWidget* parent)
{
    QDialog dialog(parent);
    dialog.setWindowTitle(QObject::tr("New model class of %1").arg(provider));
    auto* form = new QFormLayout(&dialog);
    auto* name = new QLineEdit(&dialog);
    name->setPlaceholderText(QStringLiteral("opus"));
    auto* patterns = new QLineEdit(&dialog);
    patterns->setPlaceholderText(QStringLiteral("claude-opus-4*, claude-opus-5*"));
    form->addRow(QObject::tr("&Name:"), name);
    form->addRow(QObject::tr("&Models (patterns):"), patterns);
    const std::pair<int, QString> fields[] = {
        { LimitsModel::Requests, QObject::tr("&Requests per window:") },
        { LimitsModel::Tokens, QObject::tr("&Tokens per window:") },
        { LimitsModel::InputTokens, QObject::tr("&Input tokens per window:") },
        { LimitsModel::OutputTokens, QObject::tr("&Output tokens per window:") },
        { LimitsModel::Window, QObject::tr("&Window (seconds):") },
        { LimitsModel::RequestsPerDay, QObject::tr("Requests per &day:") },
        { LimitsModel::TokensPerDay, QObject::tr("Tokens per d&ay:") },
    };
    QHash<int, QLineEdit*> edits;
    for (const auto& [column, label] : fields) {
        auto* e = new QLineEdit(&dialog);
        e->setPlaceholderText(
            column == LimitsModel::Window ? QObject::tr("the provider's") : QObject::tr("none"));
        form->addRow(label, e);
        edits.insert(column, e);
    }
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, &dialog);
    QObject::connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
    QObject::connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    form->addRow(buttons);
    if (dialog.exec() != QDialog::Accepted)
        return std::nullopt;
    LimitsModel::NewClass out;
    out.name = name->text();
    out.patterns = patterns->text();
    for (auto it = edits.cbegin(); it != edits.cend(); ++it)
        out.values.insert(it.key(), it.value()->text());
    return out;
}

// The text colour is set on the label too: a dark palette's light text on the banner's light
// background would be unreadable.
QString bannerStyle(const QString& name, const QString& style, const QString& textColor)
{
    return QStringLiteral("QFrame#%1 { %2 color: %3; border-radius: 4px; } QFrame#%1 QLabel { color: %3; }")
        .arg(name, style, textColor);
}

// A view's rows held still while a menu of it is open (KeyedTableView::freezeRows): the
// pointer is on the menu, not over the rows, yet the row it was opened on must not move.
class RowsHeld
{
public:
    explicit RowsHeld(KeyedTableView* view)
        : m_view(view)
    {
        m_view->freezeRows(true);
    }
    ~RowsHeld() { m_view->freezeRows(false); }
    RowsHeld(const RowsHeld&) = delete;
    RowsHeld& operator=(const RowsHeld&) = delete;

private:
    KeyedTableView* m_view;
};

QFrame* makeBanner(
    QWidget* parent, const QString& name, const QString& style, const QString& textColor, QLabel*& text)
{
    auto* frame = new QFrame(parent);
    frame->setObjectName(name);
    frame->setStyleSheet(bannerStyle(name, style, textColor));
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

// Panels that can be hidden, in the order of the View menu.
const char* const PANELS[] = { "capacity", "providers", "charts", "holders", "events" };

// Tollgate's own icon set (resources/icons.qrc); a build without it shows text only.
QIcon iconNamed(const QString& name)
{
    const QString path = QStringLiteral(":/icons/%1.svg").arg(name);
    return !name.isEmpty() && QFile::exists(path) ? QIcon(path) : QIcon();
}

QString withShortcut(const QString& tip, const QKeySequence& key)
{
    if (key.isEmpty())
        return tip;
    return QStringLiteral("%1 (%2)").arg(tip, key.toString(QKeySequence::NativeText));
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
    m_capacity = new CapacityModel(this);
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

    m_classPrompt = [this](const QString& provider) { return askNewClass(provider, this); };

    setWindowTitle(tr("Tollgate — %1").arg(options.home));
    setWindowIcon(StateIcon::icon(TrayState::Normal));
    buildActions();
    buildUi();
    buildMenus();

    connect(m_controller, &DashboardController::snapshotChanged, this, &MainWindow::onSnapshot);
    connect(m_controller, &DashboardController::chartsChanged, this, &MainWindow::onCharts);
    connect(m_controller, &DashboardController::actionFinished, this, &MainWindow::onAction);
    connect(m_controller, &DashboardController::limitChangeNeedsConfirmation, this,
        &MainWindow::onLimitChangeNeedsConfirmation);
    connect(m_controller, &DashboardController::undoAvailableChanged, this, &MainWindow::updateActions);
    connect(m_controller, &DashboardController::snapshotChanged, this, &MainWindow::updateActions);
    connect(m_controller, &DashboardController::holdersChanged, this, &MainWindow::updateActions);
    connect(m_providersView, &KeyedTableView::selectedKeyChanged, this, &MainWindow::updateActions);
    connect(m_holdersView, &KeyedTableView::selectedKeyChanged, this, &MainWindow::updateActions);
    updateActions();
    connect(m_controller, &DashboardController::stormStarted, this, &MainWindow::onStorm);
    connect(m_controller, &DashboardController::planAlert, this, &MainWindow::onPlanAlert);
    connect(m_controller, &DashboardController::trayStateChanged, this, &MainWindow::onTrayState);
    connect(m_controller, &DashboardController::loadedChanged, this, [this] {
        // The default layout was made before the tiles and rows it shares the height with.
        if (m_layoutOnLoad) {
            m_layoutOnLoad = false;
            resetLayout();
        }
        onCharts();
        Q_EMIT loaded();
    });
    connect(m_controller->providers(), &ProvidersModel::editRefused, this,
        [this](const QString&, const QString& reason) {
            showMessage(tr("Limit not changed: %1").arg(reason), true);
        });
    connect(m_controller->limits(), &LimitsModel::editRefused, this,
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

    // A geometry saved on a larger screen (or a screen since unplugged) is moved and shrunk
    // onto this one; the first run takes at most 90 % of the screen.
    const QRect available = screen() ? screen()->availableGeometry() : QRect();
    if (restoreGeometry(m_settings.geometry()))
        fitToScreen(available);
    else
        setGeometry(WindowFit::initial(QSize(1500, 1000), available, QMargins(0, 30, 0, 0)));
    restoreState(m_settings.windowState());
    restoreLayout();

    m_capacity->setSnapshot(m_controller->shownSnapshot(), m_controller->nowMs());
    connect(m_controller, &DashboardController::snapshotChanged, this, [this] {
        updateProviderScopes();
        m_capacity->setSnapshot(m_controller->shownSnapshot(), m_controller->nowMs());
        updatePauseToggle();
        updateLimitRates();
    });
    // The countdowns ("next free in 8 s") move with the clock between snapshots.
    auto* capacityTick = new QTimer(this);
    capacityTick->setInterval(DashboardController::TICK_MS);
    connect(capacityTick, &QTimer::timeout, this, [this] {
        if (isVisible()) // hidden in the tray: nobody reads the countdowns
            m_capacity->tick(m_controller->nowMs());
    });
    capacityTick->start();
    updatePauseToggle();
    m_controller->start();
}

MainWindow::~MainWindow()
{
    saveLayout();
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

void MainWindow::fitToScreen(const QRect& available)
{
    if (!available.isValid())
        return;
    const QRect outer = frameGeometry();
    const QRect inner = geometry();
    QMargins frame(inner.left() - outer.left(), inner.top() - outer.top(), outer.right() - inner.right(),
        outer.bottom() - inner.bottom());
    if (frame.isNull() && isVisible() == false
        && !QGuiApplication::platformName().startsWith(QLatin1String("offscreen")))
        frame = QMargins(0, 30, 0, 0); // not decorated yet: allow for a title bar
    const QRect fitted = WindowFit::fit(inner, available, frame);
    if (fitted != inner)
        setGeometry(fitted);
}

QStringList MainWindow::panelNames()
{
    QStringList out;
    for (const char* p : PANELS)
        out.append(QLatin1String(p));
    return out;
}

void MainWindow::setPanelVisible(const QString& panel, bool visible)
{
    QWidget* w = m_panels.value(panel);
    if (!w)
        return;
    if (!visible) {
        // Never hide the last panel: a window of nothing is not a state to end up in.
        int shown = 0;
        for (QWidget* p : std::as_const(m_panels))
            shown += p->isVisibleTo(this) || !p->isHidden() ? 1 : 0;
        if (shown <= 1 && !w->isHidden()) {
            if (QAction* a = m_panelActions.value(panel))
                a->setChecked(true);
            return;
        }
    }
    w->setVisible(visible);
    if (QAction* a = m_panelActions.value(panel); a && a->isChecked() != visible)
        a->setChecked(visible);
    // The charts box holds both charts: it is one panel; the bottom splitter goes when both go.
    const bool bottom = !m_panels.value(QStringLiteral("holders"))->isHidden()
        || !m_panels.value(QStringLiteral("events"))->isHidden();
    m_bottomSplitter->setVisible(bottom);
}

bool MainWindow::isPanelVisible(const QString& panel) const
{
    QWidget* w = m_panels.value(panel);
    return w && !w->isHidden();
}

QAction* MainWindow::makeAction(const QString& name, const QString& text, const QString& tip,
    const QKeySequence& shortcut, const QString& icon)
{
    auto* a = new QAction(text, this);
    a->setObjectName(name);
    if (!shortcut.isEmpty()) {
        a->setShortcut(shortcut);
        a->setShortcutContext(Qt::WindowShortcut);
    }
    a->setToolTip(withShortcut(tip, shortcut));
    a->setStatusTip(tip);
    a->setIcon(iconNamed(icon));
    addAction(a); // shortcuts work with the menu bar hidden too
    return a;
}

void MainWindow::buildActions()
{
    auto add = [this](const QString& name, const QString& text, const QString& tip, const QKeySequence& key,
                   const QString& icon, void (MainWindow::*slot)()) {
        QAction* a = makeAction(name, text, tip, key, icon);
        connect(a, &QAction::triggered, this, slot);
        return a;
    };
    m_togglePauseAction = add(QStringLiteral("actionTogglePause"), tr("Pause all"),
        tr("Make every caller wait, or let them go on when all is paused"), QKeySequence(),
        QStringLiteral("pause"), &MainWindow::togglePauseAll);
    m_togglePauseAction->setCheckable(true);
    m_pauseAllAction = add(QStringLiteral("actionPauseAll"), tr("Pause &all"), tr("Make every caller wait"),
        QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_P), QStringLiteral("pause"), &MainWindow::pauseAll);
    m_resumeAllAction
        = add(QStringLiteral("actionResumeAll"), tr("Resume a&ll"), tr("Let every caller go on"),
            QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R), QStringLiteral("resume"), &MainWindow::resumeAll);
    m_pauseAction
        = add(QStringLiteral("actionPause"), tr("&Pause…"), tr("Pause one provider or all, with a reason"),
            QKeySequence(Qt::CTRL | Qt::Key_P), QStringLiteral("pause"), &MainWindow::pauseSelected);
    m_resumeAction = add(QStringLiteral("actionResume"), tr("&Resume"), tr("Resume the selected provider"),
        QKeySequence(Qt::CTRL | Qt::Key_R), QStringLiteral("resume"), &MainWindow::resumeSelected);
    m_resetBackoffAction = add(QStringLiteral("actionResetBackoff"), tr("Reset &backoff…"),
        tr("End the selected provider's 429 backoff now"), QKeySequence(Qt::CTRL | Qt::Key_B),
        QStringLiteral("undo"), &MainWindow::resetBackoffSelected);
    m_editLimitAction
        = add(QStringLiteral("actionEditLimit"), tr("&Edit limit"), tr("Edit the selected provider's limit"),
            QKeySequence(Qt::Key_F2), QString(), &MainWindow::editSelectedLimit);
    m_releaseAction = add(QStringLiteral("actionRelease"), tr("&Force release…"),
        tr("Release the selected slot or lock file (asks first when its holder still runs)"),
        QKeySequence(QKeySequence::Delete), QStringLiteral("release"), &MainWindow::releaseSelected);
    m_cleanStaleAction
        = add(QStringLiteral("actionCleanStale"), tr("&Clean stale"), tr("Release every dead holder at once"),
            QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_K), QStringLiteral("clean"), &MainWindow::cleanStale);
    m_undoAction = add(QStringLiteral("actionUndoLimit"), tr("&Undo limit change"),
        tr("Restore the limits as they were before your last change"), QKeySequence(QKeySequence::Undo),
        QStringLiteral("undo"), &MainWindow::undoLimitChange);
    m_refreshAction = add(QStringLiteral("actionRefresh"), tr("&Refresh"), tr("Read the home again now"),
        QKeySequence(Qt::Key_F5), QStringLiteral("refresh"), &MainWindow::refresh);
    m_findAction = add(QStringLiteral("actionFindEvents"), tr("&Find in events"), tr("Filter the event log"),
        QKeySequence(Qt::CTRL | Qt::Key_F), QStringLiteral("filter"), &MainWindow::findInEvents);
    m_clearScopeAction = add(QStringLiteral("actionClearEventScope"), tr("Show events of &everyone"),
        tr("Clear the provider and caller filter of the event log"),
        QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_F), QString(), &MainWindow::clearEventScope);
    m_resetZoomAction = add(QStringLiteral("actionResetZoom"), tr("Reset chart &zoom"),
        tr("Show the charts' whole span again"), QKeySequence(Qt::CTRL | Qt::Key_0), QString(),
        &MainWindow::resetChartZoom);
    m_settingsAction
        = add(QStringLiteral("actionSettings"), tr("&Settings…"), tr("Storm alerts, lock directories"),
            QKeySequence(Qt::CTRL | Qt::Key_Comma), QStringLiteral("settings"), &MainWindow::openSettings);
    m_quitAction = add(QStringLiteral("actionQuit"), tr("&Quit"), tr("Close the dashboard"),
        QKeySequence(Qt::CTRL | Qt::Key_Q), QString(), &MainWindow::quit);

    auto* bar = addToolBar(tr("Actions"));
    bar->setObjectName(QStringLiteral("actionsToolBar"));
    bar->setMovable(false);
    bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    // Small icons beside the text: the style's default (24 px) made the bar taller than the
    // text needs, and at 1280x720 every pixel of height goes to the tables and charts.
    bar->setIconSize(QSize(16, 16));
    // The provider view: every panel shows one provider in full, or all of them.
    auto* scopeLabel = new QLabel(tr("Pr&ovider:"), bar);
    scopeLabel->setContentsMargins(4, 0, 4, 0);
    m_providerScope = new QComboBox(bar);
    m_providerScope->setObjectName(QStringLiteral("providerScope"));
    m_providerScope->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_providerScope->setToolTip(tr("Show one provider in full — its tile, limits, callers, 429s, holders and "
                                   "events — or every provider (their limits are never summed)"));
    m_providerScope->addItem(tr("All providers"), QString());
    scopeLabel->setBuddy(m_providerScope);
    connect(m_providerScope, &QComboBox::activated, this,
        [this](int i) { m_controller->setProviderScope(m_providerScope->itemData(i).toString()); });
    bar->addWidget(scopeLabel);
    bar->addWidget(m_providerScope);
    bar->addSeparator();
    bar->addAction(m_togglePauseAction);
    bar->addSeparator();
    bar->addAction(m_pauseAction);
    bar->addAction(m_resumeAction);
    bar->addAction(m_resetBackoffAction);
    bar->addSeparator();
    bar->addAction(m_releaseAction);
    bar->addAction(m_cleanStaleAction);
    bar->addSeparator();
    bar->addAction(m_undoAction);
    bar->addAction(m_refreshAction);
    bar->addAction(m_settingsAction);
    // The toolbar names them without the mnemonic ampersands and trailing dots of the menu.
    for (QAction* a : bar->actions()) {
        QWidget* w = bar->widgetForAction(a);
        if (w && !a->objectName().isEmpty()) // not the Provider box and its label
            w->setObjectName(a->objectName() + QStringLiteral("Button"));
    }
}

void MainWindow::buildMenus()
{
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(m_settingsAction);
    file->addSeparator();
    file->addAction(m_quitAction);
    QMenu* actions = menuBar()->addMenu(tr("&Actions"));
    actions->addAction(m_pauseAllAction);
    actions->addAction(m_resumeAllAction);
    actions->addSeparator();
    actions->addAction(m_pauseAction);
    actions->addAction(m_resumeAction);
    actions->addAction(m_resetBackoffAction);
    actions->addAction(m_editLimitAction);
    actions->addAction(m_undoAction);
    actions->addSeparator();
    actions->addAction(m_releaseAction);
    actions->addAction(m_cleanStaleAction);
    QMenu* view = menuBar()->addMenu(tr("&View"));
    view->addAction(m_refreshAction);
    view->addAction(m_findAction);
    view->addAction(m_clearScopeAction);
    view->addAction(m_resetZoomAction);
    QAction* resetLayoutAction = view->addAction(tr("Reset &layout"));
    resetLayoutAction->setObjectName(QStringLiteral("actionResetLayout"));
    connect(resetLayoutAction, &QAction::triggered, this, &MainWindow::resetLayout);
    view->addSeparator();
    const QStringList titles
        = { tr("&Capacity"), tr("Pro&viders"), tr("C&harts"), tr("H&olders"), tr("E&vents") };
    const QStringList names = panelNames();
    for (int i = 0; i < names.size(); ++i) {
        const QString name = names[i];
        QAction* a = view->addAction(titles[i]);
        a->setObjectName(QStringLiteral("actionPanel_") + name);
        a->setCheckable(true);
        a->setChecked(true);
        a->setShortcut(QKeySequence(Qt::ALT | static_cast<Qt::Key>(Qt::Key_1 + i)));
        a->setToolTip(withShortcut(tr("Show or hide this panel"), a->shortcut()));
        addAction(a);
        connect(a, &QAction::toggled, this, [this, name](bool on) { setPanelVisible(name, on); });
        m_panelActions.insert(name, a);
    }
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    QAction* keys = help->addAction(tr("&Keyboard shortcuts"));
    keys->setObjectName(QStringLiteral("actionShortcuts"));
    keys->setShortcut(QKeySequence(Qt::Key_F1));
    addAction(keys);
    connect(keys, &QAction::triggered, this, &MainWindow::showShortcuts);
}

QString MainWindow::shortcutsText() const
{
    // Every action of the window that has a shortcut, from the actions themselves (a list
    // written by hand would drift from them).
    QStringList lines;
    for (const QAction* a : findChildren<QAction*>()) {
        if (a->shortcut().isEmpty() || a->text().isEmpty())
            continue;
        const QString line = QStringLiteral("%1\t%2").arg(
            a->shortcut().toString(QKeySequence::NativeText), QString(a->text()).remove(QLatin1Char('&')));
        if (!lines.contains(line))
            lines.append(line);
    }
    // Keys of a widget rather than an action: the Provider box's mnemonic, and the zoom keys
    // of a chart that has the focus (TimeChartView's keyPressEvent).
    lines.append(tr("Alt+O\tChoose the provider shown (all, or one in full)"));
    lines.append(tr("+ / -\tZoom the focused chart in / out (0: whole span)"));
    lines.sort(Qt::CaseInsensitive);
    return lines.join(QLatin1Char('\n'));
}

void MainWindow::showShortcuts()
{
    QDialog dialog(this);
    dialog.setWindowTitle(tr("Keyboard shortcuts"));
    auto* layout = new QVBoxLayout(&dialog);
    auto* table = new QLabel(&dialog);
    table->setObjectName(QStringLiteral("shortcutsList"));
    table->setTextFormat(Qt::PlainText);
    table->setTextInteractionFlags(Qt::TextSelectableByMouse);
    table->setText(shortcutsText());
    layout->addWidget(table);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, &dialog);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    layout->addWidget(buttons);
    dialog.exec();
}

void MainWindow::buildUi()
{
    auto* central = new QWidget(this);
    auto* layout = new QVBoxLayout(central);
    layout->setContentsMargins(6, 4, 6, 4);
    layout->setSpacing(4);

    m_corruptBanner = new QLabel(central);
    m_corruptBanner->setObjectName(QStringLiteral("corruptBanner"));
    m_corruptBanner->setWordWrap(true);
    m_corruptBanner->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_corruptBanner->setStyleSheet(QStringLiteral(
        "QLabel { background: #fde2e1; color: #7a1010; border: 1px solid #e0a0a0; border-radius: 4px; "
        "padding: 6px 10px; }"));
    m_corruptBanner->hide();
    m_alertBanner = makeBanner(central, QStringLiteral("alertBanner"),
        QStringLiteral("background: #fff0d6; border: 1px solid #e0b060;"), QStringLiteral("#6a3b00"),
        m_alertText);
    m_messageBanner = makeBanner(central, QStringLiteral("messageBanner"),
        QStringLiteral("background: #eef3fb; border: 1px solid #a8bfe0;"), QStringLiteral("#1a2a40"),
        m_messageText);
    m_undoButton = new QPushButton(tr("Undo"), m_messageBanner);
    m_undoButton->setObjectName(QStringLiteral("undoButton"));
    m_undoButton->setToolTip(withShortcut(
        tr("Restore the limits as they were before your last change"), QKeySequence(QKeySequence::Undo)));
    m_undoButton->hide();
    connect(m_undoButton, &QPushButton::clicked, this, &MainWindow::undoLimitChange);
    qobject_cast<QHBoxLayout*>(m_messageBanner->layout())->insertWidget(1, m_undoButton, 0, Qt::AlignTop);
    layout->addWidget(m_corruptBanner);
    layout->addWidget(m_alertBanner);
    layout->addWidget(m_messageBanner);

    m_stack = new QStackedWidget(central);
    // In a scroll area: its command lines do not wrap, and must not set the window's width.
    auto* emptyScroll = new QScrollArea(m_stack);
    emptyScroll->setWidgetResizable(true);
    emptyScroll->setFrameShape(QFrame::NoFrame);
    m_emptyState = new QLabel(emptyScroll);
    m_emptyState->setObjectName(QStringLiteral("emptyState"));
    m_emptyState->setWordWrap(true);
    m_emptyState->setTextFormat(Qt::RichText);
    m_emptyState->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    m_emptyState->setMargin(24);
    m_emptyState->setTextInteractionFlags(Qt::TextSelectableByMouse);
    DashboardSnapshot initial;
    initial.home = m_controller->home();
    m_emptyState->setText(emptyStateText(initial));
    emptyScroll->setWidget(m_emptyState);
    m_stack->addWidget(emptyScroll);

    auto* page = new QSplitter(Qt::Vertical, m_stack);
    page->setObjectName(QStringLiteral("dashboardPage"));
    page->setChildrenCollapsible(true);
    m_mainSplitter = page;

    // Capacity at a glance.
    m_capacityPanel = new CapacityPanel(m_capacity, page);
    connect(m_capacityPanel, &CapacityPanel::contextMenuRequested, this,
        [this](const QString& provider, const QPoint& global) {
            selectProvider(provider);
            auto menu = providerMenu(provider);
            menu->exec(global);
        });

    // The panels build their own widgets; the window wires what they ask for to the
    // controller, its confirmations and the event scope.
    auto* providersBox = new ProvidersPanel(m_controller->providers(), m_controller->limits(), page);
    m_providersTabs = providersBox->tabs();
    m_providersView = providersBox->providersView();
    m_limitsView = providersBox->limitsView();
    connect(
        m_controller->providers(), &QAbstractItemModel::rowsInserted, this, &MainWindow::fitProvidersView);
    connect(m_controller->providers(), &QAbstractItemModel::rowsRemoved, this, &MainWindow::fitProvidersView);
    connect(m_controller->limits(), &QAbstractItemModel::rowsInserted, this, &MainWindow::fitProvidersView);
    connect(m_controller->limits(), &QAbstractItemModel::rowsRemoved, this, &MainWindow::fitProvidersView);

    auto* charts = new ChartsPanel(m_controller->callerUsage(), m_controller->rateLimitCallers(),
        m_settings.usageSpanMs(), m_settings.rateLimitSpanMs(), page);
    m_chartsSplitter = charts;
    m_usageChart = charts->usageChart();
    m_rateLimitChart = charts->rateLimitChart();
    m_callersView = charts->callersView();
    m_rateLimitView = charts->rateLimitView();
    connect(charts, &ChartsPanel::usageSpanChanged, this,
        [this](qint64 span) { m_settings.setUsageSpanMs(span); });
    connect(charts, &ChartsPanel::rateLimitSpanChanged, this,
        [this](qint64 span) { m_settings.setRateLimitSpanMs(span); });
    connect(charts, &ChartsPanel::chartsChanged, this, &MainWindow::onCharts);
    connect(m_usageChart, &TimeChartView::scopeRequested, this, &MainWindow::showEventsOf);

    auto* bottom = new QSplitter(Qt::Horizontal, page);
    bottom->setObjectName(QStringLiteral("bottomSplitter"));
    m_bottomSplitter = bottom;
    auto* holdersBox = new HoldersPanel(m_controller->holders(), m_releaseAction, m_cleanStaleAction, bottom);
    m_holdersPanel = holdersBox;
    m_holdersView = holdersBox->view();
    m_releaseButton = holdersBox->releaseButton();
    connect(holdersBox, &HoldersPanel::releaseRequested, this, &MainWindow::releaseSelected);
    connect(holdersBox, &HoldersPanel::cleanRequested, this, &MainWindow::cleanStale);
    // Delete releases a holder only while the holders table has the focus: pressed in the
    // event log or a text field it must not release the row selected elsewhere.
    removeAction(m_releaseAction);
    m_releaseAction->setShortcutContext(Qt::WidgetWithChildrenShortcut);
    m_holdersView->addAction(m_releaseAction);

    auto* eventsBox = new EventsPanel(
        m_controller->filteredEvents(), m_findAction->shortcut(), m_clearScopeAction->toolTip(), bottom);
    m_eventsView = eventsBox->view();
    m_eventType = eventsBox->typeBox();
    m_eventText = eventsBox->textField();
    m_scopeChip = eventsBox->scopeChip();
    m_newEventsChip = eventsBox->newEventsChip();
    connect(eventsBox, &EventsPanel::clearScopeRequested, this, &MainWindow::clearEventScope);
    connect(eventsBox, &EventsPanel::followRequested, this, &MainWindow::followEvents);
    connect(
        m_controller->filteredEvents(), &EventsFilterModel::scopeChanged, this, &MainWindow::updateScopeChip);
    connect(m_controller->filteredEvents(), &QAbstractItemModel::rowsInserted, this,
        [this](const QModelIndex&, int first, int last) { onEventsInserted(last - first + 1); });
    connect(
        m_eventsView->verticalScrollBar(), &QScrollBar::valueChanged, this, &MainWindow::onEventsScrolled);
    connect(
        m_controller->filteredEvents(), &QAbstractItemModel::modelReset, this, &MainWindow::onEventsScrolled);

    page->addWidget(m_capacityPanel);
    page->addWidget(providersBox);
    page->addWidget(charts);
    page->addWidget(bottom);
    page->setStretchFactor(0, 0);
    page->setStretchFactor(1, 0);
    page->setStretchFactor(2, 1);
    page->setStretchFactor(3, 1);
    m_stack->addWidget(page);
    layout->addWidget(m_stack, 1);
    fitProvidersView();
    setCentralWidget(central);

    m_panels.insert(QStringLiteral("capacity"), m_capacityPanel);
    m_panels.insert(QStringLiteral("providers"), providersBox);
    m_panels.insert(QStringLiteral("charts"), charts);
    m_panels.insert(QStringLiteral("holders"), holdersBox);
    m_panels.insert(QStringLiteral("events"), eventsBox);

    m_statusLabel = new QLabel(this);
    m_statusLabel->setObjectName(QStringLiteral("statusLabel"));
    // A long home path must not set the window's minimum width: the label is clipped instead
    // and its tooltip has the whole text.
    m_statusLabel->setMinimumWidth(160);
    statusBar()->addPermanentWidget(m_statusLabel);
    m_statusLabel->setText(tr("Watching %1").arg(m_controller->home()));

    connect(m_providersView, &QWidget::customContextMenuRequested, this, [this](const QPoint& pos) {
        const QModelIndex index = m_providersView->indexAt(pos);
        if (!index.isValid())
            return;
        const QString provider = m_controller->providers()->keyAt(index.row());
        m_providersView->selectKey(provider);
        if (auto menu = providerMenu(provider); !menu->isEmpty()) {
            const RowsHeld held(m_providersView);
            menu->exec(m_providersView->viewport()->mapToGlobal(pos));
        }
    });
    connect(m_limitsView, &QWidget::customContextMenuRequested, this, [this](const QPoint& pos) {
        const QModelIndex index = m_limitsView->indexAt(pos);
        if (!index.isValid())
            return;
        const QString key = index.data(KeyedTableModel::KeyRole).toString();
        m_limitsView->selectKey(key);
        if (auto menu = limitsMenu(key); !menu->isEmpty()) {
            const RowsHeld held(m_limitsView);
            menu->exec(m_limitsView->viewport()->mapToGlobal(pos));
        }
    });
    connect(m_holdersView, &QWidget::customContextMenuRequested, this, [this](const QPoint& pos) {
        const QModelIndex index = m_holdersView->indexAt(pos);
        if (!index.isValid())
            return;
        const QString key = index.data(KeyedTableModel::KeyRole).toString();
        m_holdersView->selectKey(key);
        if (auto menu = holderMenu(key); !menu->isEmpty()) {
            const RowsHeld held(m_holdersView);
            menu->exec(m_holdersView->viewport()->mapToGlobal(pos));
        }
    });
    connectScopeMenu(m_callersView, CallerUsageModel::Provider, CallerUsageModel::Caller);
    connectScopeMenu(m_rateLimitView, RateLimitCallersModel::Provider, RateLimitCallersModel::Caller);
    connectScopeMenu(m_eventsView, EventsModel::Provider, EventsModel::Caller);

    // Keyboard order: the panels top to bottom (each panel orders its own).
    setTabOrder(m_providersView, charts->usageKind());
    setTabOrder(m_rateLimitView, m_holdersView);
    setTabOrder(holdersBox->cleanButton(), m_eventType);
}

void MainWindow::connectScopeMenu(KeyedTableView* view, int providerColumn, int callerColumn)
{
    view->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(view, &QWidget::customContextMenuRequested, this,
        [this, view, providerColumn, callerColumn](const QPoint& pos) {
            const QModelIndex index = view->indexAt(pos);
            if (!index.isValid())
                return;
            const QString provider
                = providerColumn >= 0 ? index.siblingAtColumn(providerColumn).data().toString() : QString();
            const QString caller
                = callerColumn >= 0 ? index.siblingAtColumn(callerColumn).data().toString() : QString();
            if (auto menu = scopeMenu(provider, caller); !menu->isEmpty()) {
                const RowsHeld held(view);
                menu->exec(view->viewport()->mapToGlobal(pos));
            }
        });
}

std::unique_ptr<QMenu> MainWindow::scopeMenu(const QString& provider, const QString& caller)
{
    auto menu = std::make_unique<QMenu>(this);
    // "(all)" is how the log shows an event of every provider: no provider to narrow to.
    const bool realProvider = !provider.isEmpty() && provider != EventsModel::tr("(all)");
    if (realProvider) {
        QAction* a = menu->addAction(tr("Show events of provider %1").arg(provider));
        a->setObjectName(QStringLiteral("scopeProvider"));
        connect(a, &QAction::triggered, this, [this, provider] { showEventsOf(provider, QString()); });
    }
    if (!caller.isEmpty()) {
        QAction* a = menu->addAction(tr("Show events of caller %1").arg(caller));
        a->setObjectName(QStringLiteral("scopeCaller"));
        connect(a, &QAction::triggered, this, [this, caller] { showEventsOf(QString(), caller); });
    }
    if (realProvider && !caller.isEmpty()) {
        QAction* a = menu->addAction(tr("Show events of caller %1 at %2").arg(caller, provider));
        a->setObjectName(QStringLiteral("scopeBoth"));
        connect(a, &QAction::triggered, this, [this, provider, caller] { showEventsOf(provider, caller); });
    }
    const EventsFilterModel* f = m_controller->filteredEvents();
    if (!f->providerFilter().isEmpty() || !f->callerFilter().isEmpty())
        menu->addAction(m_clearScopeAction);
    return menu;
}

std::unique_ptr<QMenu> MainWindow::providerMenu(const QString& provider)
{
    auto menu = std::make_unique<QMenu>(this);
    const ProvidersModel* model = m_controller->providers();
    if (model->rowOf(provider) < 0)
        return menu;
    if (model->isPaused(provider))
        menu->addAction(m_resumeAction);
    else
        menu->addAction(m_pauseAction);
    if (model->inBackoff(provider))
        menu->addAction(m_resetBackoffAction);
    menu->addAction(m_editLimitAction);
    menu->addAction(tr("All limits and classes of %1…").arg(provider), this, [this, provider] {
        showLimitsTab();
        m_limitsView->selectKey(LimitsModel::keyOf(provider));
    });
    if (m_controller->providerScope().isEmpty()) {
        QAction* only = menu->addAction(
            tr("Show only %1").arg(provider), this, [this, provider] { showProvider(provider); });
        only->setObjectName(QStringLiteral("showOnlyProvider"));
    } else {
        QAction* all = menu->addAction(tr("Show all providers"), this, [this] { showProvider(QString()); });
        all->setObjectName(QStringLiteral("showAllProviders"));
    }
    addLearningActions(menu.get(), provider);
    auto scope = scopeMenu(provider, QString());
    if (!scope->isEmpty())
        menu->addSeparator();
    for (QAction* a : scope->actions()) {
        if (a->parent() == scope.get())
            a->setParent(menu.get());
        menu->addAction(a);
    }
    return menu;
}

std::unique_ptr<QMenu> MainWindow::limitsMenu(const QString& key)
{
    auto menu = std::make_unique<QMenu>(this);
    if (m_controller->limits()->rowOf(key) < 0)
        return menu;
    const QString provider = LimitsModel::providerOfKey(key);
    const QString className = LimitsModel::classOfKey(key);
    QAction* add = menu->addAction(
        tr("Add a model class to %1…").arg(provider), this, [this, provider] { addClassTo(provider); });
    add->setObjectName(QStringLiteral("actionAddClass"));
    if (!className.isEmpty()) {
        QAction* remove = menu->addAction(tr("Remove class %1 of %2…").arg(className, provider), this,
            [this, provider, className] { removeClass(provider, className); });
        remove->setObjectName(QStringLiteral("actionRemoveClass"));
    }
    menu->addSeparator();
    addLearningActions(menu.get(), provider);
    return menu;
}

void MainWindow::addLearningActions(QMenu* menu, const QString& provider)
{
    const std::optional<ProviderLimits> limits = m_controller->providers()->limitsOf(provider);
    if (!limits)
        return; // a provider only the state knows: nothing to follow or adopt into
    QAction* follow = menu->addAction(tr("Follow the provider's limits"));
    follow->setObjectName(QStringLiteral("actionFollowProvider"));
    follow->setCheckable(true);
    follow->setChecked(limits->learn);
    follow->setToolTip(tr("The per-window limits you have not set take the figures the provider's answers "
                          "state (read by tollgate proxy); turning it off keeps what was learned, as yours"));
    connect(follow, &QAction::toggled, this, [this, provider](bool on) { setLearning(provider, on); });
    QAction* adopt = menu->addAction(tr("Use the provider's limits…"));
    adopt->setObjectName(QStringLiteral("actionAdoptProviderLimits"));
    // Enabled only when the provider stated figures that differ from the limits set.
    const auto adoption = m_controller->adoptionOf(provider);
    adopt->setEnabled(adoption.has_value());
    adopt->setToolTip(adoption
            ? tr("Set the limits the provider's answers last stated: %1")
                  .arg(LearnedLimits::changeLines(adoption->lesson).join(QStringLiteral(", ")))
            : tr("The provider has stated no limits that differ from these"));
    connect(adopt, &QAction::triggered, this, [this, provider] { adoptProviderLimits(provider); });
}

void MainWindow::setLearning(const QString& provider, bool on)
{
    m_controller->setLearning(provider, on);
}

void MainWindow::adoptProviderLimits(const QString& provider)
{
    // Computed afresh from the limits and state shown now, not when the menu opened.
    const auto adoption = m_controller->adoptionOf(provider);
    if (!adoption) {
        showMessage(
            tr("%1: the limits are already the provider's (or it stated none).").arg(provider), false);
        return;
    }
    QString text = tr("Use the limits the provider's answers last stated for %1?\n\n%2")
                       .arg(provider, LearnedLimits::changeLines(adoption->lesson).join(QLatin1Char('\n')));
    const QStringList warnings = adoption->change.warnings();
    if (!warnings.isEmpty())
        text += tr("\n\nMind:\n%1").arg(warnings.join(QLatin1Char('\n')));
    text += tr("\n\nThey become your limits (not followed further). Callers are held back only by the "
               "limits you keep.");
    if (!m_confirm(tr("Use the provider's limits"), text)) {
        showMessage(tr("Limits of %1 not changed.").arg(provider), false);
        return;
    }
    // Compare-and-set on the limits shown: a change made since is reported, never overwritten.
    m_controller->applyLimitChange(adoption->change);
}

void MainWindow::showLimitsTab()
{
    setPanelVisible(QStringLiteral("providers"), true);
    m_providersTabs->setCurrentWidget(m_limitsView);
}

void MainWindow::addClassTo(const QString& provider)
{
    const std::optional<LimitsModel::NewClass> added = m_classPrompt(provider);
    if (!added)
        return;
    if (m_controller->limits()->addClass(provider, *added))
        showLimitsTab();
}

void MainWindow::removeClass(const QString& provider, const QString& className)
{
    // A class removed takes its limits along: LimitChange::warnings() asks through m_confirm.
    m_controller->limits()->removeClass(provider, className);
}

std::unique_ptr<QMenu> MainWindow::holderMenu(const QString& key)
{
    auto menu = std::make_unique<QMenu>(this);
    const HolderInfo* holder = m_controller->holders()->holder(key);
    if (!holder)
        return menu;
    menu->addAction(m_releaseAction);
    if (m_controller->holders()->deadCount() > 0)
        menu->addAction(m_cleanStaleAction);
    auto scope = scopeMenu(holder->provider, holder->kind == HolderKind::Slot ? holder->who : QString());
    if (!scope->isEmpty())
        menu->addSeparator();
    for (QAction* a : scope->actions()) {
        if (a->parent() == scope.get())
            a->setParent(menu.get());
        menu->addAction(a);
    }
    return menu;
}

void MainWindow::showEventsOf(const QString& provider, const QString& caller)
{
    EventsFilterModel* f = m_controller->filteredEvents();
    f->setProviderFilter(provider);
    f->setCallerFilter(caller);
    setPanelVisible(QStringLiteral("events"), true);
    followEvents();
}

void MainWindow::clearEventScope()
{
    showEventsOf(QString(), QString());
}

void MainWindow::updateScopeChip()
{
    const EventsFilterModel* f = m_controller->filteredEvents();
    QStringList parts;
    if (!f->providerFilter().isEmpty())
        parts.append(tr("provider %1").arg(f->providerFilter()));
    if (!f->callerFilter().isEmpty())
        parts.append(tr("caller %1").arg(f->callerFilter()));
    m_scopeChip->setText(parts.join(QStringLiteral(", ")) + QStringLiteral("  ✕"));
    m_scopeChip->setVisible(!parts.isEmpty());
    m_clearScopeAction->setEnabled(!parts.isEmpty());
}

void MainWindow::onEventsInserted(int count)
{
    if (m_eventsView->isFollowingEnd())
        return;
    m_newEvents += count;
    m_newEventsChip->setText(m_newEvents == 1 ? tr("1 new event ↓") : tr("%1 new events ↓").arg(m_newEvents));
    m_newEventsChip->show();
}

void MainWindow::onEventsScrolled()
{
    if (!m_eventsView->isFollowingEnd() || m_newEvents == 0)
        return;
    m_newEvents = 0;
    m_newEventsChip->hide();
}

void MainWindow::followEvents()
{
    m_eventsView->scrollToBottom();
    m_newEvents = 0;
    m_newEventsChip->hide();
}

void MainWindow::togglePauseAll()
{
    if (m_controller->snapshot().state.pausedAll)
        resumeAll();
    else
        pauseAll();
    updatePauseToggle(); // the state, not the click, decides what it shows
}

void MainWindow::updatePauseToggle()
{
    const bool paused = m_controller->snapshot().state.pausedAll;
    m_togglePauseAction->setChecked(paused);
    m_togglePauseAction->setText(paused ? tr("Resume all") : tr("Pause all"));
    // Set only when it changes: setIcon always emits changed(), which repaints the tool bar's
    // button on every snapshot.
    if (m_pauseToggleIcon != int(paused)) {
        m_pauseToggleIcon = int(paused);
        m_togglePauseAction->setIcon(
            iconNamed(paused ? QStringLiteral("state-paused") : QStringLiteral("pause")));
    }
    const QAction* target = paused ? m_resumeAllAction : m_pauseAllAction;
    m_togglePauseAction->setToolTip(withShortcut(
        paused ? tr("Everything is paused: let every caller go on") : tr("Make every caller wait"),
        target->shortcut()));
}

void MainWindow::updateProviderScopes()
{
    // Rebuilt only when the providers change: a rebuild while its list is open would close it.
    const QStringList names = m_controller->providerNames();
    QStringList shown;
    for (int i = 1; i < m_providerScope->count(); ++i)
        shown.append(m_providerScope->itemData(i).toString());
    QString scope = m_controller->providerScope();
    if (!scope.isEmpty() && !names.contains(scope)) {
        scope.clear(); // its provider is gone (limits removed, state reset): back to all
        m_controller->setProviderScope(scope); // re-enters through snapshotChanged
        return;
    }
    if (names != shown) {
        const QSignalBlocker quiet(m_providerScope);
        while (m_providerScope->count() > 1)
            m_providerScope->removeItem(1);
        for (const QString& name : names)
            m_providerScope->addItem(name, name);
    }
    m_providerScope->setCurrentIndex(std::max(0, m_providerScope->findData(scope)));
    const QString title
        = scope.isEmpty() ? tr("Holders — slots and lock files") : tr("Holders — slots of %1").arg(scope);
    if (m_holdersPanel->title() != title)
        m_holdersPanel->setTitle(title);
}

void MainWindow::showProvider(const QString& provider)
{
    m_controller->setProviderScope(provider);
}

void MainWindow::updateLimitRates()
{
    // The usage chart stacks every provider's callers. Its line is a provider's limit, as the
    // sustained rate it allows (limit with headroom over its window) — only while there is one
    // provider: the sum of several providers' limits is a limit that exists nowhere (issue 28:
    // 40/min and 100/min read "70 per 30 s"), and no one of them bounds the sum of all traffic.
    const auto& providers = m_controller->shownSnapshot().limits.providers();
    double requests = 0;
    double tokens = 0;
    if (providers.size() == 1) {
        const ProviderLimits& l = providers.begin()->second;
        const double seconds = static_cast<double>(l.windowMs) / 1000.0;
        if (seconds > 0 && l.requests)
            requests = static_cast<double>(l.effective(*l.requests)) / seconds;
        if (seconds > 0 && l.tokens)
            tokens = static_cast<double>(l.effective(*l.tokens)) / seconds;
    }
    m_usageChart->setLimitRates(requests, tokens);
}

void MainWindow::editSelectedLimit()
{
    // F2 edits the selected cell, and only it: a cell that is no limit is not swapped for one
    // (it used to fall back to the requests limit, so a user fixing tokens set requests).
    const QString pick = tr("Select the limit to edit (a cell of its column), then press F2.");
    if (m_providersTabs->currentWidget() == m_limitsView && isPanelVisible(QStringLiteral("providers"))) {
        const QModelIndex index = m_limitsView->currentIndex();
        if (m_limitsView->model()->rowCount() == 0) {
            showMessage(tr("No provider has limits yet."), true);
            return;
        }
        if (!index.isValid() || !(index.flags() & Qt::ItemIsEditable)) {
            showMessage(pick, true);
            return;
        }
        m_limitsView->setFocus();
        m_limitsView->edit(index);
        return;
    }
    QString provider = selectedProvider();
    if (provider.isEmpty() && m_controller->providers()->rowCount() == 1)
        provider = m_controller->providers()->keyAt(0);
    if (provider.isEmpty()) {
        showMessage(tr("Select a provider first."), true);
        return;
    }
    setPanelVisible(QStringLiteral("providers"), true);
    // The selected cell's column, read before selectKey (which makes column 0 current).
    const QModelIndex current = m_providersView->currentIndex();
    const int column = current.isValid() ? current.column() : -1;
    m_providersView->selectKey(provider);
    const int row = m_providersView->rowOfKey(provider);
    const QModelIndex index = m_providersView->model()->index(row, column);
    if (column < 0 || !(index.flags() & Qt::ItemIsEditable)) {
        showMessage(pick, true);
        return;
    }
    m_providersView->setFocus();
    m_providersView->setCurrentIndex(index);
    m_providersView->edit(index);
}

void MainWindow::findInEvents()
{
    setPanelVisible(QStringLiteral("events"), true);
    m_eventText->setFocus(Qt::ShortcutFocusReason);
    m_eventText->selectAll();
}

void MainWindow::refresh()
{
    m_controller->refreshNow();
    statusBar()->showMessage(tr("Refreshing…"), 2000);
}

void MainWindow::resetChartZoom()
{
    m_usageChart->resetZoom();
    m_rateLimitChart->resetZoom();
}

void MainWindow::saveLayout()
{
    m_settings.setGeometry(saveGeometry());
    m_settings.setWindowState(saveState());
    for (QSplitter* s : findChildren<QSplitter*>()) {
        if (!s->objectName().isEmpty())
            m_settings.setSplitterState(s->objectName(), s->saveState());
    }
    QStringList hidden;
    for (const QString& p : panelNames()) {
        if (!isPanelVisible(p))
            hidden.append(p);
    }
    m_settings.setHiddenPanels(hidden);
}

void MainWindow::restoreLayout()
{
    if (m_settings.splitterState(m_mainSplitter->objectName()).isEmpty()) {
        resetLayout();
        m_layoutOnLoad = true;
    }
    // Splitter states first: restoring one shows the panes it holds again.
    for (QSplitter* s : findChildren<QSplitter*>()) {
        const QByteArray state = m_settings.splitterState(s->objectName());
        if (state.isEmpty() || !s->restoreState(state))
            continue;
        // Every pane collapsed to nothing: back to the default proportions.
        const QList<int> sizes = s->sizes();
        if (std::all_of(sizes.cbegin(), sizes.cend(), [](int v) { return v == 0; })) {
            QList<int> even;
            for (int i = 0; i < s->count(); ++i)
                even.append(1);
            s->setSizes(even);
        }
    }
    QStringList hidden = m_settings.hiddenPanels();
    // A state that hides everything is not restored: the window would show nothing.
    const QStringList all = panelNames();
    if (std::all_of(all.cbegin(), all.cend(), [&hidden](const QString& p) { return hidden.contains(p); }))
        hidden.clear();
    for (const QString& p : all)
        setPanelVisible(p, !hidden.contains(p));
}

void MainWindow::resetLayout()
{
    for (const QString& p : panelNames())
        setPanelVisible(p, true);
    fitProvidersView(); // its rows depend on the window's height
    // Pending layout requests first: the tiles' panel measures its rows on them.
    QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
    // The charts and the logs share what the fixed-height panels leave; on a short screen the
    // tables under the charts start folded away (drag the handle to open them), so the event
    // log keeps enough rows to read. The charts get at least a readable height (their box
    // with a 160 px chart) while the logs keep a few rows (issue 28: 45 px charts with six
    // providers at 1280×720).
    constexpr int READABLE_CHARTS = 230;
    constexpr int SOME_LOG_ROWS = 130;
    // The page's own height once it is laid out; before, the window's less its bars.
    const int h = std::max(400,
        m_mainSplitter->isVisible() && m_mainSplitter->height() > 100 ? m_mainSplitter->height() - 12
                                                                      : height() - 120);
    const int capacityHeight = m_capacityPanel->minimumSizeHint().height();
    const int providersHeight = m_panels.value(QStringLiteral("providers"))->sizeHint().height();
    const int rest = std::max(200, h - capacityHeight - providersHeight);
    const int charts = std::max(rest * 11 / 20, std::min(rest - SOME_LOG_ROWS, READABLE_CHARTS));
    m_mainSplitter->setSizes({ capacityHeight, providersHeight, charts, rest - charts });
    const int w = std::max(600, width());
    m_chartsSplitter->setSizes({ w / 2, w - w / 2 });
    m_bottomSplitter->setSizes({ w * 2 / 5, w - w * 2 / 5 });
    // Under each chart its table (callers, 429s by caller): a quarter of the box on a tall
    // window; folded away on a short one, where the chart needs the height.
    const bool shortScreen = height() < 900;
    const int chartsBox = std::max(120, charts - 60);
    for (const char* name : { "usageSplitter", "rateSplitter" }) {
        if (auto* s = findChild<QSplitter*>(QLatin1String(name)))
            s->setSizes(
                shortScreen ? QList<int> { chartsBox, 0 } : QList<int> { chartsBox * 3 / 4, chartsBox / 4 });
    }
}

void MainWindow::onSnapshot()
{
    const DashboardSnapshot& s = m_controller->snapshot();
    const bool empty = (s.status != HomeStatus::Ready) && s.holders.empty();
    m_emptyState->setText(emptyStateText(s));
    m_stack->setCurrentIndex(empty ? 0 : 1);
    if (m_messageAboutMissingHome && s.status != HomeStatus::Missing) {
        m_messageBanner->hide();
        m_messageAboutMissingHome = false;
    }

    if (!s.corruptFile.isEmpty()) {
        // Limits are never moved aside (they are the user's): every command refuses until they
        // are fixed. A corrupt state is set aside by the next command, which starts conservatively.
        m_corruptBanner->setText(s.limitsCorrupt
                ? tr("<b>Corrupt limits:</b> <tt>%1</tt> does not parse (%2). Nothing moves it aside: "
                     "every <tt>tollgate</tt> command that needs these limits refuses (exit 3) until it "
                     "is fixed (restore <tt>limits.json.bak</tt>, or import saved limits).")
                      .arg(s.corruptFile.toHtmlEscaped(), s.corruptReason.toHtmlEscaped())
                : tr("<b>Corrupt file:</b> <tt>%1</tt> does not parse (%2). The dashboard leaves it "
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
    m_statusLabel->setToolTip(status);
}

void MainWindow::fitProvidersView()
{
    // As tall as its rows (a few providers is the usual case), so the charts get the room;
    // on a short window at most three (the tiles above show every provider), more scroll.
    // The limits tab shares the height: a provider's classes are rows there.
    const int rows
        = std::clamp(std::max(m_controller->providers()->rowCount(), m_controller->limits()->rowCount()), 1,
            height() < 900 ? 3 : 8);
    const int height = m_providersView->horizontalHeader()->sizeHint().height()
        + rows * m_providersView->verticalHeader()->defaultSectionSize()
        + 2 * m_providersView->frameWidth()
        // Room for the horizontal scroll bar a narrow window shows, so it never covers a row.
        + m_providersView->horizontalScrollBar()->sizeHint().height() + 4;
    m_providersView->setFixedHeight(height);
    m_limitsView->setFixedHeight(height);
    // QTabWidget's size hint takes its pages' unbounded hints (a table's 192 px): the tabs are
    // held to the tab bar and the rows, so the charts get the rest.
    m_providersTabs->setFixedHeight(m_providersTabs->tabBar()->sizeHint().height() + height + 2);
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
        const QString text = result.holder.health == HolderHealth::Corrupt
            ? tr("%1 is corrupt (%2): it names no holder, so nobody can tell whether whoever wrote it "
                 "still runs.\n\nRemove it anyway?")
                  .arg(result.holder.path, result.holder.problem)
            : tr("%1 is held by pid %2, which is still running:\n%3\n\nForce-release it "
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
    m_editLimitAction->setEnabled(!provider.isEmpty() || providers->rowCount() == 1);
    m_cleanStaleAction->setEnabled(m_controller->holders()->deadCount() > 0);
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

void MainWindow::onPlanAlert(const PlanAlerts::Alert& alert)
{
    // The storm alert's path: a critical desktop notification (tray balloon as fallback), else
    // the window's banner.
    const bool rejected = alert.plan.status == PlanUsage::Status::Rejected;
    QString when;
    if (alert.windowResetMs > 0)
        when = tr(" until %1")
                   .arg(QDateTime::fromMSecsSinceEpoch(alert.windowResetMs)
                            .toString(QStringLiteral("ddd HH:mm")));
    const QString title = rejected ? tr("Tollgate: plan of %1 used up").arg(alert.provider)
                                   : tr("Tollgate: plan of %1 nearly used up").arg(alert.provider);
    const QString text = rejected
        ? tr("The subscription plan of %1 is used up: tollgate proxy holds every caller%2.")
              .arg(alert.provider, when)
        : tr("The subscription plan of %1 is nearly used up (the provider warns)%2.")
              .arg(alert.provider, when.isEmpty() ? QString() : tr("; the window resets%1").arg(when));
    if (m_tray->available())
        m_tray->alert(title, text);
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
    m_messageAboutMissingHome = false;
    if (error || offerUndo) {
        // An error in the colours of an error (it shared the pale blue of a success).
        m_messageBanner->setProperty("error", error);
        m_messageBanner->setStyleSheet(bannerStyle(QStringLiteral("messageBanner"),
            error ? QStringLiteral("background: #fde2e1; border: 1px solid #e0a0a0;")
                  : QStringLiteral("background: #eef3fb; border: 1px solid #a8bfe0;"),
            error ? QStringLiteral("#7a1010") : QStringLiteral("#1a2a40")));
        m_messageText->setText(text);
        m_messageBanner->show();
        // Said because there was no home: it goes when the home appears (it stayed on top of
        // the live data).
        m_messageAboutMissingHome = error && m_controller->snapshot().status == HomeStatus::Missing;
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
    // Counted and named first, from what the window shows, and confirmed: only lock files
    // shown as stale (old and their holder dead), and the slots of holders that are gone.
    // The observer judges each again before it acts (a lock that changed is left alone).
    QStringList locks;
    int slots = 0;
    for (const HolderInfo& h : m_controller->snapshot().holders) {
        if (h.kind == HolderKind::LockFile && h.health == HolderHealth::Stale)
            locks.append(h.path);
        else if (h.kind == HolderKind::Slot && h.health == HolderHealth::Dead)
            ++slots;
    }
    if (locks.isEmpty() && slots == 0) {
        showMessage(
            tr("Nothing is stale: no slot's holder is gone and no lock file is past its stale age."), false);
        return;
    }
    QStringList parts;
    if (slots > 0)
        parts.append(tr("release %n slot(s) whose holder is gone", nullptr, slots));
    if (!locks.isEmpty())
        parts.append(tr("remove %n stale lock file(s)", nullptr, static_cast<int>(locks.size())));
    constexpr int NAMED = 10;
    QStringList named;
    for (int i = 0; i < std::min<int>(NAMED, static_cast<int>(locks.size())); ++i)
        named.append(QFileInfo(locks.at(i)).fileName());
    if (locks.size() > NAMED)
        named.append(tr("and %n more", nullptr, static_cast<int>(locks.size()) - NAMED));
    QString text = tr("Clean stale: %1?").arg(parts.join(tr(" and ")));
    if (!named.isEmpty())
        text += QStringLiteral("\n\n") + named.join(QStringLiteral(", "));
    text += QStringLiteral("\n\n")
        + tr("Lock files whose holder is dead but younger than the stale age, and corrupt ones, are left.");
    if (!m_confirm(tr("Clean stale"), text))
        return;
    m_controller->cleanStale(locks);
}

void MainWindow::undoLimitChange()
{
    m_controller->undoLimitChange();
}

void MainWindow::openSettings()
{
    SettingsDialog dialog(m_settings.stormThreshold(), m_settings.stormWindowSeconds(),
        m_controller->lockDirs(), m_settings.staleSeconds(), this);
    dialog.setTheme(m_settings.theme());
    if (dialog.exec() != QDialog::Accepted)
        return;
    if (dialog.theme() != m_settings.theme()) {
        m_settings.setTheme(dialog.theme());
        Theme::apply(dialog.theme());
    }
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
    saveLayout();
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
