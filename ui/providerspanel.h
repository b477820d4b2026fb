#pragma once

// ProvidersPanel: the providers' figures and every limit, as two tabs — usage and the common
// limits of each provider in one, every limit of every scope (input and output tokens, per
// day, the day reset, backoff, model classes) in the other. The tabs are the panel's title: a
// group box's title line as well would cost a 1280×720 screen another row. It builds the
// views; the window decides what their menus and edits do.

#include <QWidget>

QT_BEGIN_NAMESPACE
class QTabWidget;
QT_END_NAMESPACE

namespace tollgate::ui {

class KeyedTableView;
class LimitsModel;
class ProvidersModel;

class ProvidersPanel final : public QWidget
{
    Q_OBJECT
public:
    ProvidersPanel(ProvidersModel* providers, LimitsModel* limits, QWidget* parent = nullptr);

    [[nodiscard]] QTabWidget* tabs() const { return m_tabs; }
    [[nodiscard]] KeyedTableView* providersView() const { return m_providersView; }
    [[nodiscard]] KeyedTableView* limitsView() const { return m_limitsView; }

private:
    QTabWidget* m_tabs = nullptr; // owned by the widget tree
    KeyedTableView* m_providersView = nullptr; // owned by the widget tree
    KeyedTableView* m_limitsView = nullptr; // owned by the widget tree
};

} // namespace tollgate::ui
