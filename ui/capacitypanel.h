#pragma once

// CapacityPanel: one large tile per provider answering "can my next call go now?" — the
// headline (requests left, or BLOCKED / PAUSED / BACKING OFF), when the next request frees up,
// tokens left, slots free, and the backoff or pause reason — coloured ok / near / blocked and
// sized to be read from across the room. It only shows CapacityModel's rows: tiles are made
// when a provider appears and only their texts change on a tick. A subscription plan's usage
// is a line of its own under the figures, in the near / blocked colour when the plan is nearly
// or wholly used up, greyed when its figures are of a window that has reset since.
//
// Layout invariants (issue 28):
//  - every label of a tile has the width and height its text needs: tiles flow onto more rows
//    (FlowLayout) instead of being squeezed, and a tile wider than the whole panel makes the
//    panel scroll sideways rather than cut it;
//  - blocked tiles come first, then those that need attention (near a limit), then the rest,
//    each group in the model's order. A tile moves forward at once and back only once it has
//    been calmer for HOLD_MS, so a provider that flips between full and free every second
//    does not make the tiles jump on every tick;
//  - the panel asks for as many whole rows as fit into a quarter of its window's height (at
//    least one; all of them when it is a window of its own) and scrolls down to the rest, so
//    the charts keep their room at 1280×720 with many providers.

#include "capacitymodel.h"

#include <QHash>
#include <QWidget>

QT_BEGIN_NAMESPACE
class QFrame;
class QLabel;
class QScrollArea;
class QTimer;
QT_END_NAMESPACE

namespace tollgate::ui {

class FlowLayout;

class CapacityPanel final : public QWidget
{
    Q_OBJECT
public:
    static constexpr int MIN_HEIGHT = 84; // with no tile yet
    static constexpr qint64 HOLD_MS = 30'000; // before a tile that calmed down moves back

    explicit CapacityPanel(CapacityModel* model, QWidget* parent = nullptr);
    [[nodiscard]] QSize sizeHint() const override; // every row
    [[nodiscard]] QSize minimumSizeHint() const override; // the rows that fit its share

    // The texts a tile shows, joined by newlines (for tests and accessibility); empty: no tile.
    [[nodiscard]] QString tileText(const QString& provider) const;
    // The providers in the order their tiles are shown (blocked first).
    [[nodiscard]] QStringList providers() const { return m_order; }
    [[nodiscard]] QFrame* tile(const QString& provider) const;
    // How many times a tile's layout was invalidated to be measured again (for tests: a
    // snapshot that changes nothing a tile shows measures none).
    [[nodiscard]] int remeasuredTiles() const { return m_remeasured; }

Q_SIGNALS:
    void contextMenuRequested(const QString& provider, const QPoint& globalPos);

protected:
    void changeEvent(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void showEvent(QShowEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    struct Tile
    {
        QFrame* frame = nullptr;
        QLabel* name = nullptr;
        QLabel* headline = nullptr;
        QLabel* next = nullptr;
        QLabel* details = nullptr;
        QLabel* plan = nullptr; // a subscription plan's windows; hidden when none is stated
        CapacityModel::Level level = CapacityModel::Level::Ok;
        CapacityModel::PlanLevel planLevel = CapacityModel::PlanLevel::None;
        int rank = 0; // the group it is shown in: 0 blocked, 1 near, 2 ok (held; see HOLD_MS)
        qint64 calmerSinceMs = -1; // since when its level is calmer than its rank; -1: it is not
    };
    [[nodiscard]] QStringList displayOrder(qint64 nowMs);
    void applyOrder();
    void sync();
    void fitHeight(); // every tile's layout asked again
    void fitHeight(const QList<const Tile*>& fresh); // fresh: the tiles whose layouts are asked again
    [[nodiscard]] QList<const Tile*> allTiles() const;
    void style(Tile& tile, CapacityModel::Level level);
    void stylePlan(Tile& tile, CapacityModel::PlanLevel level);
    [[nodiscard]] QColor accentOf(CapacityModel::Level level) const;

    CapacityModel* m_model; // not owned
    FlowLayout* m_layout = nullptr; // of the scroll area's widget
    QScrollArea* m_scroll = nullptr; // child
    QLabel* m_empty = nullptr;
    QHash<QString, Tile> m_tiles;
    QStringList m_order;
    int m_fullHeight = MIN_HEIGHT; // every row
    QObject* m_watchedWindow = nullptr; // its height sets the panel's share
    QTimer* m_holdTimer = nullptr; // child
    int m_remeasured = 0;
};

} // namespace tollgate::ui
