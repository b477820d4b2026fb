#pragma once

// TrayController: the system tray icon, its menu (show window, pause all, resume all, quit)
// and its alerts. When no tray exists (offscreen, some desktops) it stays inert and
// available() is false, so the window shows alerts as a banner instead.

#include "stateicon.h"

#include <QObject>

QT_BEGIN_NAMESPACE
class QMenu;
class QSystemTrayIcon;
QT_END_NAMESPACE

namespace tollgate::ui {

class TrayController final : public QObject
{
    Q_OBJECT
public:
    explicit TrayController(QObject* parent = nullptr);
    ~TrayController() override;

    [[nodiscard]] bool available() const { return m_tray != nullptr; }
    void setState(TrayState state, const QString& tooltip);
    void alert(const QString& title, const QString& text);

Q_SIGNALS:
    void showRequested();
    void pauseAllRequested();
    void resumeAllRequested();
    void quitRequested();

private:
    QSystemTrayIcon* m_tray = nullptr; // child; null without a tray
    QMenu* m_menu = nullptr; // owned here (a QMenu cannot have a QObject parent)
};

} // namespace tollgate::ui
