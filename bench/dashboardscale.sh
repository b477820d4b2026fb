#!/usr/bin/env bash
# dashboardscale.sh: the dashboard's cost with many holders (docs/BENCHMARKS.md, "Dashboard").
#
#   bench/dashboardscale.sh [BUILD_DIR] [LOCKS] [PROVIDERS] [SLOTS] [RATE] [SECONDS] [CHURN]
#   defaults:                build       10000   40          250     100    20        10
#
# Fills a temporary home with PROVIDERS*SLOTS held parallel slots and a lock directory with
# LOCKS lock files, all held by one live process (tollgate-dashload hold), starts
# tollgate-dashboard --home H --locks D under QT_QPA_PLATFORM=offscreen, lets it settle, and
# measures its CPU (utime+stime from /proc/PID/stat) over SECONDS idle, then over SECONDS
# while one more lock file in that directory is released and taken again CHURN times/s
# (tollgate-dashload churn), then over SECONDS while tollgate-dashload admits RATE
# requests/s, and its peak RSS (VmHWM). Prints Markdown rows.
set -euo pipefail
BUILD=${1:-build}
LOCKS=${2:-10000}
PROVIDERS=${3:-40}
SLOTS=${4:-250}
RATE=${5:-100}
SECONDS_=${6:-20}
CHURN=${7:-10}
DASH=${DASH:-$BUILD/app/tollgate-dashboard}
LOAD=$BUILD/bench/tollgate-dashload
for b in "$DASH" "$LOAD"; do
    [[ -x $b ]] || { echo "missing $b (configure with -DTOLLGATE_BUILD_BENCH=ON; cmake --build $BUILD --target tollgate-dashboard tollgate-dashload)" >&2; exit 2; }
done

TMP=$(mktemp -d)
HOLDER= DASHPID= ADMIT=
cleanup() {
    for p in $ADMIT $DASHPID $HOLDER; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -m 700 "$TMP/home" && mkdir "$TMP/locks"

"$LOAD" hold "$TMP/home" "$TMP/locks" "$LOCKS" "$PROVIDERS" "$SLOTS" >"$TMP/hold.out" &
HOLDER=$!
for _ in $(seq 600); do grep -q ready "$TMP/hold.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$TMP/hold.out" || { echo "holder did not get ready" >&2; exit 3; }

TICK=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
measure() { # PID SECONDS -> percent of one core
    local a b
    a=$(cpu "$1"); sleep "$2"; b=$(cpu "$1")
    awk -v a="$a" -v b="$b" -v t="$TICK" -v s="$2" 'BEGIN { printf "%.1f", (b - a) * 100 / t / s }'
}

QT_QPA_PLATFORM=offscreen "$DASH" --home "$TMP/home" --locks "$TMP/locks" \
    --settings "$TMP/dashboard.ini" >"$TMP/dash.log" 2>&1 &
DASHPID=$!
sleep 10 # first load and settling
IDLE=$(measure "$DASHPID" "$SECONDS_")
"$LOAD" churn "$TMP/locks/churn.lock" "$CHURN" $((SECONDS_ + 4)) &
ADMIT=$!
sleep 2
CHURNING=$(measure "$DASHPID" "$SECONDS_")
wait "$ADMIT" || true
ADMIT=
RSS_CHURN=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$DASHPID/status")
sleep 2
"$LOAD" admit "$TMP/home" "$RATE" $((SECONDS_ + 4)) &
ADMIT=$!
sleep 2
BUSY=$(measure "$DASHPID" "$SECONDS_")
wait "$ADMIT" || true
ADMIT=
RSS=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$DASHPID/status")
HOLDERS=$((LOCKS + PROVIDERS * SLOTS))
echo "| dashboard idle, $LOCKS lock files + $((PROVIDERS * SLOTS)) slots held | $IDLE % of a core | peak RSS $RSS MB |"
echo "| dashboard, 1 of $((LOCKS + 1)) lock files rewritten $CHURN×/s, + $((PROVIDERS * SLOTS)) slots | $CHURNING % of a core | peak RSS $RSS_CHURN MB |"
echo "| dashboard, $RATE admissions/s, $HOLDERS holders | $BUSY % of a core | |"
