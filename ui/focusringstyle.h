#pragma once

// FocusRingStyle: a proxy over the chosen style that draws keyboard focus as a 2 px ring in
// the palette's highlight colour — on a focused cell (PE_FrameFocusRect) and around the
// focused widget (CE_FocusFrame, drawn by the QFocusFrame that Theme keeps on the focus
// widget). Everything else is the base style's.

#include <QProxyStyle>

namespace tollgate::ui {

class FocusRingStyle final : public QProxyStyle
{
    Q_OBJECT
public:
    static constexpr int RING_WIDTH = 2;

    // Takes ownership of base (QProxyStyle's rule).
    explicit FocusRingStyle(QStyle* base);

    void drawPrimitive(PrimitiveElement element, const QStyleOption* option, QPainter* painter,
        const QWidget* widget = nullptr) const override;
    void drawControl(ControlElement element, const QStyleOption* option, QPainter* painter,
        const QWidget* widget = nullptr) const override;
    int pixelMetric(PixelMetric metric, const QStyleOption* option = nullptr,
        const QWidget* widget = nullptr) const override;
};

} // namespace tollgate::ui
