#pragma once

// CapacityPanel: one large tile per provider answering "can my next call go now?" — the
// headline (requests left, or BLOCKED / PAUSED / BACKING OFF), when the next request frees up,
// tokens left, slots free, and the backoff or pause reason — coloured ok / near / blocked and
// sized to be read from across the room. It only shows CapacityModel's rows: tiles are made
// when a provider appears and only their texts change on a tick. A subscription plan's usage
// is a line of its own under the figures, in the near / blocked colour when the plan is nearly
// or wholly used up, greyed when its figures are of a window that has reset since.

#include "capacitymodel.h"

#include <QHash>
#include <QWidget>

QT_BEGIN_NAMESPACE
class QFrame;
class QHBoxLayout;
class QLabel;
class QScrollArea;
QT_END_NAMESPACE

namespace tollgate::ui {

class CapacityPanel final : public QWidget
{
    Q_OBJECT
public:
    static constexpr int MIN_HEIGHT = 84;

    explicit CapacityPanel(CapacityModel* model, QWidget* parent = nullptr);
    [[nodiscard]] QSize sizeHint() const override;

    // The texts a tile shows, joined by newlines (for tests and accessibility); empty: no tile.
    [[nodiscard]] QString tileText(const QString& provider) const;
    [[nodiscard]] QStringList providers() const { return m_order; }

Q_SIGNALS:
    void contextMenuRequested(const QString& provider, const QPoint& globalPos);

protected:
    void changeEvent(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
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
    };
    void sync();
    void fitHeight();
    void style(Tile& tile, CapacityModel::Level level);
    void stylePlan(Tile& tile, CapacityModel::PlanLevel level);
    [[nodiscard]] QColor accentOf(CapacityModel::Level level) const;

    CapacityModel* m_model; // not owned
    QHBoxLayout* m_layout = nullptr;
    QScrollArea* m_scroll = nullptr; // child
    QLabel* m_empty = nullptr;
    QHash<QString, Tile> m_tiles;
    QStringList m_order;
};

} // namespace tollgate::ui
