#pragma once

// SettingsDialog: the theme, the storm alert threshold (how many 429s within how many seconds), the
// watched lock directories, the age past which a lock of a dead holder is stale, and whether
// the dashboard starts with the session. The autostart entry is the only setting the dialog
// applies itself (on OK, through Autostart): it is a file of the desktop's, not a value the
// window keeps; if it cannot be written the dialog stays open and says why.

#include "autostart.h"
#include "theme.h"

#include <QDialog>

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QLabel;
class QListWidget;
class QSpinBox;
QT_END_NAMESPACE

namespace tollgate::ui {

class SettingsDialog final : public QDialog
{
    Q_OBJECT
public:
    SettingsDialog(int stormThreshold, int stormWindowSeconds, const QStringList& lockDirs,
        qint64 staleSeconds, QWidget* parent = nullptr);

    // The autostart entry the checkbox shows and toggles (default: the user's; tests pass one
    // under a temporary XDG_CONFIG_HOME).
    void setAutostart(const Autostart& autostart);
    [[nodiscard]] bool startWithSession() const;
    void accept() override;

    void setTheme(Theme::Kind kind);
    [[nodiscard]] Theme::Kind theme() const;

    [[nodiscard]] int stormThreshold() const;
    [[nodiscard]] int stormWindowSeconds() const;
    [[nodiscard]] QStringList lockDirs() const;
    [[nodiscard]] qint64 staleSeconds() const;

private:
    QSpinBox* m_threshold = nullptr; // owned by the widget tree
    QSpinBox* m_window = nullptr; // owned by the widget tree
    QSpinBox* m_stale = nullptr; // owned by the widget tree
    QListWidget* m_dirs = nullptr; // owned by the widget tree
    QCheckBox* m_autostartBox = nullptr; // owned by the widget tree
    QComboBox* m_theme = nullptr; // owned by the widget tree
    QLabel* m_autostartError = nullptr; // owned by the widget tree
    Autostart m_autostart;
};

} // namespace tollgate::ui
