#include "capacitypanel.h"

#include "flowlayout.h"

#include <QContextMenuEvent>
#include <QEvent>
#include <QFrame>
#include <QGridLayout>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <numeric>

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
    // Down to the rows that do not fit the panel's share; sideways only for a tile wider
    // than the whole panel (a very narrow window).
    scroll->setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    auto* inner = new QWidget(scroll);
    inner->setObjectName(QStringLiteral("capacityTiles"));
    m_layout = new FlowLayout(inner);
    m_layout->setContentsMargins(2, 2, 2, 2);
    m_layout->setSpacing(8);
    m_empty = new QLabel(tr("No provider has limits yet."), inner);
    m_layout->addWidget(m_empty);
    scroll->setWidget(inner);
    outer->addWidget(scroll);
    // A tile's size can change after sync() (its labels shown with the panel, a font): the
    // share is measured again whenever the tiles' layout is redone.
    inner->installEventFilter(this);
    m_holdTimer = new QTimer(this);
    m_holdTimer->setSingleShot(true);
    m_holdTimer->setInterval(1000);
    connect(m_holdTimer, &QTimer::timeout, this, &CapacityPanel::applyOrder);
    connect(m_model, &CapacityModel::changed, this, &CapacityPanel::sync);
    sync();
}

QStringList CapacityPanel::displayOrder(qint64 nowMs)
{
    // Blocked first, then near a limit, then the rest; each group in the model's order. A
    // tile joins a more urgent group at once and a calmer one only after HOLD_MS there.
    auto rankOf = [](CapacityModel::Level level) {
        switch (level) {
        case CapacityModel::Level::Blocked:
        case CapacityModel::Level::Unstyled:
            return 0;
        case CapacityModel::Level::Near:
            return 1;
        case CapacityModel::Level::Ok:
            break;
        }
        return 2;
    };
    QStringList groups[3];
    for (const auto& row : m_model->rows()) {
        Tile& t = m_tiles[row.provider];
        const int now = rankOf(row.level);
        if (now <= t.rank) {
            t.rank = now;
            t.calmerSinceMs = -1;
        } else if (t.calmerSinceMs < 0 || nowMs < t.calmerSinceMs) {
            t.calmerSinceMs = nowMs;
        } else if (nowMs - t.calmerSinceMs >= HOLD_MS) {
            t.rank = now;
            t.calmerSinceMs = -1;
        }
        groups[std::clamp(t.rank, 0, 2)].append(row.provider);
    }
    return groups[0] + groups[1] + groups[2];
}

void CapacityPanel::applyOrder()
{
    // The order changes only when a tile changes group (held, see HOLD_MS): the widgets are
    // moved then, not on every tick.
    if (const QStringList order = displayOrder(m_model->nowMs()); order != m_order) {
        QList<QWidget*> frames;
        for (const QString& provider : order)
            frames.append(m_tiles[provider].frame);
        m_layout->reorder(frames);
        m_order = order;
    }
    // A tile waiting to move back is looked at again even when no text changes meanwhile.
    const bool waiting
        = std::any_of(m_tiles.cbegin(), m_tiles.cend(), [](const Tile& t) { return t.calmerSinceMs >= 0; });
    if (waiting && !m_holdTimer->isActive())
        m_holdTimer->start();
}

void CapacityPanel::sync()
{
    const QVector<CapacityModel::Row>& rows = m_model->rows();
    QStringList providers;
    for (const auto& row : rows)
        providers.append(row.provider);
    const bool sameSet = m_tiles.size() == providers.size()
        && std::all_of(
            providers.cbegin(), providers.cend(), [this](const QString& p) { return m_tiles.contains(p); });
    if (!sameSet) {
        // The set of providers changed (rare): tiles are made or dropped, never per tick.
        for (auto it = m_tiles.begin(); it != m_tiles.end();) {
            if (!providers.contains(it.key())) {
                it->frame->deleteLater();
                it = m_tiles.erase(it);
            } else {
                ++it;
            }
        }
        for (const QString& provider : providers) {
            if (m_tiles.contains(provider))
                continue;
            Tile t;
            t.frame = new QFrame(m_layout->parentWidget());
            t.frame->setObjectName(QStringLiteral("capacityTile"));
            t.frame->setProperty("provider", provider);
            t.frame->setFrameShape(QFrame::StyledPanel);
            t.frame->setAutoFillBackground(true);
            // No fixed minimum: a tile is never narrower than its texts (QLabel's minimum);
            // when the tiles need more than a row, they wrap (FlowLayout).
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
            // Shown now (the plan when it has a text): the tile's size counts them even while
            // the panel is not on screen yet.
            for (QLabel* l : { t.name, t.headline, t.next, t.details })
                l->show();
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
            t.rank = 2;
            m_tiles.insert(provider, t);
            m_layout->addWidget(t.frame);
            t.frame->show(); // now, not queued: fitHeight() below measures the shown tiles
        }
        m_empty->setVisible(providers.isEmpty());
    }
    applyOrder();
    // Only the tiles whose texts changed are measured again: on a snapshot most tiles say the
    // same, and redoing all of them (and the whole flow) each time cost ~1 % of a core with 40
    // providers at 100 admissions/s.
    QList<const Tile*> changed;
    for (const auto& row : rows) {
        Tile& t = m_tiles[row.provider];
        const QString details = row.details.join(QLatin1Char('\n'));
        const bool resized = t.headline->text() != row.headline || t.next->text() != row.next
            || t.details->text() != details || t.plan->text() != row.plan
            || t.next->isVisibleTo(t.frame) == row.next.isEmpty()
            || t.plan->isVisibleTo(t.frame) == row.plan.isEmpty() || t.planLevel != row.planLevel;
        if (resized) {
            t.headline->setText(row.headline);
            t.next->setText(row.next);
            t.next->setVisible(!row.next.isEmpty());
            t.details->setText(details);
            t.plan->setText(row.plan);
            t.plan->setVisible(!row.plan.isEmpty());
            if (t.planLevel != row.planLevel)
                stylePlan(t, row.planLevel); // a bold or italic font: another size
            changed.append(&t);
        }
        if (t.frame->toolTip() != row.tooltip)
            t.frame->setToolTip(row.tooltip);
        if (t.level != row.level)
            style(t, row.level);
    }
    if (!sameSet || !changed.isEmpty())
        fitHeight(sameSet ? changed : allTiles());
}

QList<const CapacityPanel::Tile*> CapacityPanel::allTiles() const
{
    QList<const Tile*> out;
    out.reserve(m_tiles.size());
    for (const Tile& t : m_tiles)
        out.append(&t);
    return out;
}

void CapacityPanel::fitHeight()
{
    fitHeight(allTiles());
}

void CapacityPanel::fitHeight(const QList<const Tile*>& fresh)
{
    // The layouts of the tiles in fresh are asked afresh: a label's new text reaches them only
    // on the next layout pass. None when called for that pass itself: invalidating posts
    // another one.
    if (!fresh.isEmpty()) {
        for (const Tile* t : fresh) {
            t->frame->layout()->invalidate();
            t->frame->updateGeometry();
        }
        m_layout->invalidate();
        m_remeasured += fresh.size();
    }
    const int width = std::max(1, m_scroll->width() - 2 * m_scroll->frameWidth());
    const QMargins margins = m_layout->contentsMargins();
    const int gap = m_layout->spacing();
    // A tile wider than the panel: the sideways scroll bar, under the rows.
    const bool sideways = m_layout->minimumSize().width() > width;
    const int extra
        = 2 * m_scroll->frameWidth() + (sideways ? m_scroll->horizontalScrollBar()->sizeHint().height() : 0);
    QList<int> rows = m_layout->rowHeights(width);
    const int all = margins.top() + margins.bottom() + extra + std::accumulate(rows.cbegin(), rows.cend(), 0)
        + gap * std::max<int>(0, int(rows.size()) - 1);
    // The share of the window: whole rows, at least one.
    const int share = isWindow() ? all : window()->height() / 4;
    int shown = margins.top() + margins.bottom() + extra;
    int count = 0;
    if (all > share) {
        // Scrolling down: the vertical scroll bar takes some width, the rows may be more.
        rows = m_layout->rowHeights(std::max(1, width - m_scroll->verticalScrollBar()->sizeHint().width()));
    }
    for (int r : std::as_const(rows)) {
        const int next = shown + r + (count > 0 ? gap : 0);
        if (count > 0 && next > share)
            break;
        shown = next;
        ++count;
    }
    // Whole rows only: a sliver of the next row would look like a cut tile.
    const int floor = m_tiles.isEmpty() ? MIN_HEIGHT : 0;
    const int height = std::max(floor, all <= share ? all : shown);
    const int full = std::max(floor, all);
    if (height != minimumHeight() || full != m_fullHeight) {
        m_fullHeight = full;
        setMinimumHeight(height);
        updateGeometry();
    }
}

QSize CapacityPanel::sizeHint() const
{
    return { QWidget::sizeHint().width(), std::max(minimumHeight(), m_fullHeight) };
}

QSize CapacityPanel::minimumSizeHint() const
{
    return { QWidget::minimumSizeHint().width(), minimumHeight() };
}

QFrame* CapacityPanel::tile(const QString& provider) const
{
    auto it = m_tiles.constFind(provider);
    return it == m_tiles.constEnd() ? nullptr : it->frame;
}

void CapacityPanel::resizeEvent(QResizeEvent* event)
{
    QWidget::resizeEvent(event);
    fitHeight();
}

void CapacityPanel::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    // The panel's share follows its window's height.
    if (!isWindow() && m_watchedWindow != window()) {
        if (m_watchedWindow)
            m_watchedWindow->removeEventFilter(this);
        m_watchedWindow = window();
        m_watchedWindow->installEventFilter(this);
    }
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
    if ((watched == m_watchedWindow && event->type() == QEvent::Resize)
        || (watched == m_layout->parentWidget() && event->type() == QEvent::LayoutRequest)) {
        if (event->type() == QEvent::LayoutRequest)
            fitHeight(QList<const Tile*> {});
        else
            fitHeight();
        return false;
    }
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
