#pragma once

// EventsPanel: the event log with its filters (type, text), the chip that shows and clears
// the provider/caller scope, and the chip that counts events that arrived while the user read
// older ones. The filters act on the EventsFilterModel directly; the chips only signal (the
// window owns the scope and the following).

#include <QGroupBox>

QT_BEGIN_NAMESPACE
class QComboBox;
class QLineEdit;
class QPushButton;
QT_END_NAMESPACE

namespace tollgate::ui {

class EventsFilterModel;
class KeyedTableView;

class EventsPanel final : public QGroupBox
{
    Q_OBJECT
public:
    EventsPanel(EventsFilterModel* events, const QKeySequence& findKey, const QString& clearScopeTip,
        QWidget* parent = nullptr);

    [[nodiscard]] KeyedTableView* view() const { return m_view; }
    [[nodiscard]] QComboBox* typeBox() const { return m_type; }
    [[nodiscard]] QLineEdit* textField() const { return m_text; }
    [[nodiscard]] QPushButton* scopeChip() const { return m_scopeChip; }
    [[nodiscard]] QPushButton* newEventsChip() const { return m_newEventsChip; }

Q_SIGNALS:
    void clearScopeRequested();
    void followRequested();

private:
    KeyedTableView* m_view = nullptr; // owned by the widget tree
    QComboBox* m_type = nullptr; // owned by the widget tree
    QLineEdit* m_text = nullptr; // owned by the widget tree
    QPushButton* m_scopeChip = nullptr; // owned by the widget tree
    QPushButton* m_newEventsChip = nullptr; // owned by the widget tree
};

} // namespace tollgate::ui
