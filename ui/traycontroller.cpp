#include "traycontroller.h"

#include <QMenu>
#include <QSettings>

namespace tollgate::ui {

TrayController::TrayController(QObject* parent)
    : QObject(parent)
{
    m_notifier = new DesktopNotifier(balloonFallback(), this);
    setUp();
}

TrayController::TrayController(const QDBusConnection& bus, QObject* parent)
    : QObject(parent)
{
    m_notifier = new DesktopNotifier(bus, balloonFallback(), this);
    setUp();
}

DesktopNotifier::Fallback TrayController::balloonFallback()
{
    return [this](const QString& summary, const QString& body, DesktopNotifier::Urgency urgency) {
        showMessage(summary, body,
            urgency == DesktopNotifier::Urgency::Critical ? QSystemTrayIcon::Warning
                                                          : QSystemTrayIcon::Information);
    };
}

void TrayController::setUp()
{
    if (!QSystemTrayIcon::isSystemTrayAvailable())
        return;
    m_menu = new QMenu();
    m_menu->addAction(StateIcon::appIcon(), tr("Show window"), this, &TrayController::showRequested);
    m_menu->addSeparator();
    m_menu->addAction(StateIcon::toolbarIcon(QStringLiteral("pause")), tr("Pause all"), this,
        &TrayController::pauseAllRequested);
    m_menu->addAction(StateIcon::toolbarIcon(QStringLiteral("resume")), tr("Resume all"), this,
        &TrayController::resumeAllRequested);
    m_menu->addSeparator();
    m_menu->addAction(tr("Quit"), this, &TrayController::quitRequested);
    m_tray = new QSystemTrayIcon(StateIcon::icon(TrayState::Normal), this);
    m_tray->setContextMenu(m_menu);
    m_tray->setToolTip(tr("Tollgate"));
    connect(m_tray, &QSystemTrayIcon::activated, this, [this](QSystemTrayIcon::ActivationReason reason) {
        if (reason == QSystemTrayIcon::Trigger || reason == QSystemTrayIcon::DoubleClick)
            Q_EMIT showRequested();
    });
    connect(m_tray, &QSystemTrayIcon::messageClicked, this, &TrayController::showRequested);
    m_tray->show();
}

TrayController::~TrayController()
{
    delete m_menu;
}

void TrayController::setState(TrayState state, const QString& tooltip)
{
    if (!m_tray)
        return;
    m_tray->setIcon(StateIcon::icon(state));
    m_tray->setToolTip(tooltip);
}

void TrayController::alert(const QString& title, const QString& text)
{
    m_notifier->notify(title, text, DesktopNotifier::Urgency::Critical);
}

void TrayController::showMessage(const QString& title, const QString& text, QSystemTrayIcon::MessageIcon icon)
{
    if (m_tray)
        m_tray->showMessage(title, text, icon, 10000);
}

void TrayController::announceHiddenToTray(const QString& settingsPath)
{
    if (!m_tray)
        return;
    QSettings settings(settingsPath, QSettings::IniFormat);
    m_notifier->notifyOnce(settings, QStringLiteral("tray/hiddenNoticeShown"),
        tr("Tollgate is still running"),
        tr("The dashboard keeps watching from the tray. Choose Quit in the tray menu to end it."));
}

} // namespace tollgate::ui
