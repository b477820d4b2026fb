// The session autostart entry: written whole and 0644 under $XDG_CONFIG_HOME/autostart, Exec
// quoted by the Desktop Entry rules, nothing but a regular file of ours ever replaced or
// removed, and the settings dialog's "Start with the session" box showing and toggling it.

#include "autostart.h"
#include "settingsdialog.h"

#include <QCheckBox>
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QTemporaryDir>
#include <QTest>
#include <sys/stat.h>
#include <unistd.h>

using tollgate::ErrorKind;
using tollgate::ui::Autostart;
using tollgate::ui::SettingsDialog;

namespace {

const QString EXEC = QStringLiteral("/opt/tollgate/bin/tollgate-dashboard");

QByteArray readFile(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

QStringList entriesIn(const QString& dir)
{
    return QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot);
}

void restoreXdgConfigHome(const QByteArray& saved)
{
    if (saved.isNull())
        qunsetenv("XDG_CONFIG_HOME");
    else
        qputenv("XDG_CONFIG_HOME", saved);
}

} // namespace

class TestAutostart final : public QObject
{
    Q_OBJECT
private Q_SLOTS:
    void enableWritesAWholeEntry();
    void enableReplacesAnOldEntryByRename();
    void disableRemovesAndIsIdempotent();
    void defaultsFollowXdgConfigHome();
    void symlinkIsNeitherFollowedNorReplaced();
    void fifoIsRefusedWithoutBlocking();
    void execIsQuoted();
    void controlBytesInThePathAreRefused();
    void settingsDialogShowsAndToggles();
    void settingsDialogStaysOpenWhenItCannotWrite();
};

void TestAutostart::enableWritesAWholeEntry()
{
    QTemporaryDir config;
    Autostart a(config.path(), EXEC);
    QVERIFY(!a.isEnabled());
    const mode_t old = ::umask(077); // the entry is 0644 whatever the umask
    const auto done = a.enable();
    ::umask(old);
    QVERIFY2(done.ok(), done.ok() ? "" : done.error().describe().c_str());
    QCOMPARE(
        a.entryPath(), config.path() + QStringLiteral("/autostart/io.github.tollgate.Dashboard.desktop"));
    QVERIFY(a.isEnabled());
    const QByteArray text = readFile(a.entryPath());
    QVERIFY(text.startsWith("[Desktop Entry]\n"));
    QVERIFY(text.contains("\nType=Application\n"));
    QVERIFY(text.contains("\nExec=/opt/tollgate/bin/tollgate-dashboard\n"));
    QVERIFY(text.contains("\nIcon=io.github.tollgate.Dashboard\n"));
    struct stat st
    {
    };
    QCOMPARE(::lstat(QFile::encodeName(a.entryPath()).constData(), &st), 0);
    QCOMPARE(st.st_mode & 07777, mode_t(0644));
    // No temp file is left beside it.
    QCOMPARE(entriesIn(config.path() + QStringLiteral("/autostart")),
        QStringList { QStringLiteral("io.github.tollgate.Dashboard.desktop") });
}

void TestAutostart::enableReplacesAnOldEntryByRename()
{
    QTemporaryDir config;
    Autostart a(config.path(), EXEC);
    QVERIFY(QDir().mkpath(config.path() + QStringLiteral("/autostart")));
    {
        QFile old(a.entryPath());
        QVERIFY(old.open(QIODevice::WriteOnly));
        old.write("[Desktop Entry]\nExec=/old/path\n");
    }
    struct stat before
    {
    };
    QCOMPARE(::lstat(QFile::encodeName(a.entryPath()).constData(), &before), 0);
    QVERIFY(a.enable().ok());
    struct stat after
    {
    };
    QCOMPARE(::lstat(QFile::encodeName(a.entryPath()).constData(), &after), 0);
    QVERIFY(before.st_ino != after.st_ino); // a new file renamed over, not rewritten in place
    QVERIFY(!readFile(a.entryPath()).contains("/old/path"));
}

void TestAutostart::disableRemovesAndIsIdempotent()
{
    QTemporaryDir config;
    Autostart a(config.path(), EXEC);
    QVERIFY(a.disable().ok()); // no folder at all: nothing to do
    QVERIFY(a.enable().ok());
    QVERIFY(a.disable().ok());
    QVERIFY(!a.isEnabled());
    QVERIFY(!QFile::exists(a.entryPath()));
    QVERIFY(a.disable().ok());
}

void TestAutostart::defaultsFollowXdgConfigHome()
{
    QTemporaryDir config;
    const QByteArray saved
        = qEnvironmentVariableIsSet("XDG_CONFIG_HOME") ? qgetenv("XDG_CONFIG_HOME") : QByteArray();
    qputenv("XDG_CONFIG_HOME", QFile::encodeName(config.path()));
    const Autostart a;
    QCOMPARE(
        a.entryPath(), config.path() + QStringLiteral("/autostart/io.github.tollgate.Dashboard.desktop"));
    QCOMPARE(a.execPath(), QCoreApplication::applicationFilePath());
    // The XDG spec: a relative value is invalid and ignored.
    qputenv("XDG_CONFIG_HOME", "relative/config");
    QCOMPARE(Autostart().entryPath(),
        QDir::homePath() + QStringLiteral("/.config/autostart/io.github.tollgate.Dashboard.desktop"));
    restoreXdgConfigHome(saved);
}

void TestAutostart::symlinkIsNeitherFollowedNorReplaced()
{
    QTemporaryDir config;
    Autostart a(config.path(), EXEC);
    QVERIFY(QDir().mkpath(config.path() + QStringLiteral("/autostart")));
    const QString victim = config.path() + QStringLiteral("/victim");
    {
        QFile v(victim);
        QVERIFY(v.open(QIODevice::WriteOnly));
        v.write("precious");
    }
    QVERIFY(QFile::link(victim, a.entryPath()));
    QVERIFY(!a.isEnabled());
    const auto done = a.enable();
    QVERIFY(!done.ok());
    QCOMPARE(done.error().kind, ErrorKind::Permission);
    QVERIFY(QString::fromStdString(done.error().describe()).contains(QStringLiteral("symbolic link")));
    QCOMPARE(readFile(victim), QByteArray("precious"));
    QVERIFY(QFileInfo(a.entryPath()).isSymLink());
    QVERIFY(!a.disable().ok());
    QVERIFY(QFileInfo(a.entryPath()).isSymLink());
    QCOMPARE(entriesIn(config.path() + QStringLiteral("/autostart")).size(), 1); // no temp left
}

void TestAutostart::fifoIsRefusedWithoutBlocking()
{
    QTemporaryDir config;
    Autostart a(config.path(), EXEC);
    QVERIFY(QDir().mkpath(config.path() + QStringLiteral("/autostart")));
    QCOMPARE(::mkfifo(QFile::encodeName(a.entryPath()).constData(), 0644), 0);
    const auto done = a.enable(); // would hang here if anything opened the FIFO
    QVERIFY(!done.ok());
    QVERIFY(QString::fromStdString(done.error().describe()).contains(QStringLiteral("FIFO")));
    QVERIFY(!a.disable().ok());
    struct stat st
    {
    };
    QCOMPARE(::lstat(QFile::encodeName(a.entryPath()).constData(), &st), 0);
    QVERIFY(S_ISFIFO(st.st_mode));
}

void TestAutostart::execIsQuoted()
{
    QCOMPARE(Autostart::quoteExecArgument(QStringLiteral("/usr/bin/tollgate-dashboard")),
        QStringLiteral("/usr/bin/tollgate-dashboard"));
    QCOMPARE(Autostart::quoteExecArgument(QStringLiteral("/home/a b/bin/d")),
        QStringLiteral("\"/home/a b/bin/d\""));
    // Inside quotes ", `, $ and \ take a backslash; the string level then doubles every
    // backslash; a literal % is %%.
    QCOMPARE(Autostart::quoteExecArgument(QStringLiteral("/x/$HOME`\"\\%d")),
        QStringLiteral("\"/x/\\\\$HOME\\\\`\\\\\"\\\\\\\\%%d\""));

    QTemporaryDir config;
    Autostart a(config.path(), QStringLiteral("/home/a b/100%/tollgate-dashboard"));
    QVERIFY(a.enable().ok());
    const QByteArray text = readFile(a.entryPath());
    QVERIFY(text.contains("\nExec=\"/home/a b/100%%/tollgate-dashboard\"\n"));
    QVERIFY(text.contains("\nTryExec=/home/a b/100%/tollgate-dashboard\n"));
}

void TestAutostart::controlBytesInThePathAreRefused()
{
    QTemporaryDir config;
    for (const QString& bad : { QStringLiteral("/bin/x\nHidden=true"), QStringLiteral("/bin/x\r"),
             QStringLiteral("relative/tollgate-dashboard") }) {
        Autostart a(config.path(), bad);
        const auto done = a.enable();
        QVERIFY(!done.ok());
        QCOMPARE(done.error().kind, ErrorKind::Usage);
        QVERIFY(!QFile::exists(a.entryPath()));
    }
}

void TestAutostart::settingsDialogShowsAndToggles()
{
    QTemporaryDir config;
    const QByteArray saved
        = qEnvironmentVariableIsSet("XDG_CONFIG_HOME") ? qgetenv("XDG_CONFIG_HOME") : QByteArray();
    qputenv("XDG_CONFIG_HOME", QFile::encodeName(config.path()));
    const Autostart entry;
    {
        SettingsDialog d(5, 60, {}, 300);
        auto* box = d.findChild<QCheckBox*>();
        QVERIFY(box);
        QCOMPARE(box->text(), QStringLiteral("Start with the session"));
        QVERIFY(!box->isChecked());
        box->setChecked(true);
        d.accept();
        QCOMPARE(d.result(), int(QDialog::Accepted));
    }
    QVERIFY(entry.isEnabled());
    QVERIFY(readFile(entry.entryPath())
                .contains("\nExec=" + QFile::encodeName(QCoreApplication::applicationFilePath())));
    {
        SettingsDialog d(5, 60, {}, 300);
        auto* box = d.findChild<QCheckBox*>();
        QVERIFY(box->isChecked()); // shows what is on disk
        box->setChecked(false);
        d.accept();
    }
    QVERIFY(!entry.isEnabled());
    {
        SettingsDialog d(5, 60, {}, 300);
        QVERIFY(!d.findChild<QCheckBox*>()->isChecked());
        d.accept(); // unchanged: nothing written
    }
    QVERIFY(!QFile::exists(entry.entryPath()));
    restoreXdgConfigHome(saved);
}

void TestAutostart::settingsDialogStaysOpenWhenItCannotWrite()
{
    QTemporaryDir config;
    Autostart entry(config.path(), EXEC);
    QVERIFY(QDir().mkpath(config.path() + QStringLiteral("/autostart")));
    QVERIFY(QFile::link(config.path() + QStringLiteral("/elsewhere"), entry.entryPath()));
    SettingsDialog d(5, 60, {}, 300);
    d.setAutostart(entry);
    auto* box = d.findChild<QCheckBox*>();
    QVERIFY(!box->isChecked());
    box->setChecked(true);
    d.accept();
    QVERIFY(d.result() != QDialog::Accepted);
    bool shown = false;
    for (auto* label : d.findChildren<QLabel*>())
        shown = shown || (!label->isHidden() && label->text().contains(QStringLiteral("symbolic link")));
    QVERIFY(shown);
    QVERIFY(QFileInfo(entry.entryPath()).isSymLink());
}

QTEST_MAIN(TestAutostart)
#include "tst_autostart.moc"
