#include "traycontroller.h"

#include <QMenu>
#include <QSystemTrayIcon>

namespace tollgate::ui {

TrayController::TrayController(QObject* parent)
    : QObject(parent)
{
    if (!QSystemTrayIcon::isSystemTrayAvailable())
        return;
    m_menu = new QMenu();
    m_menu->addAction(tr("Show window"), this, &TrayController::showRequested);
    m_menu->addSeparator();
    m_menu->addAction(tr("Pause all"), this, &TrayController::pauseAllRequested);
    m_menu->addAction(tr("Resume all"), this, &TrayController::resumeAllRequested);
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
    if (m_tray)
        m_tray->showMessage(title, text, QSystemTrayIcon::Warning, 10000);
}

} // namespace tollgate::ui
