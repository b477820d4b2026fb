#!/usr/bin/env bash
# Two builds of the Redis home side by side on one redis-server (issue 27's A/B): for each
# round and each given tollgate-bench binary (each loads its own function library), 3,000
# acquires by 1 client, then 8 client processes for 2 s; prints the server's time per FCALL
# (INFO commandstats), its main-thread CPU per call (INFO cpu) and the admissions per second.
# Rounds interleave the builds: on a shared VM only interleaved rounds compare.
#
#   bench/redisab.sh ROUNDS OLD/bench/tollgate-bench NEW/bench/tollgate-bench [...]
set -euo pipefail
R=${1:?usage: bench/redisab.sh ROUNDS BENCH_BINARY...}
shift
[ $# -gt 0 ] || { echo "redisab: name at least one tollgate-bench binary" >&2; exit 2; }
. "$(cd "$(dirname "$0")" && pwd)/scratchredis.sh"
scratchRedis redisab
cpu() { rc INFO cpu | tr -d '\r' | awk -F: '/used_cpu_(user|sys)_main/ { s += $2 } END { print s }'; }
fcall() { rc INFO commandstats | tr -d '\r' | awk -F'[=,]' '/^cmdstat_fcall:/ { print $6, $2 }'; }

echo "| round | build | µs per FCALL, 1 client | µs per FCALL, 8 clients | server CPU µs per call, 8 clients | admissions/s, 8 clients |"
echo "|---:|---|---:|---:|---:|---:|"
for r in $(seq "$R"); do
    for B in "$@"; do
        rc FLUSHALL >/dev/null
        rc FUNCTION FLUSH >/dev/null
        TOLLGATE_BENCH_REDIS_PORT=$PORT "$B" --only redis --redis-calls 500 >/dev/null 2>&1
        rc CONFIG RESETSTAT >/dev/null
        TOLLGATE_BENCH_REDIS_PORT=$PORT "$B" --only redis --redis-calls 3000 >/dev/null 2>&1
        read -r u1 _ < <(fcall)
        rc CONFIG RESETSTAT >/dev/null
        c0=$(cpu)
        out=$(TOLLGATE_BENCH_REDIS_CLIENTS=8 TOLLGATE_BENCH_REDIS_PORT=$PORT "$B" --only redis --duration-ms 2000 2>/dev/null | head -1)
        c1=$(cpu)
        read -r u8 n8 < <(fcall)
        rate=$(echo "$out" | grep -o '[0-9]* admissions/s' | cut -d' ' -f1)
        awk -v r="$r" -v b="$B" -v u1="$u1" -v u8="$u8" -v n="$n8" -v c0="$c0" -v c1="$c1" -v rate="$rate" \
            'BEGIN { printf "| %d | %s | %.1f | %.1f | %.1f | %s |\n", r, b, u1, u8, (c1 - c0) * 1e6 / n, rate }'
    done
done
