#include "mainwindow.h"

#include <QLabel>
#include <QStatusBar>
#include <QVBoxLayout>

namespace tollgate::ui {

MainWindow::MainWindow(QString homeDir, QWidget* parent)
    : QMainWindow(parent)
    , m_homeDir(std::move(homeDir))
{
    setWindowTitle(tr("Tollgate"));
    auto* central = new QWidget(this);
    auto* layout = new QVBoxLayout(central);
    auto* title = new QLabel(tr("<h2>Tollgate</h2>"), central);
    m_emptyState = new QLabel(central);
    m_emptyState->setObjectName(QStringLiteral("emptyState"));
    m_emptyState->setWordWrap(true);
    m_emptyState->setTextFormat(Qt::RichText);
    m_emptyState->setText(tr("<p><b>No callers yet.</b></p>"
                             "<p>Callers take part by going through the <tt>tollgate</tt> command, "
                             "for example:</p>"
                             "<pre>tollgate lock run /tmp/build.lock -- make</pre>"
                             "<p>State directory: <tt>%1</tt></p>")
                              .arg(m_homeDir.toHtmlEscaped()));
    layout->addWidget(title);
    layout->addWidget(m_emptyState);
    layout->addStretch(1);
    setCentralWidget(central);
    statusBar()->showMessage(tr("Watching %1").arg(m_homeDir));
    resize(900, 600);
}

} // namespace tollgate::ui
