#include "stateicon.h"

namespace tollgate::ui {

QIcon StateIcon::icon(TrayState state)
{
    return QIcon(resourcePath(state));
}

QString StateIcon::name(TrayState state)
{
    switch (state) {
    case TrayState::Normal:
        return QStringLiteral("normal");
    case TrayState::Backoff:
        return QStringLiteral("backoff");
    case TrayState::Paused:
        return QStringLiteral("paused");
    case TrayState::Storm:
        return QStringLiteral("storm");
    }
    return {};
}

QString StateIcon::resourcePath(TrayState state)
{
    switch (state) {
    case TrayState::Normal:
        return QStringLiteral(":/icons/state-ok.svg");
    case TrayState::Backoff:
        return QStringLiteral(":/icons/state-blocked.svg");
    case TrayState::Paused:
        return QStringLiteral(":/icons/state-paused.svg");
    case TrayState::Storm:
        return QStringLiteral(":/icons/state-error.svg");
    }
    return {};
}

QIcon StateIcon::appIcon()
{
    return QIcon(QStringLiteral(":/icons/tollgate.svg"));
}

QIcon StateIcon::toolbarIcon(const QString& name)
{
    return QIcon(QStringLiteral(":/icons/%1.svg").arg(name));
}

} // namespace tollgate::ui
