#pragma once

// MainWindow: the dashboard's top-level window. For now it shows where Tollgate keeps its
// state and how to start a caller; the live views arrive with the shared-quota state.

#include <QMainWindow>

class QLabel;

namespace tollgate::ui {

class MainWindow final : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QString homeDir, QWidget* parent = nullptr);

    [[nodiscard]] QString homeDir() const { return m_homeDir; }

private:
    QString m_homeDir;
    QLabel* m_emptyState = nullptr; // owned by the widget tree
};

} // namespace tollgate::ui
