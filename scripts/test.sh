#!/usr/bin/env bash
# Builds (installing what is missing) and runs every test with CTest.
# GUI tests run under QT_QPA_PLATFORM=offscreen, so no display is needed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$ROOT/scripts/bootstrap.sh"
BUILD_DIR=${TOLLGATE_BUILD_DIR:-$ROOT/build}
export QT_QPA_PLATFORM=offscreen
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 "$@"
