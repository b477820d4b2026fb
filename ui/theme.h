#pragma once

// Theme: the dashboard's colours, chosen in Settings (remembered) or for one run by
// --palette. Light and Dark use Fusion, which draws every widget from the palette (a platform
// style may not); System gives back the style and palette the application started with. Every
// theme draws a visible keyboard focus ring (FocusRingStyle over the chosen style, and a
// QFocusFrame that follows the focused widget), since Fusion's own is a faint 1 px line.
// Application-wide state: call from the GUI thread only.

#include <QObject>
#include <QPalette>
#include <QPointer>
#include <QString>
#include <optional>

QT_BEGIN_NAMESPACE
class QFocusFrame;
class QWidget;
QT_END_NAMESPACE

namespace tollgate::ui {

class Theme final : public QObject
{
    Q_OBJECT
public:
    enum class Kind { System, Light, Dark };

    // "system", "light", "dark"; anything else is nullopt.
    [[nodiscard]] static std::optional<Kind> parse(const QString& name);
    [[nodiscard]] static QString name(Kind kind);
    [[nodiscard]] static QPalette darkPalette();

    // Applies a theme to the whole application (style, palette, focus ring). The first call
    // records what the application started with, for System.
    static void apply(Kind kind);
    [[nodiscard]] static Kind current();

    // The focus frame that follows the focused widget (for tests); null before apply().
    [[nodiscard]] static QWidget* focusFrame();

private:
    Theme();
    static Theme& instance();
    void follow(QWidget* now);

    QString m_startStyle;
    QPalette m_startPalette;
    bool m_recorded = false;
    Kind m_current = Kind::System;
    QPointer<QFocusFrame> m_frame; // parented to the focused widget's window; may be deleted with it
};

} // namespace tollgate::ui
