#include "dashboardsettings.h"

#include "chartspan.h"
#include "stormdetector.h"

namespace tollgate::ui {

DashboardSettings::DashboardSettings(const QString& path)
    : m_settings(path.isEmpty() ? std::make_unique<QSettings>(QSettings::IniFormat, QSettings::UserScope,
                     QStringLiteral("tollgate"), QStringLiteral("dashboard"))
                                : std::make_unique<QSettings>(path, QSettings::IniFormat))
{
}

int DashboardSettings::stormThreshold() const
{
    return std::max(
        1, m_settings->value(QStringLiteral("storm/threshold"), StormDetector::DEFAULT_THRESHOLD).toInt());
}

int DashboardSettings::stormWindowSeconds() const
{
    const int fallback = static_cast<int>(StormDetector::DEFAULT_WINDOW_MS / 1000);
    return std::max(1, m_settings->value(QStringLiteral("storm/windowSeconds"), fallback).toInt());
}

void DashboardSettings::setStorm(int threshold, int windowSeconds)
{
    m_settings->setValue(QStringLiteral("storm/threshold"), threshold);
    m_settings->setValue(QStringLiteral("storm/windowSeconds"), windowSeconds);
}

QStringList DashboardSettings::lockDirs() const
{
    return m_settings->value(QStringLiteral("locks/dirs")).toStringList();
}

void DashboardSettings::setLockDirs(const QStringList& dirs)
{
    m_settings->setValue(QStringLiteral("locks/dirs"), dirs);
}

qint64 DashboardSettings::staleSeconds() const
{
    return m_settings->value(QStringLiteral("locks/staleSeconds"), 3600).toLongLong();
}

void DashboardSettings::setStaleSeconds(qint64 seconds)
{
    m_settings->setValue(QStringLiteral("locks/staleSeconds"), seconds);
}

qint64 DashboardSettings::usageSpanMs() const
{
    return ChartSpan::sanitize(m_settings->value(QStringLiteral("charts/usageSpanMs"), 0).toLongLong());
}

void DashboardSettings::setUsageSpanMs(qint64 spanMs)
{
    m_settings->setValue(QStringLiteral("charts/usageSpanMs"), ChartSpan::sanitize(spanMs));
}

qint64 DashboardSettings::rateLimitSpanMs() const
{
    return ChartSpan::sanitize(m_settings->value(QStringLiteral("charts/rateLimitSpanMs"), 0).toLongLong());
}

void DashboardSettings::setRateLimitSpanMs(qint64 spanMs)
{
    m_settings->setValue(QStringLiteral("charts/rateLimitSpanMs"), ChartSpan::sanitize(spanMs));
}

QByteArray DashboardSettings::splitterState(const QString& name) const
{
    return m_settings->value(QStringLiteral("splitters/") + name).toByteArray();
}

void DashboardSettings::setSplitterState(const QString& name, const QByteArray& state)
{
    m_settings->setValue(QStringLiteral("splitters/") + name, state);
}

QStringList DashboardSettings::hiddenPanels() const
{
    return m_settings->value(QStringLiteral("window/hiddenPanels")).toStringList();
}

void DashboardSettings::setHiddenPanels(const QStringList& panels)
{
    m_settings->setValue(QStringLiteral("window/hiddenPanels"), panels);
}

Theme::Kind DashboardSettings::theme() const
{
    return Theme::parse(m_settings->value(QStringLiteral("window/theme")).toString())
        .value_or(Theme::Kind::System);
}

void DashboardSettings::setTheme(Theme::Kind kind)
{
    m_settings->setValue(QStringLiteral("window/theme"), Theme::name(kind));
}

QByteArray DashboardSettings::geometry() const
{
    return m_settings->value(QStringLiteral("window/geometry")).toByteArray();
}

void DashboardSettings::setGeometry(const QByteArray& geometry)
{
    m_settings->setValue(QStringLiteral("window/geometry"), geometry);
}

QByteArray DashboardSettings::windowState() const
{
    return m_settings->value(QStringLiteral("window/state")).toByteArray();
}

void DashboardSettings::setWindowState(const QByteArray& state)
{
    m_settings->setValue(QStringLiteral("window/state"), state);
}

} // namespace tollgate::ui
