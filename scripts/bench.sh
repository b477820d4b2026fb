#!/usr/bin/env bash
# Builds and runs the benchmark suite (bench/tollgate-bench) and prints its results as
# Markdown: what the machine is, the table of numbers, and the targets with pass/fail.
# Installs missing Debian packages itself (with sudo when not root), builds into its own
# directory ./build-bench (Release, no GUI, no tests, no Qt), and takes about 30 s to run
# once built (a full run adds bench/rediswaiters.sh, about 2 min). The Redis rows start and
# stop a private redis-server on a loopback port; when redis-server or hiredis is missing they
# are skipped and the output says so.
#
#   scripts/bench.sh                      # everything
#   scripts/bench.sh --only acquire,floor # arguments go to tollgate-bench (see --help)
#   TOLLGATE_BENCH_DIR=dir scripts/bench.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${TOLLGATE_BENCH_DIR:-$ROOT/build-bench}
JOBS=${TOLLGATE_JOBS:-2}

REQUIRED=(cmake ninja-build g++ pkg-config nlohmann-json3-dev)
OPTIONAL=(libhiredis-dev redis-server) # only the Redis comparison rows need these

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for pkg in "${REQUIRED[@]}" "${OPTIONAL[@]}"; do
    installed "$pkg" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "bench: installing missing Debian packages: ${missing[*]}" >&2
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null; then
            SUDO=(sudo)
        else
            echo "bench: need root or sudo to install ${missing[*]}" >&2
        fi
    fi
    if [ "$(id -u)" -eq 0 ] || ((${#SUDO[@]})); then
        "${SUDO[@]}" apt-get update -qq || echo "bench: apt-get update failed" >&2
        if ! DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${missing[@]}" >&2; then
            # Try the required ones alone, so a missing optional package cannot stop the bench.
            req_missing=()
            for pkg in "${REQUIRED[@]}"; do installed "$pkg" || req_missing+=("$pkg"); done
            if ((${#req_missing[@]})); then
                DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${req_missing[@]}" >&2
            fi
        fi
    fi
    for pkg in "${REQUIRED[@]}"; do
        installed "$pkg" || { echo "bench: required package $pkg is missing" >&2; exit 1; }
    done
    for pkg in "${OPTIONAL[@]}"; do
        installed "$pkg" || echo "bench: $pkg is missing: the Redis rows will be skipped" >&2
    done
fi

# A separate build directory: Release, and nothing that needs Qt.
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOLLGATE_BUILD_BENCH=ON \
    -DTOLLGATE_BUILD_GUI=OFF -DTOLLGATE_BUILD_TESTS=OFF >&2
cmake --build "$BUILD_DIR" -j"$JOBS" --target tollgate-bench >&2

BENCH="$BUILD_DIR/bench/tollgate-bench"
REDIS_ARGS=()
if command -v redis-server >/dev/null; then
    REDIS_ARGS=(--redis-server "$(command -v redis-server)")
elif [ -x /usr/bin/redis-server ]; then
    REDIS_ARGS=(--redis-server /usr/bin/redis-server)
fi

cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)
fs=$(df -PT "${TMPDIR:-/tmp}" 2>/dev/null | awk 'NR==2 {print $2}' || true)
echo "## Tollgate benchmark run"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- core 2>/dev/null || echo ' (core/ has uncommitted changes)')"
echo "- machine: $(nproc) CPUs, ${cpu:-unknown CPU}, kernel $(uname -r), temp dirs on ${fs:-?} (${TMPDIR:-/tmp})"
echo "- command: scripts/bench.sh${*:+ $*}"
echo
# Every temp home, the floor files and the redis-server's dir go under one directory that
# is removed on any exit. The bench stops its own redis-server on every exit path (and the
# kernel kills it, via PR_SET_PDEATHSIG, if the bench itself is killed).
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
TMPDIR=$WORK "$BENCH" "${REDIS_ARGS[@]}" "$@"

# The Redis home with a crowd of waiters (issue 27): script calls and server CPU per admission
# from 1 to 200 waiters, with the CLI (`tollgate run`). Only in a full run (no --only), and only
# where redis-server is installed; it builds the CLI into the bench's directory.
if [ $# -eq 0 ] && ((${#REDIS_ARGS[@]})) && command -v redis-cli >/dev/null; then
    cmake --build "$BUILD_DIR" -j"$JOBS" --target tollgate >&2
    echo
    echo "### The Redis home with a crowd of waiters (bench/rediswaiters.sh; targets: at most 3 script calls per admission, Redis CPU per admission within 1.5x from 1 to 200 waiters)"
    echo
    TMPDIR=$WORK "$ROOT/bench/rediswaiters.sh" "$BUILD_DIR"
fi
