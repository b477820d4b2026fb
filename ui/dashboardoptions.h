#pragma once

// DashboardOptions: what the command line (or a test) decides before the window opens.

#include <QString>
#include <QStringList>

namespace tollgate::ui {

struct DashboardOptions
{
    QString home;
    QStringList lockDirs; // from --locks; when empty, the saved ones are used
    QString settingsPath; // empty: the user's default settings file
};

} // namespace tollgate::ui
