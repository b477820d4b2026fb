#!/usr/bin/env bash
# The latency `tollgate proxy` adds (issue 11): the same requests to the mock provider
# (tests/helpers/mockprovider.js) directly and through the proxy, with 1 and 16 concurrent
# clients; curl's own timers give time to first byte and to the full answer, per request.
# Both paths pay the same curl start-up, so the difference of the two is what the proxy adds
# (admission on a directory home included). Prints a Markdown table.
#
# Two kinds of client: "keep-alive" (bench/proxyload.js: Node's http.Agent keeping its
# connections, as the SDKs do; one process) and "curl" (a new process and connection per
# request: the worst case, where 16 curl processes compete with the proxy for 2 CPUs).
#
# A third path, when BUILD_DIR has bench/tollgate-relayfloor: the least a relay in front of the
# mock can do (bench/relayfloor.cpp), what a second hop alone costs on this machine.
#
#   bench/proxylatency.sh BUILD_DIR [REQUESTS]      (default 400 requests per row and round)
#   ROUNDS=5 bench/proxylatency.sh ...              (rounds per row, default 3: medians)
#   CLIENTS=keep-alive bench/proxylatency.sh ...    (only those rows: keep-alive, curl)
#   PROXY_ARGS="--caller bench" bench/proxylatency.sh ...   (extra proxy options: here, no
#                                                            lookup of the client process)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:?usage: bench/proxylatency.sh BUILD_DIR [REQUESTS]}
N=${2:-400}
T="$BUILD/app/tollgate"
. "$ROOT/bench/proxyfixture.sh"
proxyFixture bench/proxylatency.sh
startServer mock.out node "$ROOT/tests/helpers/mockprovider.js"
MOCK="http://127.0.0.1:$(head -1 "$WORK/mock.out")"
"$T" --home "$WORK/home" limits set bench --requests 1000000 --tokens 1000000000 --parallel 64 >/dev/null
# shellcheck disable=SC2086 # PROXY_ARGS: words
startProxy "$T" bench --home "$WORK/home" --upstream "$MOCK" ${PROXY_ARGS:-}
# The relay floor (bench/relayfloor.cpp), when built: the least a second hop costs here.
FLOOR=
if [ -x "$BUILD/bench/tollgate-relayfloor" ]; then
    startServer floor.out "$BUILD/bench/tollgate-relayfloor" "${MOCK##*:}"
    FLOOR=$(sed -n 's/^listening on //p' "$WORK/floor.out")
fi
urlOf() { case $1 in direct) echo "$MOCK" ;; floor) echo "$FLOOR" ;; proxy) echo "$PROXY" ;; esac; }

# One row: N requests to BASE with C at once; prints "p50 p99" of first byte and full answer (ms).
measure() {
    if [ "$CLIENT" = keep-alive ]; then
        node "$ROOT/bench/proxyload.js" "$1" "$2" "$N" "$3"
        return
    fi
    local base=$1 c=$2 body=$3
    seq "$N" | xargs -P "$c" -I{} curl -s -o /dev/null -w '%{time_starttransfer} %{time_total}\n' \
        "$base/v1/messages" -H 'content-type: application/json' -d "$body" > "$WORK/times"
    local f1 f2 t1 t2
    pct() { sort -n | awk -v p="$1" '{ v[NR] = $1 } END { i = int(p / 100 * NR) + 1; if (i > NR) i = NR; printf "%.2f", v[i] * 1000 }'; }
    f1=$(cut -d' ' -f1 "$WORK/times" | pct 50)
    f2=$(cut -d' ' -f1 "$WORK/times" | pct 99)
    t1=$(cut -d' ' -f2 "$WORK/times" | pct 50)
    t2=$(cut -d' ' -f2 "$WORK/times" | pct 99)
    echo "$f1 $f2 $t1 $t2"
}

# The mock's own time for the streams it served since it had served $1 (p50 p99, ms): its
# events are timers on one event loop, and on a shared 2-CPU machine the CPU the proxy takes
# makes them late, which the client sees as time the proxy added (docs/BENCHMARKS.md).
streamsSoFar() { curl -s "$MOCK/_stats" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).streams))'; }
mockStreamTimes() {
    curl -s "$MOCK/_stats" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);
        const a=j.streamMs.slice(-Math.min(j.streams-'"$1"', j.streamMs.length)).sort((x,y)=>x-y);
        const p=(q)=>a.length?a[Math.min(a.length-1,Math.floor(q/100*a.length))].toFixed(2):"0";console.log(p(50)+" "+p(99))})'
}

# Each row is measured ROUNDS times (default 3), the paths taking turns (direct, the relay
# floor, the proxy), and each figure is the median of its rounds: one run of a 16-client row
# moves by milliseconds at p99 on this machine, and taking turns spreads whatever else the
# machine does over every path alike.
ROUNDS=${ROUNDS:-3}
median() { sort -n | awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] }'; }
# Prints the medians of the six columns (first byte p50 p99, full p50 p99, mock p50 p99) of $1.
medians() { for col in 1 2 3 4 5 6; do cut -d' ' -f"$col" "$1" | median; printf ' '; done; echo; }

echo "| client | answer | clients | path | first byte p50 ms | first byte p99 ms | full p50 ms | full p99 ms |"
echo "|---|---|---:|---|---:|---:|---:|---:|"
for CLIENT in ${CLIENTS:-keep-alive curl}; do
for kind in json stream; do
    if [ "$kind" = json ]; then body='{"model":"m","max_tokens":16}'; else body='{"model":"m","max_tokens":16,"stream":true}'; fi
    for c in 1 16; do
        paths="direct proxy"
        [ -n "$FLOOR" ] && paths="direct floor proxy"
        for path in $paths; do
            : > "$WORK/$path"
            measure "$(urlOf "$path")" "$c" "$body" > /dev/null # warm-up
        done
        for _ in $(seq "$ROUNDS"); do
            for path in $paths; do
                before=$(streamsSoFar)
                read -r f1 f2 f3 f4 < <(measure "$(urlOf "$path")" "$c" "$body")
                read -r m1 m2 < <(mockStreamTimes "$before")
                echo "$f1 $f2 $f3 $f4 $m1 $m2" >> "$WORK/$path"
            done
        done
        read -r d1 d2 d3 d4 dm1 dm2 < <(medians "$WORK/direct")
        read -r p1 p2 p3 p4 pm1 pm2 < <(medians "$WORK/proxy")
        echo "| $CLIENT | $kind | $c | direct | $d1 | $d2 | $d3 | $d4 |"
        if [ -n "$FLOOR" ]; then
            read -r r1 r2 r3 r4 _ _ < <(medians "$WORK/floor")
            echo "| $CLIENT | $kind | $c | relay floor (bench/relayfloor.cpp) | $r1 | $r2 | $r3 | $r4 |"
        fi
        echo "| $CLIENT | $kind | $c | proxy | $p1 | $p2 | $p3 | $p4 |"
        awk -v cl="$CLIENT" -v k="$kind" -v c="$c" -v a="$d1 $d2 $d3 $d4" -v b="$p1 $p2 $p3 $p4" 'BEGIN {
            split(a, x, " "); split(b, y, " ")
            printf "| %s | %s | %s | **added** | %.2f | %.2f | %.2f | %.2f |\n", cl, k, c, y[1]-x[1], y[2]-x[2], y[3]-x[3], y[4]-x[4] }'
        if [ "$kind" = stream ]; then
            # The full answer less the mock's own time for its streams, proxy minus direct: what
            # the proxy added with the upstream's slowdown on the shared CPUs taken out.
            awk -v cl="$CLIENT" -v c="$c" -v a="$d3 $d4 $dm1 $dm2" -v b="$p3 $p4 $pm1 $pm2" 'BEGIN {
                split(a, x, " "); split(b, y, " ")
                printf "| %s | stream | %s | **added, less the mock time** (mock p50 %.2f → %.2f ms) | | | %.2f | %.2f |\n",
                    cl, c, x[3], y[3], (y[1]-y[3])-(x[1]-x[3]), (y[2]-y[4])-(x[2]-x[4]) }'
        fi
    done
done
done
