// The session autostart entry: written whole and 0644 under $XDG_CONFIG_HOME/autostart, Exec
// quoted by the Desktop Entry rules, nothing but a regular file of ours ever replaced or
// removed (not a link, FIFO or folder planted there, nor an entry someone else wrote), a folder
// it cannot write failing cleanly, what it writes passing desktop-file-validate, and the
// settings dialog's "Start with the session" box showing and toggling it.

#include "autostart.h"
#include "settingsdialog.h"

#include <QCheckBox>
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <sys/fsuid.h>
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

void writeFile(const QString& path, const QByteArray& data)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    QCOMPARE(f.write(data), data.size());
}

ino_t inodeOf(const QString& path)
{
    struct stat st
    {
    };
    return ::lstat(QFile::encodeName(path).constData(), &st) == 0 ? st.st_ino : 0;
}

// Root ignores file modes, so a test of an unwritable folder runs its file access as nobody:
// setfsuid() drops root's override of file permissions for this thread until restored.
class AccessAsNobody
{
public:
    AccessAsNobody()
    {
        if (::geteuid() != 0)
            return;
        ::setfsgid(65534);
        ::setfsuid(65534);
        m_dropped = true;
    }
    ~AccessAsNobody()
    {
        if (!m_dropped)
            return;
        ::setfsuid(0);
        ::setfsgid(0);
    }
    AccessAsNobody(const AccessAsNobody&) = delete;
    AccessAsNobody& operator=(const AccessAsNobody&) = delete;
    // Whether file access is now subject to file modes (setfsuid can be denied in a sandbox;
    // it returns the previous fsuid, so asking with an invalid id changes nothing).
    [[nodiscard]] bool effective() const
    {
        return ::geteuid() != 0 || ::setfsuid(static_cast<uid_t>(-1)) == 65534;
    }

private:
    bool m_dropped = false;
};

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
    void directoryIsRefused();
    void foreignEntryIsNeitherReplacedNorRemoved();
    void unwritableFolderFailsCleanly();
    void configHomeThatIsAFileFailsCleanly();
    void entryPassesDesktopFileValidate();
    void settingsDialogKeepsAForeignEntry();
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
    QVERIFY(text.contains("\nX-Tollgate-Autostart=true\n")); // marks it as ours to replace
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
        old.write("[Desktop Entry]\nExec=/old/path\nX-Tollgate-Autostart=true\n");
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

void TestAutostart::directoryIsRefused()
{
    QTemporaryDir config;
    Autostart a(config.path(), EXEC);
    QVERIFY(QDir().mkpath(a.entryPath() + QStringLiteral("/inside")));
    QVERIFY(!a.isEnabled());
    const auto done = a.enable();
    QVERIFY(!done.ok());
    QCOMPARE(done.error().kind, ErrorKind::Permission);
    QVERIFY(QString::fromStdString(done.error().describe()).contains(QStringLiteral("directory")));
    QVERIFY(!a.disable().ok());
    QVERIFY(QFileInfo(a.entryPath() + QStringLiteral("/inside")).isDir());
    QCOMPARE(entriesIn(config.path() + QStringLiteral("/autostart")).size(), 1); // no temp left
}

void TestAutostart::foreignEntryIsNeitherReplacedNorRemoved()
{
    QTemporaryDir config;
    Autostart a(config.path(), EXEC);
    QVERIFY(QDir().mkpath(config.path() + QStringLiteral("/autostart")));
    // What a desktop's settings tool copies there, with the user's own argument; then
    // near-misses of the marker line, and a file too large to be ours (not read whole).
    const QList<QByteArray> foreign = {
        "[Desktop Entry]\nType=Application\nName=Mine\nExec=/usr/bin/tollgate-dashboard --home /srv/q\n",
        "[Desktop Entry]\nExec=/x\n# X-Tollgate-Autostart=true\n",
        "[Desktop Entry]\nExec=/x\nX-Tollgate-Autostart=truest\n",
        "[Desktop Entry]\nExec=/x\nX-Tollgate-Autostart=true" + QByteArray(70 * 1024, '#') + "\n",
    };
    for (const QByteArray& text : foreign) {
        writeFile(a.entryPath(), text);
        const ino_t before = inodeOf(a.entryPath());
        QVERIFY(a.isEnabled()); // it does start something with the session
        const auto done = a.enable();
        QVERIFY(!done.ok());
        QCOMPARE(done.error().kind, ErrorKind::Permission);
        QVERIFY2(QString::fromStdString(done.error().describe())
                     .contains(QStringLiteral("not written by Tollgate")),
            done.error().describe().c_str());
        const auto gone = a.disable();
        QVERIFY(!gone.ok());
        QCOMPARE(gone.error().kind, ErrorKind::Permission);
        QCOMPARE(readFile(a.entryPath()), text);
        QCOMPARE(inodeOf(a.entryPath()), before);
        QCOMPARE(entriesIn(config.path() + QStringLiteral("/autostart")).size(), 1);
    }
    // With the marker (CRLF line ends too) the entry is ours again.
    writeFile(a.entryPath(), "[Desktop Entry]\r\nExec=/old\r\nX-Tollgate-Autostart=true\r\n");
    QVERIFY(a.enable().ok());
    QVERIFY(readFile(a.entryPath()).contains("\nExec=/opt/tollgate/bin/tollgate-dashboard\n"));
    QVERIFY(a.disable().ok());
    QVERIFY(!QFile::exists(a.entryPath()));
}

void TestAutostart::unwritableFolderFailsCleanly()
{
    {
        AccessAsNobody probe;
        if (!probe.effective())
            QSKIP("running as root without the right to drop file access (setfsuid)");
    }
    QTemporaryDir config;
    QVERIFY(QFile::setPermissions(config.path(),
        QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner | QFile::ReadGroup | QFile::ExeGroup
            | QFile::ReadOther | QFile::ExeOther));
    Autostart a(config.path(), EXEC);
    const QString dir = config.path() + QStringLiteral("/autostart");
    QVERIFY(QDir().mkpath(dir));
    QVERIFY(a.enable().ok());
    QCOMPARE(::chmod(QFile::encodeName(dir).constData(), 0555), 0);
    {
        AccessAsNobody nobody;
        QVERIFY(a.isEnabled());
        const auto gone = a.disable();
        QVERIFY(!gone.ok());
        QCOMPARE(gone.error().kind, ErrorKind::Permission);
    }
    QVERIFY(a.isEnabled()); // still there
    QCOMPARE(::chmod(QFile::encodeName(dir).constData(), 0755), 0);
    QVERIFY(a.disable().ok());
    QCOMPARE(::chmod(QFile::encodeName(dir).constData(), 0555), 0);
    {
        AccessAsNobody nobody;
        const auto done = a.enable();
        QVERIFY(!done.ok());
        QCOMPARE(done.error().kind, ErrorKind::Permission);
        QVERIFY(!a.isEnabled());
    }
    QVERIFY(entriesIn(dir).isEmpty()); // no entry and no temp file
    QCOMPARE(::chmod(QFile::encodeName(dir).constData(), 0755), 0);
}

void TestAutostart::configHomeThatIsAFileFailsCleanly()
{
    QTemporaryDir root;
    const QString notADir = root.path() + QStringLiteral("/config");
    writeFile(notADir, "a file, not a folder");
    Autostart a(notADir, EXEC);
    QVERIFY(!a.isEnabled());
    QVERIFY(!a.enable().ok());
    QVERIFY(!a.disable().ok()); // ENOTDIR is not "no entry": the path is not what it should be
    QCOMPARE(readFile(notADir), QByteArray("a file, not a folder"));
    QCOMPARE(entriesIn(root.path()), QStringList { QStringLiteral("config") });
}

void TestAutostart::entryPassesDesktopFileValidate()
{
    const QString validator = QStandardPaths::findExecutable(QStringLiteral("desktop-file-validate"));
    if (validator.isEmpty())
        QSKIP("desktop-file-validate is not installed (Debian package desktop-file-utils)");
    for (const QString& exec : { EXEC, QStringLiteral("/home/a b/100%/tollgate-dashboard"),
             QStringLiteral("/home/o'neil/$HOME/`x`/back\\slash/\"q\"/tollgate-dashboard"),
             QStringLiteral("/home/ü/ツール/tollgate-dashboard") }) {
        QTemporaryDir config;
        Autostart a(config.path(), exec);
        QVERIFY2(a.enable().ok(), qPrintable(exec));
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(validator, { a.entryPath() });
        QVERIFY(p.waitForFinished(30000));
        const QByteArray out = p.readAll();
        QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0 && out.isEmpty(),
            qPrintable(exec + QStringLiteral(": ") + QString::fromUtf8(out)));
    }
}

void TestAutostart::settingsDialogKeepsAForeignEntry()
{
    QTemporaryDir config;
    Autostart entry(config.path(), EXEC);
    QVERIFY(QDir().mkpath(config.path() + QStringLiteral("/autostart")));
    const QByteArray mine
        = "[Desktop Entry]\nType=Application\nName=Mine\nExec=/usr/bin/tollgate-dashboard\n";
    writeFile(entry.entryPath(), mine);
    SettingsDialog d(5, 60, {}, 300);
    d.setAutostart(entry);
    auto* box = d.findChild<QCheckBox*>();
    QVERIFY(box->isChecked()); // it does start the dashboard with the session
    box->setChecked(false);
    d.accept();
    QVERIFY(d.result() != QDialog::Accepted);
    bool shown = false;
    for (auto* label : d.findChildren<QLabel*>())
        shown = shown
            || (!label->isHidden() && label->text().contains(QStringLiteral("not written by Tollgate")));
    QVERIFY(shown);
    QCOMPARE(readFile(entry.entryPath()), mine);
}

QTEST_MAIN(TestAutostart)
#include "tst_autostart.moc"
