#!/usr/bin/env bash
# capibench.sh [BUILD_DIR]: in-process admission through the C library (and the Python and Node
# clients) next to a `tollgate acquire` spawn, in the same run, on a fresh directory home under /tmp.
# Uses an already built tree (default ./build: targets tollgate, tollgate_c and tollgate_node);
# compiles bench/capibench.c against its libtollgate.so; runs /usr/bin/python3 for the Python rows
# and node (bench/capibench.js, with the tree's tollgate.node) for the Node rows.
# Prints a Markdown table (medians and 99th percentiles, µs per call) and the ratios.
#   CALLS=5000 SPAWNS=200 bench/capibench.sh build
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
CALLS=${CALLS:-5000}
SPAWNS=${SPAWNS:-200}
LIB=$BUILD/clients/c/libtollgate.so
CLI=$BUILD/app/tollgate
[ -f "$LIB" ] && [ -x "$CLI" ] || { echo "capibench: build tollgate and tollgate_c in $BUILD first" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -std=c11 -Wall -Wextra -o "$WORK/capibench" "$ROOT/bench/capibench.c" -I"$ROOT/clients/c" \
    -L"$BUILD/clients/c" -ltollgate -Wl,-rpath,"$BUILD/clients/c"
HOME_DIR=$WORK/home
# Room for every call: the bench measures admission, not waiting.
"$CLI" limits set bench --requests 100000000 --tokens 100000000000 --window 60 --home "$HOME_DIR" -q
{
    "$WORK/capibench" "$HOME_DIR" "$CLI" "$CALLS" "$SPAWNS"
    TOLLGATE_LIBRARY=$LIB PYTHONPATH=$ROOT/clients/python /usr/bin/python3 "$ROOT/bench/capibench.py" "$HOME_DIR" "$CALLS"
    if [ -f "$BUILD/clients/node/tollgate.node" ]; then
        TOLLGATE_NODE_ADDON=$BUILD/clients/node/tollgate.node node "$ROOT/bench/capibench.js" "$HOME_DIR" "$CALLS"
    fi
} >"$WORK/rows"
awk -v calls="$CALLS" -v spawns="$SPAWNS" '
    $1 == "row" { med[$2] = $3; p99[$2] = $4; n[$2] = $5; order[++k] = $2 }
    END {
        print "| row | what | median µs | p99 µs | n |"
        print "|---|---|---:|---:|---:|"
        what["c_admit"] = "C: tollgate_call_admit alone (one store operation)"
        what["c_call"] = "C: new + admit + settle + free (two store operations)"
        what["cli_acquire_spawn"] = "`tollgate acquire` spawned and waited for (one store operation)"
        what["python_admit"] = "Python: Call.admit alone"
        what["python_call"] = "Python: call + admit + settle"
        what["python_with_call"] = "Python: `with tollgate.call(...)` + settle"
        what["node_admit"] = "Node: `await call.admit()` alone (with room: a try on the JS thread)"
        what["node_call"] = "Node: newCall + await admit + settle + free"
        what["node_await_call"] = "Node: `await tollgate.call(...)` + settle + free"
        for (i = 1; i <= k; ++i) printf "| %s | %s | %.1f | %.1f | %d |\n", order[i], what[order[i]], med[order[i]], p99[order[i]], n[order[i]]
        printf "\nspawn / C admission: %.0fx; spawn / C whole call: %.0fx; Python over C: admission +%.1f µs, whole call +%.1f µs\n",
            med["cli_acquire_spawn"] / med["c_admit"], med["cli_acquire_spawn"] / med["c_call"],
            med["python_admit"] - med["c_admit"], med["python_call"] - med["c_call"]
        if ("node_admit" in med)
            printf "Node over C: admission +%.1f µs, whole call +%.1f µs; spawn / Node admission: %.0fx\n",
                med["node_admit"] - med["c_admit"], med["node_call"] - med["c_call"],
                med["cli_acquire_spawn"] / med["node_admit"]
    }' "$WORK/rows"
