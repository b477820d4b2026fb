#!/usr/bin/env bash
# What one admission costs a Redis home as the crowd of waiters grows (issue 27, item 5).
# For each N: one provider with --parallel 1; N callers loop `tollgate run` of a 0.2 s command
# (about 5 admissions per second, N-1 waiting at any time). Once all are queued, it counts
# K admissions and reads the server's INFO before and after: FCALLs (and all commands) per
# admission, and the server's CPU time per admission. Prints a Markdown table.
#
#   bench/rediswaiters.sh BUILD_DIR [N...]        (default N: 1 25 50 100 200)
#   ADMISSIONS=40 bench/rediswaiters.sh ...       (admissions counted per row, default 40)
set -euo pipefail
BUILD=${1:?usage: bench/rediswaiters.sh BUILD_DIR [N...]}
shift
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(1 25 50 100 200)
K=${ADMISSIONS:-40}
T=$(cd "$BUILD/app" && pwd)/tollgate
command -v redis-server >/dev/null && command -v redis-cli >/dev/null || {
    echo "rediswaiters: redis-server and redis-cli are needed (Debian package redis-server)" >&2
    exit 2
}
WORK=$(mktemp -d)
PORT=
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
    [ -n "$PORT" ] && redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# A free loopback port: the first one redis-server binds.
for p in $(shuf -i 20000-40000 -n 20); do
    if redis-server --bind 127.0.0.1 --port "$p" --save '' --appendonly no --daemonize yes \
        --dir "$WORK" --logfile "$WORK/redis.log" --pidfile "$WORK/redis.pid" >/dev/null 2>&1; then
        for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
        if redis-cli -p "$p" ping >/dev/null 2>&1; then PORT=$p; break; fi
    fi
done
[ -n "$PORT" ] || { echo "rediswaiters: no redis-server came up" >&2; exit 1; }
export TOLLGATE_HOME="redis://127.0.0.1:$PORT"

info() { # fcalls fcall_usec all_calls cpu_ms
    redis-cli -p "$PORT" info all | tr -d '\r' | awk -F'[:,=]' '
        /^cmdstat_fcall:/ { fc = $3; fu = $5 }
        /^cmdstat_/ { for (i = 2; i < NF; i += 2) if ($i == "calls") all += $(i + 1) }
        /^used_cpu_(sys|user):/ { cpu += $2 }
        END { printf "%d %d %d %d\n", fc, fu, all, cpu * 1000 }'
}
queued() { "$T" status --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(p.get("waiting", 0) for p in (d["providers"].values() if isinstance(d.get("providers"), dict) else d.get("providers", []))))' 2>/dev/null || echo 0; }

echo "| waiters | admissions | FCALL / admission | commands / admission | Redis CPU ms / admission | FCALL µs / admission |"
echo "|---:|---:|---:|---:|---:|---:|"
for N in "${COUNTS[@]}"; do
    redis-cli -p "$PORT" flushall >/dev/null
    redis-cli -p "$PORT" function flush >/dev/null
    "$T" limits set w --parallel 1 --requests 1000000 --window 60 -q
    : > "$WORK/admits"
    PIDS=()
    for i in $(seq "$N"); do
        setsid bash -c 'while :; do "$0" run w --caller "c$1" --timeout 600 -- sh -c "echo x >> \"\$0\"; sleep 0.2" "$2" >/dev/null 2>&1; done' \
            "$T" "$i" "$WORK/admits" &
        PIDS+=($!)
    done
    # All queued (N-1 waiting), or 60 s.
    for _ in $(seq 600); do
        [ "$(queued)" -ge $((N - 1)) ] && break
        sleep 0.1
    done
    start=$(wc -l < "$WORK/admits")
    read -r f0 u0 a0 c0 < <(info)
    for _ in $(seq $((K * 50))); do
        [ $(($(wc -l < "$WORK/admits") - start)) -ge "$K" ] && break
        sleep 0.05
    done
    read -r f1 u1 a1 c1 < <(info)
    n=$(($(wc -l < "$WORK/admits") - start))
    for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    PIDS=()
    awk -v N="$N" -v n="$n" -v f=$((f1 - f0)) -v u=$((u1 - u0)) -v a=$((a1 - a0)) -v c=$((c1 - c0)) 'BEGIN {
        if (n < 1) { printf "| %d | 0 | — | — | — | — |\n", N; exit }
        printf "| %d | %d | %.1f | %.1f | %.2f | %.0f |\n", N, n, f / n, a / n, c / n, u / n }' |
        tee -a "$WORK/rows"
done

# Issue 27's targets: script calls per admission at most 3, and Redis CPU per admission within
# 1.5x of the first row's (1 waiter) at every crowd size.
awk -F'|' '
    $3 + 0 < 1 { next }
    { calls = $4 + 0; cpu = $6 + 0; if (calls > maxCalls) maxCalls = calls
      if (first == "") first = cpu; else if (cpu / first > maxRatio) { maxRatio = cpu / first; at = $2 + 0 } }
    END {
        if (first == "" || first <= 0) exit
        print ""
        print "| target | measured | goal | result |"
        print "|---|---|---|---|"
        printf "| script calls (FCALL) per admission | %.1f at most | ≤ 3 | **%s** |\n", maxCalls, maxCalls <= 3 ? "PASS" : "FAIL"
        if (maxRatio > 0)
            printf "| Redis CPU per admission against the first row | %.2f× (at %d) | ≤ 1.5× | **%s** |\n", maxRatio, at, maxRatio <= 1.5 ? "PASS" : "FAIL"
    }' "$WORK/rows"
