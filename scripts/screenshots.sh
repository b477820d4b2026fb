#!/usr/bin/env bash
# Regenerates the dashboard screenshots in docs/screenshots/ from a live demo: a temporary
# home with six providers, one in each state a tile can show:
#   demo-api    `tollgate demo`'s simulated callers and 429 storms
#   search-api  steady traffic, counted as a provider does today: input and output tokens
#               apart, per-day budgets of a calendar day (midnight in Los Angeles) and a
#               model class ("large"), so its tile shows each of those lines
#   embeddings  steady traffic well within its limits (ok)
#   vision-api  one parallel slot held for seconds by each of three callers: the others queue
#   images-api  a 429 with Retry-After reported just before the shots: backing off
#   batch-llm   paused, with a reason
# The window is rendered offscreen (no display needed) at 1280x720 and 1920x1080, each in the
# light and the dark palette: dashboard-WxH-light.png and dashboard-WxH-dark.png.
#
#   scripts/screenshots.sh               # uses ./build, writes docs/screenshots/
#   BUILD=dir OUT=dir DEMO_SECONDS=90 scripts/screenshots.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
out=${OUT:-$root/docs/screenshots}
demo_seconds=${DEMO_SECONDS:-100}
tollgate=$build/app/tollgate
dashboard=$build/app/tollgate-dashboard
for bin in "$tollgate" "$dashboard"; do
    [[ -x $bin ]] || { echo "screenshots.sh: $bin is missing: build tollgate and tollgate-dashboard first" >&2; exit 2; }
done

work=$(mktemp -d)
home=$work/home
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$out" "$home"
"$tollgate" limits set search-api --home "$home" -q --requests 300 --window 60 --parallel 6 \
    --input-tokens 150000 --output-tokens 40000 \
    --requests-per-day 20000 --output-tokens-per-day 2000000 --day-resets "00:00@America/Los_Angeles"
"$tollgate" limits set search-api --home "$home" -q --class large --models "search-large*" \
    --requests 200 --window 60 --output-tokens 20000
"$tollgate" limits set embeddings --home "$home" -q --requests 600 --window 60 --input-tokens 500000
"$tollgate" limits set vision-api --home "$home" -q --requests 60 --window 60 --parallel 1
"$tollgate" limits set images-api --home "$home" -q --requests 50 --window 60 --parallel 2
"$tollgate" limits set batch-llm --home "$home" -q --requests 30 --window 60
"$tollgate" pause batch-llm --home "$home" -q --reason "nightly re-index"

"$tollgate" demo --home "$home" --duration $((demo_seconds + 60)) >"$work/demo.log" 2>&1 &
pids+=($!)
# caller PROVIDER NAME HOLD_SECONDS PAUSE_SECONDS [tollgate run options...]: calls in a loop,
# each holding its slot (or place) for HOLD_SECONDS, until the shots are taken.
caller() {
    local provider=$1 name=$2 hold=$3 pause=$4
    shift 4
    (
        end=$((SECONDS + demo_seconds + 60))
        while ((SECONDS < end)); do
            "$tollgate" run "$provider" --home "$home" --caller "$name" --timeout 120 "$@" \
                -- sleep "$hold" >/dev/null 2>&1 || true
            sleep "$pause"
        done
    ) &
    pids+=($!)
}
# search-api: two callers; the recommender's calls go to a model of the class "large".
caller search-api web-frontend 0.4 0 --input-tokens 300 --output-tokens 80
caller search-api recommender 0.4 0 --model search-large-2 --input-tokens 300 --output-tokens 80
caller embeddings indexer 0.2 0.3 --input-tokens 2000
caller embeddings search-ui 0.1 0.8 --input-tokens 400
# vision-api: one slot, three callers holding it for 3 s each: two are always waiting.
for name in thumbnailer ocr-worker moderation; do
    caller vision-api "$name" 3 0
done
caller images-api renderer 0.5 0.5

echo "screenshots.sh: letting the demo run for ${demo_seconds} s..."
sleep "$demo_seconds"
# A 429 now, so images-api is still backing off when the window is rendered.
"$tollgate" report-429 images-api --home "$home" -q --caller renderer --retry-after 600

shoot() { # SIZE PALETTE FILE
    QT_QPA_PLATFORM=offscreen "$dashboard" --home "$home" --locks "$home/demo/locks" \
        --settings "$work/dashboard-$3.ini" --size "$1" --palette "$2" --screenshot "$out/$3" 2>/dev/null
    echo "screenshots.sh: wrote $out/$3"
}
for size in 1280x720 1920x1080; do
    for palette in light dark; do
        shoot "$size" "$palette" "dashboard-$size-$palette.png"
    done
done
