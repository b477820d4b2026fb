#pragma once

// SettingsDialog: the storm alert threshold (how many 429s within how many seconds), the
// watched lock directories, and the age past which a lock of a dead holder is stale.

#include <QDialog>

QT_BEGIN_NAMESPACE
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

    [[nodiscard]] int stormThreshold() const;
    [[nodiscard]] int stormWindowSeconds() const;
    [[nodiscard]] QStringList lockDirs() const;
    [[nodiscard]] qint64 staleSeconds() const;

private:
    QSpinBox* m_threshold = nullptr; // owned by the widget tree
    QSpinBox* m_window = nullptr; // owned by the widget tree
    QSpinBox* m_stale = nullptr; // owned by the widget tree
    QListWidget* m_dirs = nullptr; // owned by the widget tree
};

} // namespace tollgate::ui
