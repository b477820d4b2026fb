#!/usr/bin/env bash
# The proxy's memory under abusive request bodies (issue 26, item 5): its peak resident set
# (VmHWM in /proc/PID/status) while it serves them, and what it keeps resident afterwards
# (VmRSS 2 s after the last answer), each case against a fresh `tollgate proxy` with the
# default options (--max-buffered 256) in front of a sink that reads every body whole
# (bench/proxymemory.js). The target: a peak of at most 2 x --max-buffered + 64 MiB = 576 MiB.
# Each request's status is checked (200), and so is each body the sink received: byte for byte
# what the client sent (sha256).
#
#   bench/proxymemory.sh BUILD_DIR          (about a minute on a 2-vCPU machine)
#   CASES="late" bench/proxymemory.sh ...   (some cases only: content system late)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:?usage: bench/proxymemory.sh BUILD_DIR}
T="$BUILD/app/tollgate"
. "$ROOT/bench/proxyfixture.sh"
proxyFixture bench/proxymemory.sh
startServer sink.out node "$ROOT/bench/proxymemory.js" sink
SINK="http://127.0.0.1:$(head -1 "$WORK/sink.out")"
"$T" limits set anthropic --requests 1000 --home "$WORK/home" >/dev/null

kib() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$PROXY_PID/status"; }

# One case: a fresh proxy, CONCURRENT bodies of SHAPE and MIB MiB; prints a table row.
measure() {
    local shape=$1 mib=$2 concurrent=$3 what=$4
    startProxy "$T" anthropic --home "$WORK/home" --upstream "$SINK"
    local before seen
    before=$(curl -s "$SINK/_seen" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).length))')
    local t0 t1
    t0=$(date +%s.%N)
    node "$ROOT/bench/proxymemory.js" send "$PROXY" "$shape" "$mib" "$concurrent" > "$WORK/sent"
    t1=$(date +%s.%N)
    local peak
    peak=$(kib VmHWM)
    sleep 2
    local after
    after=$(kib VmRSS)
    stopProxy
    local statuses exact
    statuses=$(cut -d' ' -f1 "$WORK/sent" | sort | uniq -c | awk '{ printf "%s%s x %s", (NR > 1 ? ", " : ""), $1, $2 }')
    seen=$(curl -s "$SINK/_seen" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const x of JSON.parse(s).slice('"$before"'))console.log(x.sha256)})' | sort)
    exact=$(cut -d' ' -f2 "$WORK/sent" | sort | comm -12 - <(echo "$seen") | wc -l)
    printf '| %s | %d x %d MiB | %s | %d of %d | %.0f MiB | %.0f MiB | %.1f s |\n' "$what" "$concurrent" "$mib" \
        "$statuses" "$exact" "$concurrent" "$(echo "$peak / 1024" | bc -l)" "$(echo "$after / 1024" | bc -l)" \
        "$(echo "$t1 - $t0" | bc -l)"
}

echo "| body | requests | statuses | forwarded byte-exact | peak RSS (VmHWM) | RSS 2 s after | time |"
echo "|---|---|---|---|---|---|---|"
for c in ${CASES:-content system late}; do
    case $c in
    content) measure content 1024 1 "1 GiB, one string in messages[0].content, model first" ;;
    system) measure system 1024 1 "1 GiB, one top-level string (\`system\`), model first" ;;
    late) measure late 31 8 "31 MiB, one string, \`model\` last (held whole)" ;;
    esac
done
