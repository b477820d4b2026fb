#pragma once

// MainWindow: the dashboard's window — providers (limits editable in place), per-caller usage,
// 429 history, holders and the event log, plus the actions (pause/resume, force-release,
// clean stale, reset backoff) and the tray. It only shows what DashboardController hands it
// and passes intents back; it never touches a file.
//
// Confirmations and the pause prompt go through replaceable handlers so tests can answer
// them without a modal dialog; by default they are QMessageBox and PauseDialog.
//
// Every action is in the menu bar (with mnemonics) and has its shortcut shown in the menu and
// in its tooltip. The window is placed only where it fits the screen (WindowFit); splitter
// positions and hidden panels are remembered, and a remembered state that would hide every
// panel is not restored.

#include "actionresult.h"
#include "dashboardoptions.h"
#include "dashboardsettings.h"
#include "limitchange.h"
#include "limitsmodel.h"
#include "planalerts.h"
#include "stateicon.h"
#include "stormdetector.h"

#include <QHash>
#include <QMainWindow>
#include <functional>
#include <memory>
#include <optional>

QT_BEGIN_NAMESPACE
class QAction;
class QComboBox;
class QSplitter;
class QToolButton;
class QFrame;
class QLabel;
class QLineEdit;
class QMenu;
class QPushButton;
class QSortFilterProxyModel;
class QStackedWidget;
class QTabWidget;
class QTableView;
QT_END_NAMESPACE

namespace tollgate::ui {

class CapacityModel;
class CapacityPanel;
class HoldersPanel;
class DashboardController;
class TimeChartView;
class KeyedTableView;
class RateLimitChart;
class TrayController;
class UsageChart;

class MainWindow final : public QMainWindow
{
    Q_OBJECT
public:
    using ConfirmHandler = std::function<bool(const QString& title, const QString& text)>;
    struct PauseChoice
    {
        QString provider; // empty: all
        QString reason;
    };
    using PauseHandler
        = std::function<std::optional<PauseChoice>(const QStringList& providers, const QString& preselect)>;
    // Asks for a new model class of a provider (a dialog by default); nullopt: cancelled.
    using ClassPromptHandler = std::function<std::optional<LimitsModel::NewClass>(const QString& provider)>;

    explicit MainWindow(const DashboardOptions& options, QWidget* parent = nullptr);
    ~MainWindow() override;

    [[nodiscard]] QString homeDir() const;
    [[nodiscard]] DashboardController* controller() const { return m_controller; }
    [[nodiscard]] bool isLoaded() const;
    [[nodiscard]] TrayController* tray() const { return m_tray; }

    void setConfirmHandler(ConfirmHandler handler) { m_confirm = std::move(handler); }
    void setPauseHandler(PauseHandler handler) { m_pausePrompt = std::move(handler); }
    void setClassPromptHandler(ClassPromptHandler handler) { m_classPrompt = std::move(handler); }

    // Selects a provider / holder row (for actions that work on the selection); the selection
    // stays on that item across refreshes and is cleared when it disappears.
    void selectProvider(const QString& provider);
    void selectHolder(const QString& key);
    // The provider view (the Provider box): one provider in full; empty: every provider.
    void showProvider(const QString& provider);
    [[nodiscard]] QString selectedProvider() const;
    [[nodiscard]] QString selectedHolder() const;

    // The context menus, with only the actions that apply to that row (also for tests).
    [[nodiscard]] std::unique_ptr<QMenu> providerMenu(const QString& provider);
    [[nodiscard]] std::unique_ptr<QMenu> holderMenu(const QString& key);
    // A row of the limits table (key "provider" or "provider/class"): add or remove a class.
    [[nodiscard]] std::unique_ptr<QMenu> limitsMenu(const QString& key);
    // "Show events of provider X / caller Y" for a row showing them (either may be empty).
    [[nodiscard]] std::unique_ptr<QMenu> scopeMenu(const QString& provider, const QString& caller);

    // Moves and shrinks the window so that it lies inside available (a screen's available
    // geometry); a window that fits is left alone.
    void fitToScreen(const QRect& available);

    [[nodiscard]] CapacityModel* capacity() const { return m_capacity; }
    // The panels that can be hidden: capacity, providers, charts, holders, events.
    [[nodiscard]] static QStringList panelNames();
    void setPanelVisible(const QString& panel, bool visible);
    [[nodiscard]] bool isPanelVisible(const QString& panel) const;
    [[nodiscard]] int newEventsCount() const { return m_newEvents; }
    // "F2\tEdit limit" lines, one per action with a shortcut (Help → Keyboard shortcuts).
    [[nodiscard]] QString shortcutsText() const;

public Q_SLOTS:
    void pauseAll();
    void resumeAll();
    void pauseSelected();
    void resumeSelected();
    void resetBackoffSelected();
    void releaseSelected();
    void cleanStale();
    void showShortcuts(); // Help → Keyboard shortcuts (F1)
    void undoLimitChange();
    void openSettings();
    void quit();
    void togglePauseAll(); // pause all, or resume all when all is paused
    void editSelectedLimit();
    void addClassTo(const QString& provider); // asks (ClassPromptHandler), then sets
    void removeClass(const QString& provider, const QString& className); // confirms first
    // "Use the provider's limits": lists the exact changes, asks (ConfirmHandler), then writes
    // them by compare-and-set; a change made meanwhile is reported and nothing is overwritten.
    void adoptProviderLimits(const QString& provider);
    // "Follow the provider's limits" on or off (limits set --learn / --no-learn).
    void setLearning(const QString& provider, bool on);
    void showLimitsTab(); // the providers panel's "Limits" tab, every limit of every scope
    void findInEvents();
    void refresh();
    void showEventsOf(const QString& provider, const QString& caller); // empty: that filter off
    void clearEventScope();
    void followEvents(); // back to the newest event, following again
    void resetChartZoom();
    // Every panel shown, splitters in their first-run proportions for the window's height.
    void resetLayout();

Q_SIGNALS:
    void loaded(); // the first snapshot and history are on screen

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    void buildUi();
    void buildActions();
    void onSnapshot();
    void onCharts();
    void onAction(const ActionResult& result);
    void onStorm(const StormDetector::Storm& storm);
    void onPlanAlert(const PlanAlerts::Alert& alert);
    // The provider's learning actions (follow, adopt), for the provider and limits menus.
    void addLearningActions(QMenu* menu, const QString& provider);
    void onTrayState(TrayState state);
    void onLimitChangeNeedsConfirmation(const LimitChange& change, const QStringList& warnings);
    void updateActions();
    void showMessage(const QString& text, bool error, bool offerUndo = false);
    void showAlert(const QString& text);
    void applyLockDirs(const QStringList& dirs);
    void fitProvidersView();
    void buildMenus();
    void saveLayout();
    void restoreLayout();
    void updatePauseToggle();
    void updateLimitRates();
    void updateProviderScopes();
    void onEventsInserted(int count);
    void onEventsScrolled();
    void updateScopeChip();
    QAction* makeAction(const QString& name, const QString& text, const QString& tip,
        const QKeySequence& shortcut, const QString& icon);
    void connectScopeMenu(KeyedTableView* view, int providerColumn, int callerColumn);

    DashboardSettings m_settings;
    DashboardController* m_controller = nullptr; // child
    TrayController* m_tray = nullptr; // child
    ConfirmHandler m_confirm;
    PauseHandler m_pausePrompt;
    ClassPromptHandler m_classPrompt;
    bool m_quitting = false;
    bool m_layoutOnLoad = false; // the default layout is made again once the data is there

    // owned by the widget tree (the views, charts and chips below are the panels'; kept here
    // because the window's actions act on them)
    QLabel* m_corruptBanner = nullptr;
    QFrame* m_alertBanner = nullptr;
    QLabel* m_alertText = nullptr;
    QFrame* m_messageBanner = nullptr;
    QLabel* m_messageText = nullptr;
    bool m_messageAboutMissingHome = false; // the banner's error was said for want of a home
    QStackedWidget* m_stack = nullptr;
    QLabel* m_emptyState = nullptr;
    QPushButton* m_undoButton = nullptr;
    QComboBox* m_providerScope = nullptr;
    HoldersPanel* m_holdersPanel = nullptr;
    KeyedTableView* m_providersView = nullptr;
    KeyedTableView* m_limitsView = nullptr;
    QTabWidget* m_providersTabs = nullptr;
    KeyedTableView* m_callersView = nullptr;
    UsageChart* m_usageChart = nullptr;
    RateLimitChart* m_rateLimitChart = nullptr;
    CapacityModel* m_capacity = nullptr; // child
    CapacityPanel* m_capacityPanel = nullptr;
    QSplitter* m_mainSplitter = nullptr;
    QSplitter* m_chartsSplitter = nullptr;
    QSplitter* m_bottomSplitter = nullptr;
    QHash<QString, QWidget*> m_panels;
    QHash<QString, QAction*> m_panelActions;
    QPushButton* m_newEventsChip = nullptr;
    QPushButton* m_scopeChip = nullptr;
    int m_newEvents = 0;
    QAction* m_togglePauseAction = nullptr;
    int m_pauseToggleIcon = -1; // paused (1) or not (0) as its icon shows; -1: none set yet
    QAction* m_pauseAction = nullptr;
    QAction* m_editLimitAction = nullptr;
    QAction* m_cleanStaleAction = nullptr;
    QAction* m_findAction = nullptr;
    QAction* m_refreshAction = nullptr;
    QAction* m_settingsAction = nullptr;
    QAction* m_quitAction = nullptr;
    QAction* m_clearScopeAction = nullptr;
    QAction* m_resetZoomAction = nullptr;
    KeyedTableView* m_rateLimitView = nullptr;
    KeyedTableView* m_holdersView = nullptr;
    KeyedTableView* m_eventsView = nullptr;
    QPushButton* m_releaseButton = nullptr;
    QComboBox* m_eventType = nullptr;
    QLineEdit* m_eventText = nullptr;
    QLabel* m_statusLabel = nullptr;
    QAction* m_pauseAllAction = nullptr;
    QAction* m_resumeAllAction = nullptr;
    QAction* m_resumeAction = nullptr;
    QAction* m_resetBackoffAction = nullptr;
    QAction* m_releaseAction = nullptr;
    QAction* m_undoAction = nullptr;
};

} // namespace tollgate::ui
