#include "pausedialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLineEdit>
#include <QPushButton>

namespace tollgate::ui {

PauseDialog::PauseDialog(const QStringList& providers, const QString& preselect, QWidget* parent)
    : QDialog(parent)
{
    setWindowTitle(tr("Pause callers"));
    auto* form = new QFormLayout(this);
    m_provider = new QComboBox(this);
    m_provider->addItem(tr("All providers"), QString());
    for (const QString& p : providers)
        m_provider->addItem(p, p);
    if (const int i = m_provider->findData(preselect); i >= 0)
        m_provider->setCurrentIndex(i);
    m_reason = new QLineEdit(this);
    m_reason->setPlaceholderText(tr("optional, e.g. \"key rotation\""));
    m_reason->setMaxLength(200);
    form->addRow(tr("Pause:"), m_provider);
    form->addRow(tr("Reason:"), m_reason);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Pause"));
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    form->addRow(buttons);
}

QString PauseDialog::provider() const
{
    return m_provider->currentData().toString();
}

QString PauseDialog::reason() const
{
    return m_reason->text().trimmed();
}

} // namespace tollgate::ui
