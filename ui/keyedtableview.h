#pragma once

// KeyedTableView: a table view whose selection follows the *item*, not the row number. Rows
// carry their identity in KeyedTableModel::KeyRole (through any proxy). The selected key is
// remembered when the user picks a row; after every change of the model (rows appear, vanish,
// re-sort, filter, reset) the selection is put back on the row with that key, or cleared when
// that item is gone. QAbstractItemView's own rule in single-selection mode — move the
// selection to the next row when the selected one is removed — is exactly what must not
// happen here: an action would then hit a neighbour the user never chose.
//
// Optionally (setFollowsEnd) the view stays scrolled to the end while the user is there, also
// across resizes, and stays put once the user scrolls up.

#include <QTableView>

namespace tollgate::ui {

class KeyedTableView final : public QTableView
{
    Q_OBJECT
public:
    explicit KeyedTableView(QWidget* parent = nullptr);

    void setModel(QAbstractItemModel* model) override;

    // The key of the selected item; empty when nothing is selected.
    [[nodiscard]] QString selectedKey() const { return m_key; }
    // Selects the row with this key; false (and nothing selected) when there is none.
    bool selectKey(const QString& key);
    void clearKeySelection();
    [[nodiscard]] int rowOfKey(const QString& key) const;

    void setFollowsEnd(bool follow);
    [[nodiscard]] bool isFollowingEnd() const { return m_following; }

Q_SIGNALS:
    void selectedKeyChanged(const QString& key);

protected:
    void rowsAboutToBeRemoved(const QModelIndex& parent, int start, int end) override;

private:
    void onCurrentChanged(const QModelIndex& current);
    void restoreSelection();
    void setKey(const QString& key);
    [[nodiscard]] QString keyOf(const QModelIndex& index) const;

    QString m_key;
    bool m_restoring = false;
    bool m_followsEnd = false;
    bool m_following = true;
    bool m_autoScrolling = false;
};

} // namespace tollgate::ui
