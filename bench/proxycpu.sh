#!/usr/bin/env bash
# The CPU time `tollgate proxy` spends per request (user + system, from /proc/PID/stat), for
# JSON answers of the mock provider (tests/helpers/mockprovider.js, which states the provider's
# remaining requests in every answer's headers, as Anthropic's API does), C keep-alive clients
# (bench/proxyload.js) on a directory home. On a 2-CPU machine that the proxy shares with the
# mock and the clients, the latency it adds at 16 clients (bench/proxylatency.sh) moves by
# milliseconds from run to run with whatever else runs; its CPU per request does not, and it
# is what the other processes wait for. Several builds are measured in turns, round after
# round, so the machine's drift falls on each alike. Prints a Markdown table (µs per request).
#
#   bench/proxycpu.sh BUILD_DIR [BUILD_DIR...]        (each: BUILD_DIR/app/tollgate)
#   N=4000 C=16 ROUNDS=5 bench/proxycpu.sh ...        (requests per round, clients, rounds)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: bench/proxycpu.sh BUILD_DIR [BUILD_DIR...]" >&2; exit 2; }
N=${N:-4000}
C=${C:-16}
ROUNDS=${ROUNDS:-5}
HZ=$(getconf CLK_TCK)
. "$ROOT/bench/proxyfixture.sh"
proxyFixture bench/proxycpu.sh
startServer mock.out node "$ROOT/tests/helpers/mockprovider.js"
MOCK="http://127.0.0.1:$(head -1 "$WORK/mock.out")"
BODY='{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}'
cpuOf() { awk -v hz="$HZ" '{ printf "%d", ($14 + $15) * 1000000 / hz }' "/proc/$1/stat"; }
# One round of BUILD: a proxy on a new home, 200 requests to warm it, then N measured; the
# proxy's CPU µs per request is added to got[BUILD].
declare -A got
round() {
    local t="$1/app/tollgate" home="$WORK/home.$RANDOM" before after
    "$t" --home "$home" limits set bench --requests 1000000 --tokens 1000000000 --parallel 64 >/dev/null
    startProxy "$t" bench --home "$home" --upstream "$MOCK"
    node "$ROOT/bench/proxyload.js" "$PROXY" "$C" 200 "$BODY" >/dev/null
    before=$(cpuOf "$PROXY_PID")
    node "$ROOT/bench/proxyload.js" "$PROXY" "$C" "$N" "$BODY" >/dev/null
    after=$(cpuOf "$PROXY_PID")
    stopProxy
    got[$1]="${got[$1]:-} $(((after - before) / N))"
}
for r in $(seq "$ROUNDS"); do
    for b in "$@"; do
        round "$b"
    done
done
echo "| build | proxy CPU µs per request, each round ($N requests, $C keep-alive clients) | median |"
echo "|---|---|---:|"
for b in "$@"; do
    median=$(tr ' ' '\n' <<<"${got[$b]}" | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    echo "| $b | $(sed 's/^ //; s/ /, /g' <<<"${got[$b]}") | $median |"
done
