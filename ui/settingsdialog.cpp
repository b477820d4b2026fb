#include "settingsdialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>

namespace tollgate::ui {

SettingsDialog::SettingsDialog(int stormThreshold, int stormWindowSeconds, const QStringList& lockDirs,
    qint64 staleSeconds, QWidget* parent)
    : QDialog(parent)
{
    setWindowTitle(tr("Dashboard settings"));
    auto* form = new QFormLayout(this);
    m_theme = new QComboBox(this);
    m_theme->setObjectName(QStringLiteral("themeChoice"));
    m_theme->addItem(tr("System"), Theme::name(Theme::Kind::System));
    m_theme->addItem(tr("Light"), Theme::name(Theme::Kind::Light));
    m_theme->addItem(tr("Dark"), Theme::name(Theme::Kind::Dark));
    form->addRow(tr("&Theme:"), m_theme);
    m_threshold = new QSpinBox(this);
    m_threshold->setRange(1, 1000);
    m_threshold->setValue(stormThreshold);
    m_threshold->setSuffix(tr(" × 429"));
    m_window = new QSpinBox(this);
    m_window->setRange(1, 3600);
    m_window->setValue(stormWindowSeconds);
    m_window->setSuffix(tr(" s"));
    form->addRow(tr("Storm alert at:"), m_threshold);
    form->addRow(tr("within:"), m_window);

    m_dirs = new QListWidget(this);
    m_dirs->addItems(lockDirs);
    auto* add = new QPushButton(tr("Add…"), this);
    auto* remove = new QPushButton(tr("Remove"), this);
    connect(add, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Watch lock files in"));
        if (!dir.isEmpty() && m_dirs->findItems(dir, Qt::MatchExactly).isEmpty())
            m_dirs->addItem(dir);
    });
    connect(remove, &QPushButton::clicked, this, [this] { delete m_dirs->currentItem(); });
    auto* dirButtons = new QHBoxLayout();
    dirButtons->addWidget(add);
    dirButtons->addWidget(remove);
    dirButtons->addStretch(1);
    form->addRow(tr("Lock directories (*.lock):"), m_dirs);
    form->addRow(QString(), dirButtons);
    m_stale = new QSpinBox(this);
    m_stale->setRange(0, 7 * 24 * 3600);
    m_stale->setValue(static_cast<int>(staleSeconds));
    m_stale->setSuffix(tr(" s"));
    m_stale->setSpecialValueText(tr("never"));
    form->addRow(tr("A dead holder's lock is stale after:"), m_stale);

    m_autostartBox = new QCheckBox(tr("Start with the session"), this);
    m_autostartError = new QLabel(this);
    m_autostartError->setWordWrap(true);
    m_autostartError->setTextFormat(Qt::PlainText);
    m_autostartError->hide();
    form->addRow(QString(), m_autostartBox);
    form->addRow(QString(), m_autostartError);
    setAutostart(m_autostart);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    form->addRow(buttons);
}

void SettingsDialog::setAutostart(const Autostart& autostart)
{
    m_autostart = autostart;
    m_autostartBox->setChecked(m_autostart.isEnabled());
    m_autostartBox->setToolTip(tr("Adds or removes %1").arg(m_autostart.entryPath()));
}

bool SettingsDialog::startWithSession() const
{
    return m_autostartBox->isChecked();
}

void SettingsDialog::accept()
{
    if (m_autostartBox->isChecked() != m_autostart.isEnabled()) {
        const Result<void> done = m_autostart.setEnabled(m_autostartBox->isChecked());
        if (!done) {
            m_autostartError->setText(tr("Cannot change the autostart entry: %1")
                                          .arg(QString::fromStdString(done.error().describe())));
            m_autostartError->show();
            return;
        }
    }
    QDialog::accept();
}

void SettingsDialog::setTheme(Theme::Kind kind)
{
    m_theme->setCurrentIndex(m_theme->findData(Theme::name(kind)));
}

Theme::Kind SettingsDialog::theme() const
{
    return Theme::parse(m_theme->currentData().toString()).value_or(Theme::Kind::System);
}

int SettingsDialog::stormThreshold() const
{
    return m_threshold->value();
}

int SettingsDialog::stormWindowSeconds() const
{
    return m_window->value();
}

QStringList SettingsDialog::lockDirs() const
{
    QStringList out;
    for (int i = 0; i < m_dirs->count(); ++i)
        out.append(m_dirs->item(i)->text());
    return out;
}

qint64 SettingsDialog::staleSeconds() const
{
    return m_stale->value();
}

} // namespace tollgate::ui
