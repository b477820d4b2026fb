// The headers nearly every test program includes, compiled once per tree and reused by each
// test (tests/CMakeLists.txt, tollgate_add_test): parsing them was about half of a test's
// compile time at -O0, and scripts/test.sh builds the tests in three trees. Only headers from
// outside the project belong here, so a change to Tollgate's own never rebuilds every test.
#pragma once

#include <QDateTime>
#include <QDeadlineTimer>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>
