// testpch.h and the Qt Widgets and Charts headers the dashboard's tests include (the tests in
// tests/ui reuse one precompiled copy, see tests/CMakeLists.txt).
#pragma once

#include "testpch.h"

#include <QAbstractItemModelTester>
#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QFrame>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPushButton>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QtCharts/QChart>
