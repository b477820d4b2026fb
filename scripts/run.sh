#!/usr/bin/env bash
# Builds (installing what is missing) and starts the Tollgate dashboard.
# Arguments are passed to tollgate-dashboard, e.g. scripts/run.sh --home ~/.local/state/tollgate
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$ROOT/scripts/bootstrap.sh"
BUILD_DIR=${TOLLGATE_BUILD_DIR:-$ROOT/build}
exec "$BUILD_DIR/app/tollgate-dashboard" "$@"
