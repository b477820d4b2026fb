#pragma once

// DashboardSettings: what the dashboard remembers between runs — window geometry, splitter
// positions, hidden panels, chart spans, the theme, the storm alert threshold, the watched lock directories
// and the stale age for lock files. Backed by QSettings at an explicit file (tests pass a temporary one),
// never a global.

#include "theme.h"

#include <QSettings>
#include <QStringList>
#include <memory>

namespace tollgate::ui {

class DashboardSettings
{
public:
    // An empty path means the user's default location (~/.config/tollgate/dashboard.conf).
    explicit DashboardSettings(const QString& path = {});

    [[nodiscard]] QString path() const { return m_settings->fileName(); }

    [[nodiscard]] int stormThreshold() const;
    [[nodiscard]] int stormWindowSeconds() const;
    void setStorm(int threshold, int windowSeconds);

    [[nodiscard]] QStringList lockDirs() const;
    void setLockDirs(const QStringList& dirs);

    [[nodiscard]] qint64 staleSeconds() const;
    void setStaleSeconds(qint64 seconds);

    // Chart spans in ms: ChartSpan::AUTO (the default) or one of ChartSpan::spans().
    [[nodiscard]] qint64 usageSpanMs() const;
    void setUsageSpanMs(qint64 spanMs);
    [[nodiscard]] qint64 rateLimitSpanMs() const;
    void setRateLimitSpanMs(qint64 spanMs);

    // Splitter positions (QSplitter::saveState) by splitter name, and the panels hidden.
    [[nodiscard]] QByteArray splitterState(const QString& name) const;
    void setSplitterState(const QString& name, const QByteArray& state);
    [[nodiscard]] QStringList hiddenPanels() const;
    void setHiddenPanels(const QStringList& panels);

    // The colours (Settings → Theme); System when unset or unreadable.
    [[nodiscard]] Theme::Kind theme() const;
    void setTheme(Theme::Kind kind);

    [[nodiscard]] QByteArray geometry() const;
    void setGeometry(const QByteArray& geometry);
    [[nodiscard]] QByteArray windowState() const;
    void setWindowState(const QByteArray& state);

    void sync() { m_settings->sync(); }

private:
    std::unique_ptr<QSettings> m_settings;
};

} // namespace tollgate::ui
