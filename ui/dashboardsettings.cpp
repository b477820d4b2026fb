#include "dashboardsettings.h"

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

int DashboardSettings::rateLimitSpanHours() const
{
    return std::clamp(m_settings->value(QStringLiteral("charts/rateLimitHours"), 24).toInt(), 1, 24);
}

void DashboardSettings::setRateLimitSpanHours(int hours)
{
    m_settings->setValue(QStringLiteral("charts/rateLimitHours"), hours);
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
