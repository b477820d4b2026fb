#!/usr/bin/env bash
# Issue 25's "must show": `tollgate proxy anthropic`, set to the provider's limits in the provider's
# terms, in front of a provider that enforces Anthropic's own rules (tests/helpers/mockprovider.js
# with --input-token-limit/--output-token-limit: input tokens counted as input + cache writes, cache
# reads free; output reserved at max_tokens from the request's start, corrected to the real output
# at its end; requests), with 8 official-SDK clients (@anthropic-ai/sdk, bench/sdkagents.js)
# sending agent-like streamed requests: a long cached system prompt, a growing conversation
# cached incrementally, max_tokens far above the real output. It shows
#   (a) how many requests the mock refused for lack of room (429s) — must be 0, and
#   (b) what was admitted against what the mock's limits allow in the same time: over the whole
#       windows from the mock's first admission to the clients' deadline, each budget's use
#       (input and requests as counted at admission, output as corrected) over budget × windows;
#       the binding budget is the one used most — target ≥ 90 %.
# Loopback only; bounded (SECONDS of calls, then the calls in flight end); cleans up on every exit.
#
#   bench/sdkagents.sh BUILD_DIR [SECONDS]            (default 80 s of calls)
#   Environment (defaults): WINDOW=10 (s, the mock's "minute" and Tollgate's --window),
#   RPW=50 ITPW=40000 OTPW=16000 (requests, input tokens, output tokens per window),
#   RULES_OUT=FILE: keep the mock's record of every admission (GET /_rules) there.
#   CLIENTS=8 MAX_TOKENS=2000 OUTPUT=150 TOOL_TOKENS=900 TURNS=1000 SYSTEM_TOKENS=19000
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:?usage: bench/sdkagents.sh BUILD_DIR [SECONDS]}
SECONDS_OF_CALLS=${2:-80}
T="$BUILD/app/tollgate"
WINDOW=${WINDOW:-10} RPW=${RPW:-50} ITPW=${ITPW:-40000} OTPW=${OTPW:-16000}
CLIENTS=${CLIENTS:-8} MAX_TOKENS=${MAX_TOKENS:-2000} OUTPUT=${OUTPUT:-150} TOOL_TOKENS=${TOOL_TOKENS:-900}
TURNS=${TURNS:-1000} SYSTEM_TOKENS=${SYSTEM_TOKENS:-19000}
[ -d "$ROOT/tests/sdk/node_modules/@anthropic-ai/sdk" ] || { echo "first: (cd tests/sdk && npm ci)" >&2; exit 2; }
WORK=$(mktemp -d)
MOCK_PID= PROXY_PID= DRIVER_PID=
cleanup() {
    set +e # every step, whatever the one before it returned
    # The clients first: a proxy stopped while they still wait gives their requests up to 30 s.
    if [ -n "$DRIVER_PID" ]; then kill "$DRIVER_PID" 2>/dev/null; wait "$DRIVER_PID" 2>/dev/null; fi
    for p in $PROXY_PID $MOCK_PID; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

node "$ROOT/tests/helpers/mockprovider.js" --limit "$RPW" --input-token-limit "$ITPW" --output-token-limit "$OTPW" \
    --window-ms $((WINDOW * 1000)) > "$WORK/mock.out" &
MOCK_PID=$!
for _ in $(seq 100); do [ -s "$WORK/mock.out" ] && break; sleep 0.05; done
MOCK="http://127.0.0.1:$(head -1 "$WORK/mock.out")"
"$T" --home "$WORK/home" limits set anthropic --parallel "$CLIENTS" --requests "$RPW" --input-tokens "$ITPW" \
    --output-tokens "$OTPW" --window "$WINDOW" >/dev/null
"$T" proxy anthropic --home "$WORK/home" --upstream "$MOCK" --listen 127.0.0.1:0 > "$WORK/proxy.out" 2>&1 &
PROXY_PID=$!
for _ in $(seq 100); do grep -q listening "$WORK/proxy.out" 2>/dev/null && break; sleep 0.05; done
PROXY=$(sed -n 's/^listening on \(http:[^ ]*\) .*/\1/p' "$WORK/proxy.out")
[ -n "$PROXY" ] || { echo "the proxy did not start:" >&2; cat "$WORK/proxy.out" >&2; exit 1; }

START_MS=$(date +%s%3N)
# Bounded: the calls stop at SECONDS; a call in flight then gets 5 minutes at most.
timeout $((SECONDS_OF_CALLS + 300)) node "$ROOT/bench/sdkagents.js" "$PROXY" "$CLIENTS" "$SECONDS_OF_CALLS" "$MAX_TOKENS" \
    "$OUTPUT" "$TOOL_TOKENS" "$TURNS" "$SYSTEM_TOKENS" > "$WORK/driver.out" &
DRIVER_PID=$!
wait "$DRIVER_PID" || { echo "the driver failed" >&2; exit 1; }
DRIVER_PID=
DEADLINE_MS=$((START_MS + SECONDS_OF_CALLS * 1000))
curl -s "$MOCK/_rules" > "$WORK/rules.json"
curl -s "$MOCK/_stats" > "$WORK/stats.json"
[ -n "${RULES_OUT:-}" ] && cp "$WORK/rules.json" "$RULES_OUT" # every admission the mock made (time, counted tokens)

node - "$WORK/rules.json" "$WORK/stats.json" "$WORK/driver.out" "$DEADLINE_MS" <<'JS'
const fs = require('fs');
const [rulesFile, statsFile, driverFile, deadlineArg] = process.argv.slice(2);
const r = JSON.parse(fs.readFileSync(rulesFile, 'utf8'));
const stats = JSON.parse(fs.readFileSync(statsFile, 'utf8'));
const d = JSON.parse(fs.readFileSync(driverFile, 'utf8'));
const W = r.windowMs;
const t0 = r.events.length ? r.events[0].t : 0;
const k = Math.floor((Number(deadlineArg) - t0) / W);
const inside = r.events.filter((e) => e.t < t0 + k * W);
const sum = (f) => inside.reduce((a, e) => a + f(e), 0);
const used = { requests: inside.length, input: sum((e) => e.input), output: sum((e) => e.output) };
const pct = (m) => (100 * used[m] / (r.limits[m] * k));
const binding = ['requests', 'input', 'output'].reduce((a, m) => (pct(m) > pct(a) ? m : a), 'requests');
console.log(`${d.sdk}, ${d.clients} clients; ${k} whole windows of ${W / 1000} s from the mock's first admission`);
console.log('');
console.log('| budget | limit per window | used in those windows | allowance (limit × windows) | share of the allowance |');
console.log('|---|---:|---:|---:|---:|');
for (const m of ['requests', 'input', 'output'])
    console.log(`| ${m}${m === binding ? ' (binding)' : ''} | ${r.limits[m]} | ${used[m]} | ${r.limits[m] * k} | ${pct(m).toFixed(1)} % |`);
console.log('');
console.log('| measure | value |');
console.log('|---|---:|');
console.log(`| requests the mock refused for lack of room (429) | **${r.refused}** (requests ${r.refusedBy.requests}, input ${r.refusedBy.input}, output ${r.refusedBy.output}) |`);
console.log(`| admitted throughput on the binding budget (${binding}) vs the mock's allowance | **${pct(binding).toFixed(1)} %** |`);
console.log(`| requests that reached the mock after an answer said a budget was used up, before its reset | ${stats.violations} |`);
console.log(`| calls completed / failed (after the SDK's retries) | ${d.calls} / ${d.failures} |`);
console.log(`| mock admissions in all / streams aborted | ${r.admitted} / ${r.aborted} |`);
console.log(`| input as counted: uncached + cache writes / cache reads (free) | ${r.uncached} + ${r.cacheWrite} / ${r.cacheRead} |`);
console.log(`| output: reserved (max_tokens) / real, per call | ${inside.length ? inside[0].reserved : 0} / ${inside.length ? Math.round(used.output / inside.length) : 0} |`);
console.log(`| call time p50 / max (ms) | ${d.callMsP50} / ${d.callMsMax} |`);
const per = Array.from({ length: k }, (_, i) => inside.filter((e) => e.t >= t0 + i * W && e.t < t0 + (i + 1) * W));
console.log(`| ${binding} used per window, in order | ${per.map((w) => w.reduce((a, e) => a + (binding === 'requests' ? 1 : e[binding]), 0)).join(' ')} |`);
console.log(`| the same without the first window (cold start: each caller's first call is estimated whole) | ${k > 1 ? (100 * per.slice(1).reduce((a, w) => a + w.reduce((b, e) => b + (binding === 'requests' ? 1 : e[binding]), 0), 0) / (r.limits[binding] * (k - 1))).toFixed(1) : '-'} % |`);
if (d.errors.length) console.log('errors: ' + JSON.stringify(d.errors));
process.exitCode = r.refused === 0 ? 0 : 3;
JS
