#pragma once

// DesktopNotifier: sends the dashboard's notices through the desktop's notification service
// (org.freedesktop.Notifications on the session bus) and falls back to the tray balloon
// where there is none.
//
// Never blocks the GUI thread: the Notify call is asynchronous, with a short timeout; the
// fallback runs when the bus is not connected (at once) or when the call fails or times out
// (no service, not activatable, hung). A service that is activatable but not running is
// started by the bus, which is what desktops expect. Every notice reports its route through
// delivered(), so tests see which path a notice took.

#include <QDBusConnection>
#include <QObject>
#include <QString>
#include <functional>
#include <optional>

QT_BEGIN_NAMESPACE
class QSettings;
QT_END_NAMESPACE

namespace tollgate::ui {

class DesktopNotifier final : public QObject
{
    Q_OBJECT
public:
    enum class Route { Service, Fallback };
    Q_ENUM(Route)
    enum class Urgency { Low, Normal, Critical };

    using Fallback = std::function<void(const QString& summary, const QString& body, Urgency urgency)>;

    static constexpr int CALL_TIMEOUT_MS = 5000;

    // Over the session bus, connected at the first notice (a window that never notifies
    // never starts QtDBus). fallback may be empty.
    explicit DesktopNotifier(Fallback fallback, QObject* parent = nullptr);
    // Over `bus` (tests pass a private bus, or an unconnected one).
    DesktopNotifier(const QDBusConnection& bus, Fallback fallback, QObject* parent = nullptr);

    void notify(const QString& summary, const QString& body, Urgency urgency = Urgency::Normal);

    // Shows the notice only if settings has no `key` set yet, then sets it, so the user is
    // told once across runs. Returns whether it was shown now.
    bool notifyOnce(QSettings& settings, const QString& key, const QString& summary, const QString& body);

Q_SIGNALS:
    void delivered(tollgate::ui::DesktopNotifier::Route route, const QString& summary);

private:
    void fallBack(const QString& summary, const QString& body, Urgency urgency);

    std::optional<QDBusConnection> m_bus; // empty until the first notice when lazy
    Fallback m_fallback;
};

} // namespace tollgate::ui
