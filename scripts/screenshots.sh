#!/usr/bin/env bash
# Regenerates the dashboard screenshots in docs/screenshots/ from a live demo: a temporary
# home where `tollgate demo` runs its simulated callers and 429 storms, plus a second provider
# with steady traffic and a third one paused, so every kind of capacity tile shows. The second
# counts as a provider does today: input and output tokens apart, per-day budgets of a calendar
# day (midnight in Los Angeles) and a model class, so its tile shows each of those lines. The
# window is rendered offscreen (no display needed) at 1280x720, 1920x1080, and in the dark
# palette.
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
"$tollgate" limits set batch-llm --home "$home" -q --requests 30 --window 60
"$tollgate" pause batch-llm --home "$home" -q --reason "nightly re-index"

"$tollgate" demo --home "$home" --duration $((demo_seconds + 60)) >"$work/demo.log" 2>&1 &
pids+=($!)
# Steady traffic on search-api from two callers, each call holding a slot for a moment; the
# recommender's calls go to a model of the class "large".
for caller in web-frontend recommender; do
    model=()
    [[ $caller == recommender ]] && model=(--model search-large-2)
    (
        end=$((SECONDS + demo_seconds + 60))
        while ((SECONDS < end)); do
            "$tollgate" run search-api --home "$home" --caller "$caller" "${model[@]}" \
                --input-tokens 300 --output-tokens 80 -- sleep 0.4 >/dev/null 2>&1 || true
        done
    ) &
    pids+=($!)
done

echo "screenshots.sh: letting the demo run for ${demo_seconds} s..."
sleep "$demo_seconds"

shoot() { # SIZE PALETTE FILE
    QT_QPA_PLATFORM=offscreen "$dashboard" --home "$home" --locks "$home/demo/locks" \
        --settings "$work/dashboard-$3.ini" --size "$1" --palette "$2" --screenshot "$out/$3" 2>/dev/null
    echo "screenshots.sh: wrote $out/$3"
}
shoot 1280x720 light dashboard-1280x720.png
shoot 1920x1080 light dashboard-1920x1080.png
shoot 1600x900 dark dashboard-dark.png
