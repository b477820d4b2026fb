#pragma once

// TrayController: the system tray icon, its menu (show window, pause all, resume all, quit)
// and the dashboard's notices. When no tray exists (offscreen, some desktops) the icon stays
// inert and available() is false, so the window shows alerts as a banner instead.
//
// Notices go to the desktop's notification service when the session bus has one (see
// DesktopNotifier); the tray balloon is the fallback.

#include "desktopnotifier.h"
#include "stateicon.h"

#include <QObject>
#include <QSystemTrayIcon>

QT_BEGIN_NAMESPACE
class QMenu;
QT_END_NAMESPACE

namespace tollgate::ui {

class TrayController final : public QObject
{
    Q_OBJECT
public:
    // Notices go over the session bus (connected at the first notice).
    explicit TrayController(QObject* parent = nullptr);
    // Notices go over `bus` (tests pass a private bus or an unconnected one).
    TrayController(const QDBusConnection& bus, QObject* parent);
    ~TrayController() override;

    [[nodiscard]] bool available() const { return m_tray != nullptr; }
    [[nodiscard]] DesktopNotifier* notifier() const { return m_notifier; }
    void setState(TrayState state, const QString& tooltip);

    // A warning (a 429 storm): a critical desktop notification, else a tray balloon.
    void alert(const QString& title, const QString& text);
    // The tray balloon itself (nothing without a tray): DesktopNotifier's fallback.
    void showMessage(const QString& title, const QString& text,
        QSystemTrayIcon::MessageIcon icon = QSystemTrayIcon::Information);
    // Called when closing the window hid it to the tray: the first time ever (remembered in
    // the settings file at settingsPath, key "tray/hiddenNoticeShown") says so. Does nothing
    // without a tray, where closing quits.
    void announceHiddenToTray(const QString& settingsPath);

Q_SIGNALS:
    void showRequested();
    void pauseAllRequested();
    void resumeAllRequested();
    void quitRequested();

private:
    DesktopNotifier::Fallback balloonFallback();
    void setUp();

    QSystemTrayIcon* m_tray = nullptr; // child; null without a tray
    QMenu* m_menu = nullptr; // owned here (a QMenu cannot have a QObject parent)
    DesktopNotifier* m_notifier = nullptr; // child
};

} // namespace tollgate::ui
