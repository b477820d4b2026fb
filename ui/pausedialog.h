#pragma once

// PauseDialog: asks what to pause (all providers or one) and an optional reason, which is
// recorded in the history and shown to everyone watching.

#include <QDialog>

QT_BEGIN_NAMESPACE
class QComboBox;
class QLineEdit;
QT_END_NAMESPACE

namespace tollgate::ui {

class PauseDialog final : public QDialog
{
    Q_OBJECT
public:
    PauseDialog(const QStringList& providers, const QString& preselect, QWidget* parent = nullptr);

    [[nodiscard]] QString provider() const; // empty: all
    [[nodiscard]] QString reason() const;

private:
    QComboBox* m_provider = nullptr; // owned by the widget tree
    QLineEdit* m_reason = nullptr; // owned by the widget tree
};

} // namespace tollgate::ui
