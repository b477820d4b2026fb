#include "theme.h"

#include "focusringstyle.h"

#include <QApplication>
#include <QFocusFrame>
#include <QMenu>
#include <QStyle>
#include <QStyleFactory>

namespace tollgate::ui {

std::optional<Theme::Kind> Theme::parse(const QString& name)
{
    if (name == QLatin1String("system"))
        return Kind::System;
    if (name == QLatin1String("light"))
        return Kind::Light;
    if (name == QLatin1String("dark"))
        return Kind::Dark;
    return std::nullopt;
}

QString Theme::name(Kind kind)
{
    switch (kind) {
    case Kind::Light:
        return QStringLiteral("light");
    case Kind::Dark:
        return QStringLiteral("dark");
    case Kind::System:
        break;
    }
    return QStringLiteral("system");
}

// A dark palette like the desktops' dark themes (Fusion's roles, Breeze Dark's tones), so
// the Dark theme shows what a dark desktop gets: the charts and tiles follow the palette.
QPalette Theme::darkPalette()
{
    QPalette p;
    const QColor window(0x2a, 0x2e, 0x32);
    const QColor base(0x1b, 0x1e, 0x20);
    const QColor text(0xfc, 0xfc, 0xfc);
    const QColor disabled(0x7f, 0x8c, 0x8d);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, QColor(0x23, 0x26, 0x29));
    p.setColor(QPalette::ToolTipBase, QColor(0x31, 0x36, 0x3b));
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, disabled);
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, QColor(0x31, 0x36, 0x3b));
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, QColor(0xff, 0x6b, 0x6b));
    p.setColor(QPalette::Light, QColor(0x40, 0x46, 0x4c));
    p.setColor(QPalette::Midlight, QColor(0x36, 0x3b, 0x40));
    p.setColor(QPalette::Mid, QColor(0x5a, 0x61, 0x68));
    p.setColor(QPalette::Dark, QColor(0x15, 0x17, 0x19));
    p.setColor(QPalette::Shadow, QColor(0x0c, 0x0d, 0x0e));
    p.setColor(QPalette::Highlight, QColor(0x3d, 0xae, 0xe9));
    p.setColor(QPalette::HighlightedText, QColor(0x10, 0x10, 0x10));
    p.setColor(QPalette::Link, QColor(0x3d, 0xae, 0xe9));
    for (QPalette::ColorRole role : { QPalette::WindowText, QPalette::Text, QPalette::ButtonText })
        p.setColor(QPalette::Disabled, role, disabled);
    return p;
}

Theme::Theme()
{
    connect(qApp, &QApplication::focusChanged, this, [this](QWidget*, QWidget* now) { follow(now); });
}

Theme& Theme::instance()
{
    // Parented to the application, so it goes before QApplication does.
    static Theme* theme = [] {
        auto* t = new Theme();
        t->setParent(qApp);
        return t;
    }();
    return *theme;
}

void Theme::apply(Kind kind)
{
    Theme& self = instance();
    if (!self.m_recorded) {
        self.m_startStyle = QApplication::style()->name();
        self.m_startPalette = QApplication::palette();
        self.m_recorded = true;
    }
    const QString styleName = kind == Kind::System ? self.m_startStyle : QStringLiteral("fusion");
    QStyle* base = QStyleFactory::create(styleName);
    if (!base)
        base = QStyleFactory::create(QStringLiteral("fusion"));
    QApplication::setStyle(new FocusRingStyle(base));
    switch (kind) {
    case Kind::System:
        QApplication::setPalette(self.m_startPalette);
        break;
    case Kind::Light:
        QApplication::setPalette(QApplication::style()->standardPalette());
        break;
    case Kind::Dark:
        QApplication::setPalette(darkPalette());
        break;
    }
    self.m_current = kind;
    self.follow(QApplication::focusWidget());
}

Theme::Kind Theme::current()
{
    return instance().m_current;
}

QWidget* Theme::focusFrame()
{
    return instance().m_frame;
}

void Theme::follow(QWidget* now)
{
    if (!m_recorded)
        return; // no theme applied: the application's own look, untouched
    // A window, a menu or the frame itself gets no ring: a ring around a whole window or a
    // popup says nothing about where the keys go.
    if (!now || now->isWindow() || qobject_cast<QMenu*>(now) || qobject_cast<QFocusFrame*>(now)) {
        if (m_frame)
            m_frame->setWidget(nullptr);
        return;
    }
    if (!m_frame)
        m_frame = new QFocusFrame(now->window());
    m_frame->setWidget(now);
}

} // namespace tollgate::ui
