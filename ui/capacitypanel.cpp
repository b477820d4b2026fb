#include "capacitypanel.h"

#include <QContextMenuEvent>
#include <QEvent>
#include <QFrame>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QVBoxLayout>

namespace tollgate::ui {

CapacityPanel::CapacityPanel(CapacityModel* model, QWidget* parent)
    : QWidget(parent)
    , m_model(model)
{
    setObjectName(QStringLiteral("capacityPanel"));
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(0, 0, 0, 0);
    auto* scroll = new QScrollArea(this);
    m_scroll = scroll;
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    auto* inner = new QWidget(scroll);
    m_layout = new QHBoxLayout(inner);
    m_layout->setContentsMargins(2, 2, 2, 2);
    m_layout->setSpacing(8);
    m_empty = new QLabel(tr("No provider has limits yet."), inner);
    m_layout->addWidget(m_empty);
    m_layout->addStretch(1);
    scroll->setWidget(inner);
    outer->addWidget(scroll);
    connect(m_model, &CapacityModel::changed, this, &CapacityPanel::sync);
    sync();
}

void CapacityPanel::sync()
{
    const QVector<CapacityModel::Row>& rows = m_model->rows();
    QStringList order;
    for (const auto& row : rows)
        order.append(row.provider);
    if (order != m_order) {
        // The set of providers changed (rare): tiles are made or dropped, never per tick.
        for (auto it = m_tiles.begin(); it != m_tiles.end();) {
            if (!order.contains(it.key())) {
                it->frame->deleteLater();
                it = m_tiles.erase(it);
            } else {
                ++it;
            }
        }
        for (const QString& provider : order) {
            if (m_tiles.contains(provider))
                continue;
            Tile t;
            t.frame = new QFrame(m_layout->parentWidget());
            t.frame->setObjectName(QStringLiteral("capacityTile"));
            t.frame->setProperty("provider", provider);
            t.frame->setFrameShape(QFrame::StyledPanel);
            t.frame->setAutoFillBackground(true);
            // No fixed minimum: a tile is never narrower than its texts (QLabel's minimum),
            // and when the tiles need more than the window has, the panel scrolls sideways.
            t.frame->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Preferred);
            t.frame->installEventFilter(this);
            // Headline and countdown at the left, big; the figures at the right: a tile is
            // about 80 px high, so the panel leaves the charts their room at 1280×720.
            auto* grid = new QGridLayout(t.frame);
            grid->setContentsMargins(10, 4, 10, 4);
            grid->setHorizontalSpacing(14);
            grid->setVerticalSpacing(0);
            t.name = new QLabel(provider, t.frame);
            QFont nameFont = t.name->font();
            nameFont.setBold(true);
            t.name->setFont(nameFont);
            t.headline = new QLabel(t.frame);
            t.headline->setObjectName(QStringLiteral("capacityHeadline"));
            QFont big = t.headline->font();
            big.setPointSizeF(big.pointSizeF() * 1.9);
            big.setBold(true);
            t.headline->setFont(big);
            t.next = new QLabel(t.frame);
            t.next->setObjectName(QStringLiteral("capacityNext"));
            QFont mid = t.next->font();
            mid.setPointSizeF(mid.pointSizeF() * 1.15);
            mid.setBold(true);
            t.next->setFont(mid);
            t.details = new QLabel(t.frame);
            t.details->setObjectName(QStringLiteral("capacityDetails"));
            t.plan = new QLabel(t.frame);
            t.plan->setObjectName(QStringLiteral("capacityPlan"));
            t.plan->hide();
            for (QLabel* l : { t.name, t.headline, t.next, t.details, t.plan })
                l->setTextFormat(Qt::PlainText);
            grid->addWidget(t.name, 0, 0);
            grid->addWidget(t.headline, 1, 0);
            grid->addWidget(t.next, 2, 0);
            // The figures and, under them, the plan (a label of its own: it has its own colour).
            auto* figures = new QVBoxLayout;
            figures->setSpacing(0);
            figures->addWidget(t.details);
            figures->addWidget(t.plan);
            figures->addStretch(1);
            grid->addLayout(figures, 0, 1, 3, 1, Qt::AlignTop | Qt::AlignLeft);
            grid->setColumnStretch(1, 1);
            t.level = CapacityModel::Level::Unstyled;
            m_tiles.insert(provider, t);
        }
        // Lay them out in the model's order.
        for (const QString& provider : order)
            m_layout->removeWidget(m_tiles[provider].frame);
        for (int i = 0; i < order.size(); ++i)
            m_layout->insertWidget(i, m_tiles[order[i]].frame);
        m_order = order;
        m_empty->setVisible(order.isEmpty());
    }
    for (const auto& row : rows) {
        Tile& t = m_tiles[row.provider];
        t.headline->setText(row.headline);
        t.next->setText(row.next);
        t.next->setVisible(!row.next.isEmpty());
        t.details->setText(row.details.join(QLatin1Char('\n')));
        t.plan->setText(row.plan);
        t.plan->setVisible(!row.plan.isEmpty());
        if (t.planLevel != row.planLevel)
            stylePlan(t, row.planLevel);
        t.frame->setToolTip(row.tooltip);
        if (t.level != row.level)
            style(t, row.level);
    }
    fitHeight();
}

void CapacityPanel::fitHeight()
{
    // As tall as the tallest tile needs (a provider with input, output and per-day budgets has
    // more lines), plus the sideways scroll bar when the tiles are wider than the panel: the
    // splitter can then never cut a tile's text.
    // The layouts are asked afresh: a label's new text reaches them only on the next layout pass.
    int needed = 0;
    int width = 0;
    for (const Tile& t : std::as_const(m_tiles)) {
        t.frame->layout()->invalidate();
        const QSize min = t.frame->minimumSizeHint();
        needed = std::max(needed, min.height());
        width += min.width() + m_layout->spacing();
    }
    m_layout->invalidate();
    const QMargins margins = m_layout->contentsMargins();
    needed += margins.top() + margins.bottom();
    width += margins.left() + margins.right();
    const bool scrolls = width > m_scroll->viewport()->width();
    const int height = std::max(MIN_HEIGHT,
        needed + (scrolls ? m_scroll->horizontalScrollBar()->sizeHint().height() : 0) + 2 * m_scroll->frameWidth());
    if (height != minimumHeight())
        setMinimumHeight(height);
}

QSize CapacityPanel::sizeHint() const
{
    return { QWidget::sizeHint().width(), minimumHeight() };
}

void CapacityPanel::resizeEvent(QResizeEvent* event)
{
    QWidget::resizeEvent(event);
    fitHeight();
}

QColor CapacityPanel::accentOf(CapacityModel::Level level) const
{
    const bool dark = palette().color(QPalette::Window).lightness() < 128;
    QColor accent;
    switch (level) {
    case CapacityModel::Level::Ok:
        accent = dark ? QColor(0x5f, 0xd0, 0x8a) : QColor(0x1e, 0x7e, 0x3e);
        break;
    case CapacityModel::Level::Near:
        accent = dark ? QColor(0xf2, 0xc0, 0x4a) : QColor(0x9a, 0x5b, 0x00);
        break;
    case CapacityModel::Level::Blocked:
    case CapacityModel::Level::Unstyled: // only a marker that forces the next style(); never asked for
        accent = dark ? QColor(0xff, 0x7b, 0x72) : QColor(0xb4, 0x1c, 0x1c);
        break;
    }
    return accent;
}

void CapacityPanel::stylePlan(Tile& tile, CapacityModel::PlanLevel level)
{
    tile.planLevel = level;
    QPalette p = tile.frame->palette();
    QFont f = tile.details->font();
    switch (level) {
    case CapacityModel::PlanLevel::Warning:
        p.setColor(QPalette::WindowText, accentOf(CapacityModel::Level::Near));
        f.setBold(true);
        break;
    case CapacityModel::PlanLevel::Rejected:
        p.setColor(QPalette::WindowText, accentOf(CapacityModel::Level::Blocked));
        f.setBold(true);
        break;
    case CapacityModel::PlanLevel::Old:
        // Figures of an earlier window: there, but not to be read as now.
        p.setColor(QPalette::WindowText, palette().color(QPalette::Disabled, QPalette::Text));
        f.setItalic(true);
        break;
    case CapacityModel::PlanLevel::None:
    case CapacityModel::PlanLevel::Allowed:
        break;
    }
    tile.plan->setPalette(p);
    tile.plan->setFont(f);
    tile.plan->setProperty("planLevel", static_cast<int>(level));
}

void CapacityPanel::style(Tile& tile, CapacityModel::Level level)
{
    tile.level = level;
    const QPalette base = palette();
    const QColor accent = accentOf(level);
    // A tint of the accent over the base: readable in light and dark palettes alike.
    const QColor bg = base.color(QPalette::Base);
    const QColor tint = QColor::fromRgbF(bg.redF() * 0.85f + accent.redF() * 0.15f,
        bg.greenF() * 0.85f + accent.greenF() * 0.15f, bg.blueF() * 0.85f + accent.blueF() * 0.15f);
    QPalette p = tile.frame->palette();
    p.setColor(QPalette::Window, tint);
    p.setColor(QPalette::WindowText, base.color(QPalette::Text));
    tile.frame->setPalette(p);
    QPalette h = tile.headline->palette();
    h.setColor(QPalette::WindowText, accent);
    tile.headline->setPalette(h);
    tile.next->setPalette(h);
    tile.frame->setProperty("level", static_cast<int>(level));
    stylePlan(tile, tile.planLevel); // over the frame's new palette
}

QString CapacityPanel::tileText(const QString& provider) const
{
    auto it = m_tiles.constFind(provider);
    if (it == m_tiles.constEnd())
        return {};
    QStringList parts { it->name->text(), it->headline->text() };
    if (!it->next->text().isEmpty())
        parts.append(it->next->text());
    parts.append(it->details->text());
    if (!it->plan->text().isEmpty())
        parts.append(it->plan->text());
    return parts.join(QLatin1Char('\n'));
}

void CapacityPanel::changeEvent(QEvent* event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange || event->type() == QEvent::ApplicationPaletteChange) {
        for (auto& t : m_tiles)
            style(t, t.level);
    }
}

bool CapacityPanel::eventFilter(QObject* watched, QEvent* event)
{
    if (event->type() == QEvent::ContextMenu) {
        auto* frame = qobject_cast<QFrame*>(watched);
        if (frame) {
            Q_EMIT contextMenuRequested(
                frame->property("provider").toString(), static_cast<QContextMenuEvent*>(event)->globalPos());
            return true;
        }
    }
    return QWidget::eventFilter(watched, event);
}

} // namespace tollgate::ui
