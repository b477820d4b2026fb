#pragma once

// ChartsPanel: the per-caller usage chart and the 429 history side by side, each over its
// table (in a splitter of its own: either can be given the room), with the span, the kind
// (requests or tokens) and the zoom reset. The choices act on the charts at once and are
// announced (spans to be remembered, chartsChanged to redraw from the history); the data is
// the window's to hand in (update()).

#include <QSplitter>

QT_BEGIN_NAMESPACE
class QAbstractItemModel;
class QComboBox;
class QPushButton;
class QSortFilterProxyModel;
QT_END_NAMESPACE

namespace tollgate::ui {

class KeyedTableView;
class RateLimitChart;
class UsageChart;

class ChartsPanel final : public QSplitter
{
    Q_OBJECT
public:
    ChartsPanel(QAbstractItemModel* callerUsage, QAbstractItemModel* rateLimitCallers, qint64 usageSpanMs,
        qint64 rateLimitSpanMs, QWidget* parent = nullptr);

    [[nodiscard]] UsageChart* usageChart() const { return m_usageChart; }
    [[nodiscard]] RateLimitChart* rateLimitChart() const { return m_rateLimitChart; }
    [[nodiscard]] KeyedTableView* callersView() const { return m_callersView; }
    [[nodiscard]] KeyedTableView* rateLimitView() const { return m_rateLimitView; }
    [[nodiscard]] QComboBox* usageKind() const { return m_usageKind; }
    [[nodiscard]] QComboBox* usageSpan() const { return m_usageSpan; }
    [[nodiscard]] QComboBox* rateLimitSpan() const { return m_rateLimitSpan; }

Q_SIGNALS:
    void usageSpanChanged(qint64 spanMs);
    void rateLimitSpanChanged(qint64 spanMs);
    void chartsChanged(); // what the charts show changed: redraw them from the history

private:
    [[nodiscard]] static QComboBox* makeSpanBox(QWidget* parent, const QString& name, qint64 current);

    UsageChart* m_usageChart = nullptr; // owned by the widget tree
    RateLimitChart* m_rateLimitChart = nullptr; // owned by the widget tree
    KeyedTableView* m_callersView = nullptr; // owned by the widget tree
    KeyedTableView* m_rateLimitView = nullptr; // owned by the widget tree
    QComboBox* m_usageKind = nullptr; // owned by the widget tree
    QComboBox* m_usageSpan = nullptr; // owned by the widget tree
    QComboBox* m_rateLimitSpan = nullptr; // owned by the widget tree
    QPushButton* m_usageZoomReset = nullptr; // owned by the widget tree
    QPushButton* m_rateZoomReset = nullptr; // owned by the widget tree
};

} // namespace tollgate::ui
