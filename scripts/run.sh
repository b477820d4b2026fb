#!/usr/bin/env bash
# Builds (installing what is missing) and starts the Tollgate dashboard.
# Arguments are passed to tollgate-dashboard, e.g. scripts/run.sh --home ~/.local/state/tollgate
#
# Where there is no display (DISPLAY and WAYLAND_DISPLAY unset or empty, QT_QPA_PLATFORM unset
# or xcb: a server over ssh) it says so plainly and exits 2, before building anything. The
# paragraph is the dashboard's own (app/dashboard/displaycheck.cpp), copied here so that a
# missing or stale build cannot end in Qt's platform-plugin wall instead (tst_dashboardcli
# checks that both say the same). --help, --version and --screenshot need no display: they go
# on, and the dashboard renders them off-screen. A DISPLAY no X server answers on is left to
# the dashboard, which checks it before Qt starts and says so in the same words.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${TOLLGATE_BUILD_DIR:-$ROOT/build}
DASHBOARD=$BUILD_DIR/app/tollgate-dashboard

platform=${QT_QPA_PLATFORM:-}
if [[ -z "${DISPLAY:-}" && -z "${WAYLAND_DISPLAY:-}" && (-z $platform || $platform == xcb || $platform == xcb[:\;]*) ]]; then
    needs_display=1
    for arg in "$@"; do
        case "$arg" in
            --) break ;;
            -h | --help | -\? | --help-all | -v | --version | --screenshot | --screenshot=* | -platform | --platform)
                needs_display=0 ;;
        esac
    done
    if [[ $needs_display == 1 ]]; then
        cat >&2 <<'EOF'
tollgate-dashboard: no display found (DISPLAY and WAYLAND_DISPLAY are not set),
so the window cannot open here. Instead:
  tollgate status --watch               capacity at a glance in this terminal (q quits)
  ssh -X, then tollgate-dashboard       the window on your own screen, forwarded by ssh
  tollgate-dashboard --screenshot FILE  the window as a PNG, rendered off-screen here
                                        (QT_QPA_PLATFORM=offscreen, chosen for you)
EOF
        exit 2
    fi
fi

"$ROOT/scripts/bootstrap.sh"
exec "$DASHBOARD" "$@"
