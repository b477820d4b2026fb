#pragma once

// HoldersPanel: every slot and lock file with its holder, oldest first, and the buttons that
// release them. The buttons only ask (released/cleanRequested): the window confirms and acts,
// so a click can never skip the confirmation that names what goes.

#include <QGroupBox>

QT_BEGIN_NAMESPACE
class QAbstractItemModel;
class QAction;
class QPushButton;
QT_END_NAMESPACE

namespace tollgate::ui {

class KeyedTableView;

class HoldersPanel final : public QGroupBox
{
    Q_OBJECT
public:
    // The actions give the buttons their tooltips (with the shortcut); the panel does not
    // trigger them.
    HoldersPanel(QAbstractItemModel* holders, const QAction* release, const QAction* cleanStale,
        QWidget* parent = nullptr);

    [[nodiscard]] KeyedTableView* view() const { return m_view; }
    [[nodiscard]] QPushButton* releaseButton() const { return m_release; }
    [[nodiscard]] QPushButton* cleanButton() const { return m_clean; }

Q_SIGNALS:
    void releaseRequested();
    void cleanRequested();

private:
    KeyedTableView* m_view = nullptr; // owned by the widget tree
    QPushButton* m_release = nullptr; // owned by the widget tree
    QPushButton* m_clean = nullptr; // owned by the widget tree
};

} // namespace tollgate::ui
