#include "desktopnotifier.h"

#include <QDBusMessage>
#include <QDBusPendingCallWatcher>
#include <QDBusPendingReply>
#include <QSettings>
#include <QStringList>
#include <QVariantMap>

namespace tollgate::ui {

namespace {

const QString SERVICE = QStringLiteral("org.freedesktop.Notifications");
const QString PATH = QStringLiteral("/org/freedesktop/Notifications");
const QString INTERFACE = QStringLiteral("org.freedesktop.Notifications");
// The desktop file's id, so the desktop can group the notices under the dashboard.
const QString APP_ID = QStringLiteral("io.github.tollgate.Dashboard");

} // namespace

DesktopNotifier::DesktopNotifier(Fallback fallback, QObject* parent)
    : QObject(parent)
    , m_fallback(std::move(fallback))
{
}

DesktopNotifier::DesktopNotifier(const QDBusConnection& bus, Fallback fallback, QObject* parent)
    : QObject(parent)
    , m_bus(bus)
    , m_fallback(std::move(fallback))
{
}

void DesktopNotifier::notify(const QString& summary, const QString& body, Urgency urgency)
{
    if (!m_bus)
        m_bus = QDBusConnection::sessionBus();
    if (!m_bus->isConnected()) {
        fallBack(summary, body, urgency);
        return;
    }
    QDBusMessage call = QDBusMessage::createMethodCall(SERVICE, PATH, INTERFACE, QStringLiteral("Notify"));
    QVariantMap hints;
    hints.insert(QStringLiteral("urgency"), QVariant::fromValue(static_cast<uchar>(urgency)));
    hints.insert(QStringLiteral("desktop-entry"), APP_ID);
    // Notify(app_name, replaces_id, app_icon, summary, body, actions, hints, expire_timeout)
    call << QStringLiteral("Tollgate") << 0u << APP_ID << summary << body << QStringList() << hints << -1;
    auto* watcher = new QDBusPendingCallWatcher(m_bus->asyncCall(call, CALL_TIMEOUT_MS), this);
    connect(watcher, &QDBusPendingCallWatcher::finished, this,
        [this, summary, body, urgency](QDBusPendingCallWatcher* w) {
            w->deleteLater();
            const QDBusPendingReply<uint> reply = *w;
            if (reply.isError()) {
                fallBack(summary, body, urgency);
                return;
            }
            Q_EMIT delivered(Route::Service, summary);
        });
}

bool DesktopNotifier::notifyOnce(
    QSettings& settings, const QString& key, const QString& summary, const QString& body)
{
    if (settings.value(key, false).toBool())
        return false;
    settings.setValue(key, true);
    settings.sync();
    notify(summary, body);
    return true;
}

void DesktopNotifier::fallBack(const QString& summary, const QString& body, Urgency urgency)
{
    if (m_fallback)
        m_fallback(summary, body, urgency);
    Q_EMIT delivered(Route::Fallback, summary);
}

} // namespace tollgate::ui
